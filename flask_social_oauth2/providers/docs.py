"""docs/providers.md and the blocks of ``flask social init``, generated from the facts.

``python -m flask_social_oauth2.providers.docs`` rewrites docs/providers.md (run it after
changing a provider); ``--check`` exits 1 when the page is stale, as the tests do.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from . import PROVIDER_FACTS
from .facts import ProviderFacts

#: docs/providers.md of a source checkout.
DOCS_PAGE: Final = Path(__file__).resolve().parents[2] / "docs" / "providers.md"
#: README.md of a source checkout, whose provider count is kept current too.
README: Final = Path(__file__).resolve().parents[2] / "README.md"
#: The marker pair around the number of built-in providers (the README copies it).
COUNT_MARKERS: Final = ("<!-- provider-count -->", "<!-- /provider-count -->")
_COUNT: Final = re.compile(re.escape(COUNT_MARKERS[0]) + r"\d*" + re.escape(COUNT_MARKERS[1]))

_PLAIN: Final = re.compile(r"[\w./${}<>-]+(?: [\w./${}<>-]+)*|https?://[^\s#]+")
_NUMBER: Final = re.compile(r"[-+.\d][\d_.eE+-]*")
_YAML_WORDS: Final = frozenset(
    {"true", "false", "yes", "no", "on", "off", "y", "n", "null", "~", ".nan", ".inf"}
)


def yaml_scalar(value: str) -> str:
    """``value`` as a YAML scalar: plain where every YAML reader sees the same string,
    double-quoted otherwise."""
    if (
        _PLAIN.fullmatch(value)
        and not _NUMBER.fullmatch(value)
        and value.lower() not in _YAML_WORDS
    ):
        return value
    return json.dumps(value, ensure_ascii=False)


def env_name(name: str) -> str:
    """The environment variable prefix of a provider's credentials (``GITHUB``)."""
    return re.sub(r"\W", "_", name).upper()


def init_block(facts: ProviderFacts) -> str:
    """The ready YAML block ``flask social init <name>`` prints (credentials as ``${VAR}``)."""
    prefix = env_name(facts.name)
    entries: list[tuple[str, str]] = []
    if facts.authorization_url is not None:
        entries.append(("authorizationURL", facts.authorization_url))
    entries += [
        ("accessTokenURL", facts.token_url),
        ("redirectURL", f"/authenticate/{facts.name}"),
        ("clientID", f"${{{prefix}_CLIENT_ID}}"),
        ("clientSecret", facts.init_client_secret or f"${{{prefix}_CLIENT_SECRET}}"),
    ]
    if facts.scope:
        entries.append(("scope", facts.scope_separator.join(facts.scope)))
    lines = [f"{facts.name}:"]
    lines += [f"  {key}: {yaml_scalar(value)}" for key, value in entries]
    for key, mapping in (
        ("authorizationParams", facts.init_authorization_params),
        ("customProperties", facts.init_custom_properties),
    ):
        if mapping:
            lines.append(f"  {key}:")
            lines += [f"    {name}: {yaml_scalar(value)}" for name, value in mapping.items()]
    return "\n".join(lines)


def init_blocks() -> dict[str, str]:
    """Built-in provider name -> its :func:`init_block`."""
    return {name: init_block(facts) for name, facts in PROVIDER_FACTS.items()}


def _code(text: str) -> str:
    return f"`{text}`"


def _profile_address(facts: ProviderFacts) -> str:
    no_address = facts.profile_url is None and not facts.profile_url_from_token_url
    if no_address and facts.profile_url_shown is not None:
        return facts.profile_url_shown
    if facts.profile_url_from_token_answer is not None:
        return f"the token answer's `{facts.profile_url_from_token_answer}`"
    if facts.profile_in_token_answer is not None and facts.profile_url is None:
        return f"the token answer's `{facts.profile_in_token_answer}`"
    if facts.profile_url_from_token_url:
        return _code(facts.profile_url_shown or "derived from accessTokenURL")
    if facts.profile_url is not None:
        return _code(facts.profile_url)
    return "OpenID Connect discovery"


