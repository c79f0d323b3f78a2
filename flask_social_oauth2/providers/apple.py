"""Sign in with Apple: a form-post callback, a client secret made from the ``.p8`` key, and a
profile from the verified ID token plus the name Apple sends on the first sign-in only."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from flask import g, has_request_context, request

from ..config.profile_fields import ProfileFields
from ..config.provider_options import PropertyReader
from ..config.settings import OAuth2Info, OAuth2Settings
from ..errors import (
    ConfigurationProblem,
    IdTokenError,
    ProfileRetrievalError,
)
from ..oauth import flow
from ..oauth.dpop import DPoPKey
from ..web.state_cookie import PendingFlow
from . import apple_secret
from .base import BuiltinProvider, provider_class
from .facts import PropertyRule, ProviderFacts
from .hooks import HookedProvider, ProviderHooks

#: Apple's issuer; ``customProperties.issuer`` replaces it (a test server).
APPLE_ISSUER: Final = "https://appleid.apple.com"
#: Apple's team and key ids: ten capital letters and digits.
_APPLE_ID_PATTERN: Final = (r"[A-Z0-9]{10}", "ABCDE12345")
#: The ``error`` Apple posts when the user cancels.
_CANCELLED: Final = frozenset({"user_cancelled_authorize", "access_denied"})
_G_NAMES: Final = "_social_oauth2_apple_names"

FACTS: Final = ProviderFacts(
    name="apple",
    title="Apple",
    class_name="AppleProvider",
    code=True,
    code_quirks=(
        "`response_mode=form_post` callback with one same-origin hop",
        "ES256 client-secret JWT made from the `.p8` key",
        "profile from the verified ID token and the first sign-in's `user` name",
    ),
    authorization_url="https://appleid.apple.com/auth/authorize",
    token_url="https://appleid.apple.com/auth/token",
    profile_url_shown="none: the verified ID token",
    issuer=APPLE_ISSUER,
    scope=("name", "email"),
    profile=ProfileFields(
        provider_key="sub",
        first_name="user.name.firstName",
        last_name="user.name.lastName",
        email="email",
        email_verified="email_verified",
    ),
    property_rules=(
        PropertyRule("teamID", "pattern", _APPLE_ID_PATTERN),
        PropertyRule("keyID", "pattern", _APPLE_ID_PATTERN),
    ),
    revocation_url="https://appleid.apple.com/auth/revoke",
    init_client_secret="${APPLE_PRIVATE_KEY}",
    init_custom_properties={"teamID": "${APPLE_TEAM_ID}", "keyID": "${APPLE_KEY_ID}"},
    docs="""\