def _quirks(facts: ProviderFacts) -> str:
    found: list[str] = []
    if facts.profile_url_from_token_url:
        found.append("derived from `accessTokenURL`")
    if facts.profile_method != "GET":
        body = " with JSON `null` body" if facts.profile_json_body == "null" else ""
        found.append(f"`{facts.profile_method}`{body}")
    found += [f"`{name}={value}` sent" for name, value in facts.authorization_params.items()]
    found += [f"`{param.name}` parameter" for param in facts.profile_params]
    if facts.profile_in_token_answer is not None:
        found.append(f"profile from the token answer (`{facts.profile_in_token_answer}`)")
    if facts.profile_url_from_token_answer is not None:
        found.append(
            f"profile address from the token answer (`{facts.profile_url_from_token_answer}`)"
        )
    if facts.api_base_from_token_answer is not None:
        found.append(f"API base from the token answer (`{facts.api_base_from_token_answer}`)")
    if facts.api_token_scheme != "Bearer":
        found.append(f"`Authorization: {facts.api_token_scheme} <token>`")
    if facts.token_query_parameter is not None:
        found.append(f"token as the `{facts.token_query_parameter}` query parameter")
    if facts.callback_token_server is not None:
        found.append(
            f"token server from the callback's `{facts.callback_token_server.parameter}`"
            " (allow-listed)"
        )
    if facts.no_profile_endpoint:
        found.append("no profile endpoint: user id only")
    if facts.email_list is not None:
        found.append("e-mail from the `/emails` list")
    if facts.profile.avatar_url_template is not None:
        found.append("avatar URL built from id and hash")
    found += sorted(quirk.value for quirk in facts.quirks)
    found += facts.code_quirks
    if facts.client_auth == "client_secret_basic":
        found.append("HTTP Basic token auth")
    if not found:
        return "none (OpenID Connect)" if facts.openid_connect else "none"
    return "; ".join(found)


def _verified(facts: ProviderFacts) -> str:
    """How the table shows where ``email_verified`` comes from."""
    verified = facts.profile.email_verified
    if facts.email_list is not None:
        listed = "`True` from the list's verified entry"
        return listed if facts.profile.email is None else f"{listed}; `None` for a public address"
    if facts.profile.email is None:
        return "no e-mail"
    if isinstance(verified, bool):
        return f"always `{verified}` (documented)"
    if verified is None:
        return "`None` (not said)"
    paths = (verified,) if isinstance(verified, str) else verified
    return ", ".join(map(_code, paths))


def _names(items: Sequence[ProviderFacts]) -> str:
    names = [facts.name for facts in items]
    return ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else "".join(names)


def table(facts_by_name: Mapping[str, ProviderFacts]) -> str:
    """The overview table of the page."""
    rows = [
        "| provider | profile address (without `apiURL`) | quirks handled"
        " | `email_verified` | `customProperties` read |",
        "|---|---|---|---|---|",
    ]
    for name, facts in facts_by_name.items():
        properties = ", ".join(map(_code, facts.custom_properties)) or "—"
        rows.append(
            f"| {name} | {_profile_address(facts)} | {_quirks(facts)} | {_verified(facts)}"
            f" | {properties} |"
        )
    return "\n".join(rows)


def at_a_glance(facts: ProviderFacts) -> str:
    """The line of a provider's section that states its client authentication, API base and
    revocation endpoint, as its facts hold them."""
    base = _code(facts.api_base) if facts.api_base is not None else "none built in"
    if facts.api_base_from_token_answer is not None:
        base += f" (the token answer's `{facts.api_base_from_token_answer}` names the user's)"
    if facts.revocation_url is not None:
        revocation = _code(facts.revocation_url)
    elif facts.openid_connect:
        revocation = "OpenID Connect discovery's `revocation_endpoint`, if any"
    else:
        revocation = "none built in"
    return (
        f"*At a glance:* client authentication `{facts.client_auth}`; API base for"
        f" `social.api()`: {base}; revocation: {revocation}"
        " (`customProperties.apiBaseURL` and `revocationURL` override)."
    )


def section(facts: ProviderFacts) -> str:
    """A provider's section: its heading, docs paragraph, facts line and ready block."""
    return (
        f"## {facts.title}\n\n{facts.docs.strip()}\n\n{at_a_glance(facts)}\n\n"
        f"```yaml\n{init_block(facts)}\n```\n"
    )


def render(facts_by_name: Mapping[str, ProviderFacts] = PROVIDER_FACTS) -> str:
    """The whole of docs/providers.md."""
    all_facts = list(facts_by_name.values())
    openid = [facts for facts in all_facts if facts.openid_connect]
    commas = [facts for facts in all_facts if facts.scope_separator != " "]
    start, end = COUNT_MARKERS
    intro = _INTRO.format(
        count=f"{start}{len(all_facts)}{end}",
        openid=_names(openid),
        commas=_names(commas),
    )
    sections = "\n".join(section(facts) for facts in all_facts)
    return f"{intro}\n{table(facts_by_name)}\n\n{sections}\n{_GENERIC}"


def with_count(text: str, count: int = len(PROVIDER_FACTS)) -> str:
    """``text`` with the number between :data:`COUNT_MARKERS` set to ``count``."""
    start, end = COUNT_MARKERS
    return _COUNT.sub(f"{start}{count}{end}", text)


def main(argv: Sequence[str] | None = None) -> int:
    """Write docs/providers.md and the README's provider count, or with ``--check`` report
    whether they are current."""
    args = sys.argv[1:] if argv is None else list(argv)
    wanted = {DOCS_PAGE: render()}
    if README.is_file():
        readme = README.read_text(encoding="utf-8")
        wanted[README] = with_count(readme)
    if args == ["--check"]:
        stale = [
            path
            for path, text in wanted.items()
            if (path.read_text(encoding="utf-8") if path.is_file() else "") != text
        ]
        for path in stale:
            print(f"{path} is stale: run python -m flask_social_oauth2.providers.docs")
        return 1 if stale else 0
    if args:
        print("usage: python -m flask_social_oauth2.providers.docs [--check]")
        return 2
    for path, text in wanted.items():
        path.write_text(text, encoding="utf-8")
    return 0