In [Apple's developer account](https://developer.apple.com/account/resources/identifiers/list)
create an *App ID* with *Sign in with Apple*, then a *Services ID* for the web (its identifier
is the `clientID`; register the callback's absolute `https://` URL as its *Return URL*), and a
*Key* with *Sign in with Apple*: download its `.p8` file once. There is no client secret
string: `clientSecret` is the `.p8` private key (PEM text, usually from an environment
variable; line breaks written as `\\n` are accepted), and `customProperties` carry the
ten-character `teamID` and the key's `keyID`. For each token request the library makes the
ES256 client-secret JWT Apple wants (`iss` the team id, `sub` the Services ID, `aud` the
issuer, `iat`, `exp` 30 minutes later, header `kid`), with joserfc, and keeps it per process
until five minutes before it expires; it is sent with `client_secret_post`, the only method
Apple accepts. A `clientSecret` that is not an EC P-256 private key, or a missing `teamID` or
`keyID`, is a configuration error at start-up.

Apple sends the user back with `response_mode=form_post`: a cross-site `POST` to the
callback, which a browser sends without the `SameSite=Lax` state cookie. The cookie stays
Lax: the route answers that `POST` with a tiny page of the app's own origin (one script, run
by a fresh CSP nonce, `form-action 'self'`, never cached) that posts the same fields once
more, now with the cookie, and the sign-in then ends like any other (the `on_authenticated`
handler, or the redirect to `next`). The fields only ever travel in `POST` bodies, so the
`user` JSON, the code and the ID token are in no address or log. A second `POST` without the
state cookie (an expired flow, another browser) is refused like a `GET` callback without
state.

The flow always sends a nonce and PKCE, and always verifies Apple's RS256 ID token, whatever
the scope (default `name email`; `openid` is not needed); a missing or wrong ID token is an
`IdTokenError` (502). The profile comes from the verified ID token: `provider_key` is `sub`,
`email` and `email_verified` its claims (Apple sends the strings `"true"`/`"false"` or
booleans: both are read as booleans); `is_private_email` (a relay address) stays in `raw`.
Apple sends the user's name only on the very first sign-in of a user to your Services ID, as a
`user` form field: `first_name` and `last_name` come from it then (keep them: later sign-ins
give `None`); its unsigned e-mail address is never used. There is no profile endpoint and no
avatar. `customProperties.issuer` points the flow at another issuer (the secret's `aud`, the
expected ID token `iss`, discovery, keys and the revocation endpoint), e.g. a test server.
`provider.revoke(info)` revokes at Apple's `/auth/revoke` with the same client-secret JWT.
""",
)


@dataclass(frozen=True, slots=True)
class AppleOptions:
    """The ``customProperties`` only Sign in with Apple reads (``keyID`` is the generic
    ``provider.options.key_id``)."""

    #: ``teamID``: the team that owns the key (the client secret's ``iss``).
    team_id: str


class AppleHooks(ProviderHooks):
    """Sign in with Apple (see :data:`FACTS`): the form-post callback and its hop, the
    client-secret JWT, and the profile from the ID token and the first ``user`` name."""

    __slots__ = ()

    form_post_callback = True
    #: Apple posts ``user_cancelled_authorize`` when the user cancels.
    cancel_errors = _CANCELLED

    # -- configuration ---------------------------------------------------------------------

    def issuer(self, settings: OAuth2Settings, issuer: str | None) -> str | None:
        """``customProperties.issuer``, else Apple's: Apple always answers an ID token."""
        return issuer or APPLE_ISSUER

    def read_options(self, read: PropertyReader) -> AppleOptions:
        """``teamID`` and ``keyID`` are required (their form is checked by :data:`FACTS`)."""
        for key in ("teamID", "keyID"):
            if not read.text(key):
                read.problem(key, "is required for Sign in with Apple")
        return AppleOptions(team_id=read.text("teamID") or "")

    def settings_problems(
        self, settings: OAuth2Settings, problems: list[ConfigurationProblem]
    ) -> list[ConfigurationProblem]:
        try:
            apple_secret.load_private_key(settings.client_secret)
        except ValueError as error:
            problems.append(
                ConfigurationProblem(
                    None,
                    "clientSecret",
                    f"must be the .p8 private key Apple issued (EC P-256, PEM): it {error}",
                )
            )
        return problems

    def uses_nonce(self, settings: OAuth2Settings) -> bool:
        """Always: Apple always answers an ID token, which must carry this flow's nonce."""
        return True

    # -- requests ------------------------------------------------------------------------------

    def authorization_url(
        self, provider: HookedProvider, pending: PendingFlow, dpop_key: DPoPKey | None
    ) -> str:
        """Apple's authorization address: ``response_mode=form_post`` (unless
        ``authorizationParams`` names another), and the default scope ``name email`` when the
        block sets none."""
        settings = provider.settings
        endpoint = provider.authorization_endpoint()
        assert endpoint is not None
        assert pending.verifier is not None
        params = {"response_mode": "form_post", **settings.authorization_params}
        scope = settings.scope if settings.scope is not None else " ".join(FACTS.scope)
        return flow.authorization_url(
            settings.replace(scope=scope, authorization_params=params),
            endpoint=endpoint,
            redirect_uri=pending.redirect_uri,
            state=pending.state,
            verifier=pending.verifier,
            nonce=pending.nonce,
        )

    def revocation_url(self, provider: HookedProvider, built_in: str | None) -> str | None:
        """Apple's, unless ``customProperties.issuer`` names another issuer: then its discovery
        document's ``revocation_endpoint``."""
        if provider.options.issuer is not None:
            return None
        return built_in

    def token_request_settings(self, provider: HookedProvider) -> OAuth2Settings:
        """The settings with ``clientSecret`` replaced by the client-secret JWT."""
        settings = provider.settings
        claims = apple_secret.SecretClaims(
            team_id=provider.options.own_as(AppleOptions).team_id,
            key_id=provider.options.key_id or "",
            client_id=settings.client_id,
            audience=provider.issuer or APPLE_ISSUER,
        )
        secret = apple_secret.SECRETS.secret(claims, settings.client_secret)
        return settings.replace(client_secret=secret)

    # -- the callback --------------------------------------------------------------------------

    def received_token(self, provider: HookedProvider, info: OAuth2Info) -> OAuth2Info:
        """Keep the name Apple posts on a user's first sign-in (its ``user`` field, read by
        the form-post step) for the profile, by the ID token it came with."""
        posted = request.form.get("user") if has_request_context() else None
        name = first_sign_in_name(posted)
        id_token = info.params.get("id_token")
        if name and isinstance(id_token, str):
            names = g.setdefault(_G_NAMES, {})
            names[id_token] = name
        return info

    def read_token_answer(
        self, provider: HookedProvider, info: OAuth2Info, pending: PendingFlow | None
    ) -> OAuth2Info | None:
        if not isinstance(info.params.get("id_token"), str):
            raise IdTokenError(
                provider.name, "token response has no id_token (Apple always sends one)"
            )
        return None  # verified as any OpenID Connect provider's

    # -- the profile -------------------------------------------------------------------------

    def fetch_profile(self, provider: HookedProvider, info: OAuth2Info) -> Mapping[str, Any]:
        """The verified ID token's claims, with the first sign-in's name as ``user``."""
        claims = info.id_token_claims
        if claims is None:
            raise ProfileRetrievalError(
                provider.name, "no verified ID token to read the profile from"
            )
        raw = dict(claims)
        raw.pop("user", None)
        names: dict[str, dict[str, str]] = g.get(_G_NAMES, {})
        name = names.get(str(info.params.get("id_token")))
        if name:
            raw["user"] = {"name": dict(name)}
        return raw


if TYPE_CHECKING:  # for type checkers, the class is what it is: a BuiltinProvider
    AppleProvider: TypeAlias = BuiltinProvider
else:
    AppleProvider = provider_class(
        FACTS,
        AppleHooks(),
        module=__name__,
        doc="Sign in with Apple: a form-post callback, a client-secret JWT, the ID token profile.",
    )


def first_sign_in_name(user: str | None) -> dict[str, str]:
    """``firstName`` and ``lastName`` of Apple's ``user`` form field (a JSON object with a
    ``name``), only those that are non-empty strings; ``{}`` for anything else. Its ``email``
    is unsigned and never read."""
    if not user:
        return {}
    try:
        data = json.loads(user)
    except (ValueError, RecursionError):
        return {}
    name = data.get("name") if isinstance(data, dict) else None
    if not isinstance(name, dict):
        return {}
    found = {}
    for key in ("firstName", "lastName"):
        value = name.get(key)
        if isinstance(value, str) and value.strip():
            found[key] = value.strip()
    return found