_INTRO: Final = """\
# Providers

<!-- Generated from flask_social_oauth2/providers/*.py by
     `python -m flask_social_oauth2.providers.docs`: edit the provider's facts, not this page. -->

Built-in providers: {count}.

A configuration block whose name is a built-in provider (`github`, `google`, ...) gets that
provider's class: it knows the provider's profile address, reads its profile JSON into a
`SocialProfile`, and handles the provider's real quirks. Every other name gets the generic
provider (see [Generic providers](#generic-providers)).

Each block below is ready to paste into your providers YAML file
(`SOCIAL_OAUTH2_PROVIDERS_FILE`) or, as a dict, into `SOCIAL_OAUTH2_PROVIDERS`;
`flask social init <name>` prints it. The credentials come from the environment
(`${{GITHUB_CLIENT_ID}}`, `${{GITHUB_CLIENT_SECRET}}`, ...; a missing variable is a
configuration error naming the provider, key and variable): set them to the values the
provider issued when you registered your app. `redirectURL` is the path of the extension's
route for that provider; a relative path is resolved against the request's host, so set
`TRUSTED_HOSTS`. Register the absolute form (`https://<your host>/authenticate/<name>`) as the
redirect/callback URL at the provider.

Rules common to every provider:

* `apiURL` is optional for built-in providers: it overrides the built-in profile address
  (useful for self-hosted or regional deployments, or to pin an API version).
* The access token is sent in the `Authorization` header (`Bearer`, or the scheme the provider
  demands: see its section), never in a URL, except to the few APIs that take it nowhere else
  (Foursquare's `oauth_token` parameter, HubSpot's token-information address), and then only
  to the provider's own host. VK gets it in a `POST` form body.
* `provider_key` is the provider's immutable user id, as a string. Identify users by
  `(provider_id, provider_key)`, never by e-mail address.
* `username` is the provider's handle (a GitHub login, a Reddit name); `full_name` is the
  display name, else first and last name joined, never the username; `avatar_url` is only ever
  an `http(s)` address (anything else, such as `javascript:` or a relative path, is dropped).
* `email_verified` is `True` or `False` as the provider says (an OpenID Connect
  `email_verified` claim, GitHub's verified list entry, ...), and `None` when it says nothing.
  **Never link accounts by an e-mail address that is not verified**: at a provider that does
  not check addresses anybody can claim someone else's, and linking by it would hand them that
  person's account. Link by `(provider_id, provider_key)`; at most offer to link a verified
  address after the user has signed in to the existing account.
* A field the provider does not send (no e-mail, no picture, no last name) is `None`; an answer
  without a user id is a `ProfileRetrievalError`, never an empty profile.
* `customProperties` is a map of strings; each provider section lists the keys it reads.
  Every provider also reads `tokenEndpointAuthMethod` (`client_secret_post`,
  `client_secret_basic`, `private_key_jwt` with `keyID`, `client_secret_jwt` or `none`: see
  [Current OAuth](current-oauth.md)) to override how the client authenticates at the token
  endpoint, `responseMode` (`query`, the default, or `form_post`: the provider POSTs the
  callback as a form, see [Current OAuth](current-oauth.md)), and
  `issuer` / `discoveryURL` (OpenID Connect discovery, ID token verification and the RFC 9207
  `iss` check on the callback: see [OpenID Connect](openid-connect.md)).
* OpenID Connect providers: when the scope asks for `openid`, their issuer is known (fixed, or
  derived from `accessTokenURL` for the per-tenant ones) and every ID token is verified:
  {openid}.
* Scopes are one string, entries separated by a space, exactly as the provider defines them
  ({commas} use commas instead).
"""

_GENERIC: Final = """\
## Generic providers

A block whose name is not a built-in provider (and is not mapped with
`SOCIAL_OAUTH2_PROVIDER_CLASSES`) uses the generic `OAuth2Provider`: the authorization code
flow with PKCE, then `GET apiURL` with the bearer token. `apiURL` is therefore required. The
profile is read with the OpenID Connect claim names: `sub` (else `id`, else `login`) as
`provider_key`, `preferred_username`, `given_name`, `family_name`, `name`, `email`,
`email_verified` and `picture`. This fits any OpenID Connect provider's userinfo endpoint.

```yaml
my-idp:
  authorizationURL: https://id.example.com/oauth2/authorize
  accessTokenURL: https://id.example.com/oauth2/token
  apiURL: https://id.example.com/oauth2/userinfo
  redirectURL: /authenticate/my-idp
  clientID: ${MY_IDP_CLIENT_ID}
  clientSecret: ${MY_IDP_CLIENT_SECRET}
  scope: openid profile email
  customProperties:
    tokenEndpointAuthMethod: client_secret_basic
```

For a provider whose profile has other field names, subclass `OAuth2Provider` and set
`profile_fields`, then name the class for the block:

```python
from flask_social_oauth2 import OAuth2Provider, SocialOAuth2
from flask_social_oauth2.config.profile_fields import ProfileFields


class AcmeProvider(OAuth2Provider):
    \"\"\"Sign in with Acme.\"\"\"

    default_api_url = "https://api.acme.example/v1/me"
    profile_fields = ProfileFields(
        provider_key="user.id",
        username="user.login",
        full_name="user.display_name",
        email="user.mail",
        email_verified="user.mail_verified",
    )


social = SocialOAuth2(provider_classes={"acme": AcmeProvider})
```

### A provider that differs in one place: one hook

A provider is its facts plus a few named hooks where it truly differs; the built-in ones are
written that way. When your provider differs from the generic flow in one place, give its
class a hooks object that says only that, instead of overriding the flow's methods and calling
`super()`. The hooks (`flask_social_oauth2.providers.hooks.ProviderHooks`) are named for the
step that calls them: `read_token_answer`, `fetch_profile`, `check_issuer` (the callback),
`exchange_fields` (extra fields of the code exchange), `read_profile`, `complete_profile`,
`profile_query`, `authorization_url`, and a few more; every default is plain OAuth 2.0, and a
hook is handed the provider's name, settings and requests, never a step of the flow. Here, a
provider that sends e-mail addresses in mixed case:

```python
# acme_hooks.py
import dataclasses

from flask_social_oauth2 import OAuth2Provider
from flask_social_oauth2.providers.hooks import ProviderHooks


class LowerCaseEmail(ProviderHooks):
    def read_profile(self, provider, raw, info, profile):
        email = profile.email.lower() if profile.email else None
        return dataclasses.replace(profile, email=email)


class MixedCaseProvider(OAuth2Provider):
    hooks = LowerCaseEmail()
```

and its test, with a stand-in profile endpoint on loopback:

```python
# test_acme_hooks.py
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

from flask import Flask

from flask_social_oauth2 import OAuth2Info, SocialOAuth2

from acme_hooks import MixedCaseProvider


class ProfileEndpoint(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"sub": "ada-1815", "email": "Ada@Example.TEST"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_the_hook_reads_the_profile():
    server = HTTPServer(("127.0.0.1", 0), ProfileEndpoint)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    app = Flask(__name__)
    app.config.update(
        SECRET_KEY="for tests only",
        TRUSTED_HOSTS=["localhost"],
        SOCIAL_OAUTH2_PROVIDERS={
            "acme": {
                "authorizationURL": "https://id.acme.example/authorize",
                "accessTokenURL": "https://id.acme.example/token",
                "apiURL": f"http://127.0.0.1:{server.server_port}/me",
                "redirectURL": "/authenticate/acme",
                "clientID": "acme-client",
                "clientSecret": "acme-secret",
            }
        },
    )
    social = SocialOAuth2(app, provider_classes={"acme": MixedCaseProvider})
    with app.app_context():
        info = OAuth2Info(access_token="token", token_type="Bearer")
        profile = social.provider("acme").retrieve_profile(info)
    server.shutdown()
    server.server_close()
    assert profile.provider_key == "ada-1815"
    assert profile.email == "ada@example.test"
```

A hook reads the block's `customProperties` as `provider.options` (a `ProviderOptions`
record, parsed and checked once, when the app starts: `provider.options.issuer`, `.dpop`,
`.title`, ...), never as strings. Keys that only your provider reads are parsed by one more
hook, `read_options(self, read)`: it returns a frozen record of your own, built with
`read.text("key")`, `read.url("key")` or `read.flag("key")`, and calls
`read.problem("key", "must be ...")` for a wrong value, which `init_app` lists with every other
problem; a hook reads it back with `provider.options.own_as(YourOptions)`.

A provider that needs what a built-in one does (an e-mail list, a token scheme, API headers,
a quirk) states it as facts: subclass `BuiltinProvider` and set only the facts that differ
from the defaults.

```python
from flask_social_oauth2 import SocialOAuth2
from flask_social_oauth2.config.profile_fields import ProfileFields
from flask_social_oauth2.providers import BuiltinProvider, ProviderFacts, Quirk
from flask_social_oauth2.providers.facts import EmailList


class ForgeProvider(BuiltinProvider):
    \"\"\"Sign in with a self-hosted forge.\"\"\"

    facts = ProviderFacts(
        title="Forge",
        profile_url="https://forge.example/api/v1/user",
        profile=ProfileFields(provider_key="id", username="login", email="email"),
        api_token_scheme="token",
        email_list=EmailList(entries="", address="email", primary="primary", verified="verified"),
        quirks=frozenset({Quirk.DESCRIPTIVE_USER_AGENT}),
    )


social = SocialOAuth2(provider_classes={"forge": ForgeProvider})
```
"""


if __name__ == "__main__":
    sys.exit(main())
