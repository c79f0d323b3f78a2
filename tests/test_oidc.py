"""OpenID Connect: discovery, ID token verification, RFC 9207 and token refresh.

The provider is the real OpenID provider on loopback (:class:`LocalIdentityProvider`, Authlib's
server classes), made to misbehave with its knobs; where a test needs an answer that provider
cannot give (an EC key, an HMAC token, a provider that does not rotate refresh tokens), a
:class:`FakeOpenIDProvider` serves hand-signed answers (signed with joserfc) from the fault
server.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import importlib.util
import json
import logging
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit

import pytest
from fault_server import Behaviour, FaultServer
from flask import Flask
from helpers import (
    ALICE,
    CLIENT_ID,
    CLIENT_SECRET,
    LOCAL_REDIRECT,
    MakeApp,
    callback_path,
    follow_to_provider,
    query_of,
    sign_in,
)
from joserfc import jwt
from joserfc.jwk import ECKey, RSAKey

from flask_social_oauth2 import (
    OAuth2Info,
    OAuth2Provider,
    SocialOAuth2,
    SocialProfile,
    SocialProvider,
    flow,
)
from flask_social_oauth2 import oidc as oidc_module
from flask_social_oauth2.errors import (
    AuthenticationError,
    ConfigurationError,
    DiscoveryError,
    IdTokenError,
    ProfileRetrievalError,
    StateError,
    UnexpectedResponseError,
)
from flask_social_oauth2.local_idp import LocalIdentityProvider
from flask_social_oauth2.oidc import (
    ProviderMetadata,
    cache_seconds,
    expected_token_issuer,
    issuer_from_discovery_url,
    issuer_matches,
)
from flask_social_oauth2.providers import BUILTIN_PROVIDERS
from flask_social_oauth2.settings import OAuth2Settings
from flask_social_oauth2.signals import authentication_failed

Tamper = Callable[[dict[str, Any], dict[str, Any]], tuple[dict[str, Any], dict[str, Any]]]


@pytest.fixture(autouse=True)
def fresh_caches() -> Iterator[None]:
    """Discovery documents and key sets are cached per process: start and end each test empty
    (a later server may get the port of an earlier one)."""
    oidc_module.clear_caches()
    yield
    oidc_module.clear_caches()


# -- helpers -------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What the app's hooks and signals saw."""

    infos: list[OAuth2Info] = field(default_factory=list)
    profiles: list[SocialProfile] = field(default_factory=list)
    errors: list[AuthenticationError] = field(default_factory=list)

    @property
    def error(self) -> AuthenticationError:
        assert len(self.errors) == 1, self.errors
        return self.errors[0]


def watch(app: Flask) -> Outcome:
    """Record the app's successful sign-ins (through ``on_authenticated``) and failures (through
    the ``authentication_failed`` signal, so that the built-in error page still answers)."""
    outcome = Outcome()
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension

    @social.on_authenticated
    def done(provider: SocialProvider, info: OAuth2Info, profile: SocialProfile) -> Any:
        outcome.infos.append(info)
        outcome.profiles.append(profile)
        return app.redirect("/")

    def failed(sender: Flask, provider_name: str, error: AuthenticationError) -> None:
        outcome.errors.append(error)

    authentication_failed.connect(failed, app, weak=False)
    return outcome


@pytest.fixture
def issued(monkeypatch: pytest.MonkeyPatch) -> list[OAuth2Info]:
    """Every token response the package reads (code exchanges and refreshes)."""
    seen: list[OAuth2Info] = []
    original = flow.parse_token_response

    def spy(provider: str, response: Any, step: str = "token request") -> OAuth2Info:
        info = original(provider, response, step)
        seen.append(info)
        return info

    monkeypatch.setattr(flow, "parse_token_response", spy)
    return seen


def token_strings(infos: list[OAuth2Info]) -> list[str]:
    """The access, refresh and ID tokens of ``infos``."""
    found: list[str] = []
    for info in infos:
        found.append(info.access_token)
        if info.refresh_token:
            found.append(info.refresh_token)
        if isinstance(info.params.get("id_token"), str):
            found.append(info.params["id_token"])
    assert found
    return found


def assert_not_logged(records: list[logging.LogRecord], secrets: list[str]) -> None:
    for record in records:
        text = record.getMessage()
        if record.exc_info:
            text += logging.Formatter().formatException(record.exc_info)
        for secret in secrets:
            assert secret not in text, f"a token appears in the log: {record.name}"


def discovery_block(server: LocalIdentityProvider, **custom: str) -> dict[str, Any]:
    """A block with only the required keys, a scope and ``customProperties.issuer``."""
    return {
        "accessTokenURL": server.token_url,
        "redirectURL": "/authenticate/local",
        "clientID": CLIENT_ID,
        "clientSecret": CLIENT_SECRET,
        "scope": "openid profile email",
        "customProperties": {"issuer": server.issuer, **custom},
    }


def with_query(url: str, **changes: str | None) -> str:
    """``url`` with query parameters replaced (or removed, for ``None``)."""
    query = query_of(url)
    for name, value in changes.items():
        if value is None:
            query.pop(name, None)
        else:
            query[name] = value
    return f"{urlsplit(url).path}?{urlencode(query)}"


def local_provider(app: Flask, name: str = "local") -> OAuth2Provider:
    provider = app.extensions["social_oauth2"].providers[name]
    assert isinstance(provider, OAuth2Provider)
    return provider


# -- discovery -----------------------------------------------------------------------------------


def test_sign_in_with_discovery_only(
    make_app: MakeApp,
    idp: LocalIdentityProvider,
    issued: list[OAuth2Info],
    captured_logs: list[logging.LogRecord],
) -> None:
    app = make_app({"local": discovery_block(idp)})
    outcome = watch(app)
    client = app.test_client()
    started = client.get("/authenticate/local")
    assert started.status_code == 302
    assert started.headers["Location"].startswith(idp.authorization_url + "?")
    response = client.get(callback_path(follow_to_provider(started.headers["Location"])))
    assert response.status_code == 302, response.text
    (info,) = outcome.infos
    (profile,) = outcome.profiles
    assert profile.provider_key == ALICE.sub
    assert profile.email == ALICE.email
    assert info.id_token_claims is not None
    assert info.id_token_claims["sub"] == ALICE.sub
    assert info.id_token_claims["aud"] == CLIENT_ID
    assert info.id_token_claims["nonce"] == idp.authorization_requests[-1]["nonce"]
    assert len(idp.userinfo_requests) == 1  # apiURL filled with the userinfo_endpoint
    assert (idp.discovery_requests, idp.jwks_requests) == (1, 1)
    secrets = token_strings(issued)
    assert not any(secret in repr(info) for secret in secrets)
    assert "sub" in repr(info)
    assert_not_logged(captured_logs, secrets)


def test_second_sign_in_uses_the_cached_discovery_and_keys(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    app = make_app({"local": discovery_block(idp)})
    for _ in range(3):
        assert sign_in(app.test_client()).status_code == 302
    other_app = make_app({"local": discovery_block(idp)})
    assert sign_in(other_app.test_client()).status_code == 302
    assert (idp.discovery_requests, idp.jwks_requests) == (1, 1)


def test_discovery_url_instead_of_issuer(make_app: MakeApp, idp: LocalIdentityProvider) -> None:
    block = discovery_block(idp)
    block["customProperties"] = {"discoveryURL": idp.discovery_url}
    app = make_app({"local": block})
    assert local_provider(app).issuer == idp.issuer
    assert sign_in(app.test_client()).status_code == 302
    assert idp.discovery_requests == 1


def test_setup_needs_no_network(make_app: MakeApp, fault_server: FaultServer) -> None:
    block = {
        "accessTokenURL": f"{fault_server.url}/token",
        "redirectURL": "/authenticate/lazy",
        "clientID": CLIENT_ID,
        "clientSecret": CLIENT_SECRET,
        "scope": "openid",
        "customProperties": {"issuer": fault_server.url},
    }
    app = make_app({"lazy": block})
    with app.app_context():
        provider = local_provider(app, "lazy")
        assert provider.issuer == fault_server.url
        provider.with_settings(lambda s: s.replace(scope="openid email"))
    assert fault_server.count() == 0


def fake_document(issuer: str, **changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "issuer": issuer,
        "authorization_endpoint": f"{issuer}/authorize",
        "token_endpoint": f"{issuer}/token",
        "userinfo_endpoint": f"{issuer}/userinfo",
        "jwks_uri": f"{issuer}/jwks",
        "response_types_supported": ["code"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256", "ES256"],
    }
    document.update(changes)
    return {key: value for key, value in document.items() if value is not None}


def fake_app(
    make_app: MakeApp,
    server: FaultServer,
    classes: dict[str, str] | None = None,
    **changes: Any,
) -> Flask:
    """An app with one provider, ``fake``, whose issuer is ``server``."""
    block: dict[str, Any] = {
        "accessTokenURL": f"{server.url}/token",
        "redirectURL": "/authenticate/fake",
        "clientID": CLIENT_ID,
        "clientSecret": CLIENT_SECRET,
        "scope": "openid profile email",
        "customProperties": {"issuer": server.url},
    }
    block.update(changes)
    return make_app(
        {"fake": block}, SOCIAL_OAUTH2_TIMEOUT=1, SOCIAL_OAUTH2_PROVIDER_CLASSES=classes or {}
    )


WELL_KNOWN = "/.well-known/openid-configuration"


def test_discovery_naming_another_issuer_is_refused(
    make_app: MakeApp, fault_server: FaultServer
) -> None:
    fault_server.set(WELL_KNOWN, Behaviour.json(fake_document("https://other.example")))
    app = fake_app(make_app, fault_server)
    outcome = watch(app)
    client = app.test_client()
    for expected_fetches in (1, 2):  # a refused document is not cached
        response = client.get("/authenticate/fake")
        assert response.status_code == 502
        assert fault_server.count(WELL_KNOWN) == expected_fetches
    assert all(isinstance(error, DiscoveryError) for error in outcome.errors)
    assert "another issuer" in str(outcome.errors[0])


@pytest.mark.parametrize(
    ("behaviour", "status", "message"),
    [
        (Behaviour.json({"error": "boom"}, status=500), 502, "HTTP 500"),
        (Behaviour.html("<h1>maintenance</h1>"), 502, "no JSON"),
        (Behaviour.json(["a", "list"]), 502, "not a JSON object"),
        (Behaviour.json({"authorization_endpoint": "https://x.example/a"}), 502, "no issuer"),
        (Behaviour.hang(), 504, "timed out"),
    ],
    ids=["http-500", "html", "json-array", "no-issuer", "timeout"],
)
def test_discovery_failures_are_clear_errors(
    make_app: MakeApp, fault_server: FaultServer, behaviour: Behaviour, status: int, message: str
) -> None:
    fault_server.set(WELL_KNOWN, behaviour)
    app = fake_app(make_app, fault_server)
    outcome = watch(app)
    response = app.test_client().get("/authenticate/fake")
    assert response.status_code == status
    assert isinstance(outcome.error, DiscoveryError)
    assert message in str(outcome.error)
    assert "'fake'" in str(outcome.error)


def test_discovered_endpoint_must_be_https(make_app: MakeApp, fault_server: FaultServer) -> None:
    document = fake_document(fault_server.url, jwks_uri="http://keys.example/jwks")
    fault_server.set(WELL_KNOWN, Behaviour.json(document))
    app = fake_app(make_app, fault_server)
    outcome = watch(app)
    assert app.test_client().get("/authenticate/fake").status_code == 502
    assert "jwks_uri is not an https address" in str(outcome.error)


class Clock:
    """A controllable stand-in for the module's monotonic clock."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.offset


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(oidc_module, "_monotonic", clock)
    return clock


def test_discovery_cache_honours_max_age(
    make_app: MakeApp, fault_server: FaultServer, clock: Clock
) -> None:
    fault_server.set(
        WELL_KNOWN,
        Behaviour.json(fake_document(fault_server.url), headers={"Cache-Control": "max-age=120"}),
    )
    app = fake_app(make_app, fault_server)
    provider = local_provider(app, "fake")
    with app.app_context():
        assert provider.openid_metadata() is not None
        clock.offset = 100
        provider.openid_metadata()
        assert fault_server.count(WELL_KNOWN) == 1
        clock.offset = 130
        provider.openid_metadata()
        assert fault_server.count(WELL_KNOWN) == 2


def test_expired_document_serves_on_when_its_successor_fails(
    make_app: MakeApp,
    fault_server: FaultServer,
    clock: Clock,
    captured_logs: list[logging.LogRecord],
) -> None:
    fault_server.set(
        WELL_KNOWN,
        Behaviour.sequence(
            Behaviour.json(fake_document(fault_server.url)), Behaviour.json({}, status=503)
        ),
    )
    app = fake_app(make_app, fault_server)
    provider = local_provider(app, "fake")
    with app.app_context():
        first = provider.openid_metadata()
        clock.offset = oidc_module.DEFAULT_CACHE_SECONDS + 1
        assert provider.openid_metadata() == first
        assert fault_server.count(WELL_KNOWN) == 2
        clock.offset += oidc_module.MIN_CACHE_SECONDS / 2
        provider.openid_metadata()
        assert fault_server.count(WELL_KNOWN) == 2  # retried after MIN_CACHE_SECONDS only
        clock.offset += oidc_module.MAX_STALE_SECONDS
        with pytest.raises(DiscoveryError):
            provider.openid_metadata()
    assert any("keeping the previous discovery document" in r.getMessage() for r in captured_logs)


def test_concurrent_first_use_fetches_once(make_app: MakeApp, fault_server: FaultServer) -> None:
    fault_server.set(
        WELL_KNOWN, Behaviour.delayed(0.3, Behaviour.json(fake_document(fault_server.url)))
    )
    app = fake_app(make_app, fault_server)
    provider = local_provider(app, "fake")
    found: list[ProviderMetadata | None] = []

    def use() -> None:
        with app.app_context():
            found.append(provider.openid_metadata())

    threads = [threading.Thread(target=use) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(found) == 8
    assert all(item is not None and item.issuer == fault_server.url for item in found)
    assert fault_server.count(WELL_KNOWN) == 1


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        (None, 3600),
        ("max-age=600", 600),
        ("public, max-age=7200, must-revalidate", 7200),
        ('max-age="900"', 900),
        ("max-age=0", 60),
        ("max-age=5", 60),
        ("max-age=99999999", 86400),
        ("no-store", 60),
        ("no-cache, max-age=600", 60),
        ("max-age=abc", 3600),
    ],
)
def test_cache_seconds(header: str | None, seconds: int) -> None:
    assert cache_seconds({} if header is None else {"cache-control": header}) == seconds


@pytest.mark.parametrize(
    ("url", "issuer"),
    [
        ("https://id.example/.well-known/openid-configuration", "https://id.example"),
        ("https://id.example/t/1/.well-known/openid-configuration", "https://id.example/t/1"),
        ("https://id.example/.well-known/oauth-authorization-server/t/1", "https://id.example/t/1"),
        ("https://id.example/config.json", None),
        ("https://id.example/.well-known/openid-configuration?x=1", None),
    ],
)
def test_issuer_from_discovery_url(url: str, issuer: str | None) -> None:
    assert issuer_from_discovery_url(url) == issuer


def test_multi_tenant_issuer_template() -> None:
    template = "https://login.microsoftonline.com/{tenantid}/v2.0"
    assert issuer_matches("https://login.microsoftonline.com/common/v2.0", template)
    assert issuer_matches("https://login.microsoftonline.com/organizations/v2.0", template)
    assert not issuer_matches("https://login.microsoftonline.com/a/b/v2.0", template)
    assert not issuer_matches("https://evil.example/common/v2.0", template)
    assert not issuer_matches("https://id.example", "https://other.example")
    metadata = ProviderMetadata.from_document(
        "microsoft", {"issuer": template, "jwks_uri": "https://login.microsoftonline.com/k"}
    )
    tenant = "9188040d-6c67-4c5b-b112-36a304b66dad"
    assert (
        expected_token_issuer(metadata, {"tid": tenant})
        == f"https://login.microsoftonline.com/{tenant}/v2.0"
    )
    assert expected_token_issuer(metadata, {}) is None
    assert expected_token_issuer(metadata, {"tid": "../x"}) is None


# -- configuration -------------------------------------------------------------------------------


def test_generic_provider_with_issuer_needs_no_api_url(make_app: MakeApp) -> None:
    block = {
        "accessTokenURL": "https://id.example/token",
        "redirectURL": "/authenticate/corp",
        "clientID": CLIENT_ID,
        "clientSecret": CLIENT_SECRET,
        "scope": "openid email",
    }
    with pytest.raises(ConfigurationError, match="apiURL"):
        make_app({"corp": block})
    app = make_app({"corp": {**block, "customProperties": {"issuer": "https://id.example"}}})
    assert local_provider(app, "corp").issuer == "https://id.example"


@pytest.mark.parametrize(
    ("properties", "key", "message"),
    [
        ({"issuer": "http://id.example"}, "customProperties.issuer", "https"),
        ({"issuer": "https://id.example?tenant=1"}, "customProperties.issuer", "query"),
        ({"issuer": "not a url"}, "customProperties.issuer", ""),
        ({"discoveryURL": "ftp://id.example/x"}, "customProperties.discoveryURL", "http"),
        ({"discoveryURL": "https://id.example/conf"}, "customProperties.discoveryURL", "issuer"),
        ({"idTokenAlgorithms": "RS256 HS256"}, "customProperties.idTokenAlgorithms", "HS256"),
        ({"idTokenAlgorithms": "none"}, "customProperties.idTokenAlgorithms", "'none'"),
        ({"idTokenAlgorithms": " "}, "customProperties.idTokenAlgorithms", "asymmetric"),
        ({"idTokenLeeway": "ten"}, "customProperties.idTokenLeeway", "seconds"),
        ({"idTokenLeeway": "900"}, "customProperties.idTokenLeeway", "300"),
    ],
)
def test_openid_properties_are_checked_at_setup(
    make_app: MakeApp, properties: dict[str, str], key: str, message: str
) -> None:
    block = {
        "accessTokenURL": "https://id.example/token",
        "redirectURL": "/authenticate/corp",
        "apiURL": "https://id.example/userinfo",
        "clientID": CLIENT_ID,
        "clientSecret": CLIENT_SECRET,
        "scope": "openid",
        "customProperties": properties,
    }
    with pytest.raises(ConfigurationError) as raised:
        make_app({"corp": block})
    problems = [p for p in raised.value.problems if p.key == key]
    assert problems, raised.value
    assert message in problems[0].message
    assert problems[0].provider == "corp"


def test_verifying_without_joserfc_is_a_setup_error(
    make_app: MakeApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> Any:
        return None if name == "joserfc" else real_find_spec(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    block = {
        "accessTokenURL": "https://oauth2.googleapis.com/token",
        "redirectURL": "/authenticate/google",
        "clientID": CLIENT_ID,
        "clientSecret": CLIENT_SECRET,
        "scope": "openid email",
    }
    with pytest.raises(ConfigurationError, match=r"flask-social-oauth2\[oidc\]"):
        make_app({"google": block})
    make_app({"google": {**block, "scope": "email"}})  # plain OAuth 2.0 needs no joserfc


@pytest.mark.parametrize(
    ("name", "token_url", "issuer"),
    [
        ("google", "https://oauth2.googleapis.com/token", "https://accounts.google.com"),
        (
            "microsoft",
            "https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/token",
            "https://login.microsoftonline.com/contoso.onmicrosoft.com/v2.0",
        ),
        (
            "microsoft",
            "https://login.microsoftonline.com/common/oauth2/v2.0/token",
            "https://login.microsoftonline.com/common/v2.0",
        ),
        (
            "okta",
            "https://acme.okta.com/oauth2/default/v1/token",
            "https://acme.okta.com/oauth2/default",
        ),
        ("okta", "https://acme.okta.com/oauth2/v1/token", "https://acme.okta.com"),
        ("auth0", "https://acme.eu.auth0.com/oauth/token", "https://acme.eu.auth0.com/"),
        (
            "keycloak",
            "https://sso.example.com/realms/acme/protocol/openid-connect/token",
            "https://sso.example.com/realms/acme",
        ),
        (
            "keycloak",
            "https://sso.example.com:8443/auth/realms/acme/protocol/openid-connect/token",
            "https://sso.example.com:8443/auth/realms/acme",
        ),
        (
            "linkedin",
            "https://www.linkedin.com/oauth/v2/accessToken",
            "https://www.linkedin.com/oauth",
        ),
        ("yahoo", "https://api.login.yahoo.com/oauth2/get_token", "https://api.login.yahoo.com"),
        ("slack", "https://slack.com/api/openid.connect.token", "https://slack.com"),
        ("github", "https://github.com/login/oauth/access_token", None),
    ],
)
def test_builtin_openid_providers_derive_their_issuer(
    name: str, token_url: str, issuer: str | None
) -> None:
    cls = BUILTIN_PROVIDERS[name]
    settings = OAuth2Settings(
        access_token_url=token_url,
        redirect_url=f"/authenticate/{name}",
        client_id=CLIENT_ID,
        client_secret=CLIENT_SECRET,
        scope="openid email",
    )
    assert cls.openid_connect is (issuer is not None)
    assert cls.issuer_for(settings) == issuer
    # Without openid in the scope a built-in is plain OAuth 2.0 (no discovery, no ID token).
    assert cls.issuer_for(settings.replace(scope="email")) is None
    assert cls.issuer_for(settings.replace(scope=None)) is None
    # customProperties.issuer overrides the built-in issuer.
    custom = settings.replace(custom_properties={"issuer": "https://id.example"})
    assert cls.issuer_for(custom) == "https://id.example"


def test_info_repr_names_claims_only() -> None:
    info = OAuth2Info(
        access_token="at-secret",
        refresh_token="rt-secret",
        params={"id_token": "idt-secret"},
        id_token_claims={"sub": "user-secret-id", "email": "a@example.test"},
    )
    shown = repr(info)
    for secret in ("at-secret", "rt-secret", "idt-secret", "user-secret-id", "a@example.test"):
        assert secret not in shown
    assert "id_token_claims=<email, sub>" in shown
    with pytest.raises(TypeError):
        info.id_token_claims["sub"] = "x"  # type: ignore[index]


# -- ID token verification against the real provider ---------------------------------------------


def _claims(**changes: Any) -> Tamper:
    def tamper(
        header: dict[str, Any], claims: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        updated = {**claims, **changes}
        return header, {key: value for key, value in updated.items() if value is not None}

    return tamper


def _header(**changes: Any) -> Tamper:
    def tamper(
        header: dict[str, Any], claims: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        return {**header, **changes}, claims

    return tamper


def _times(exp: int, iat: int) -> Tamper:
    def tamper(
        header: dict[str, Any], claims: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        now = int(time.time())
        return header, {**claims, "exp": now + exp, "iat": now + iat}

    return tamper


BAD_ID_TOKENS: dict[str, tuple[Tamper | None, str, str]] = {
    "wrong-signature": (None, "other_key", "signature is not valid"),
    "alg-none": (None, "none", "algorithm 'none' is not allowed"),
    "wrong-iss": (_claims(iss="https://evil.example"), "key", "iss is not the provider's"),
    "wrong-aud": (_claims(aud="another-client"), "key", "aud does not name this client"),
    "no-aud": (_claims(aud=None), "key", "lacks the claims aud"),
    "audiences-without-azp": (_claims(aud=[CLIENT_ID, "x"]), "key", "several audiences"),
    "wrong-azp": (_claims(azp="another-client"), "key", "azp is not this client"),
    "expired": (_times(exp=-600, iat=-1200), "key", "expired"),
    "issued-in-the-future": (_times(exp=1200, iat=600), "key", "'iat' is not valid"),
    "no-exp": (_claims(exp=None), "key", "lacks the claims exp"),
    "no-sub": (_claims(sub=None), "key", "lacks the claims sub"),
    "missing-nonce": (_claims(nonce=None), "key", "nonce is not the one of this sign-in"),
    "wrong-nonce": (_claims(nonce="another-nonce"), "key", "nonce is not the one of this"),
    "unknown-kid": (_header(kid="unknown-kid"), "key", "no key of the provider's key set"),
}


@pytest.mark.parametrize("case", list(BAD_ID_TOKENS))
def test_bad_id_token_is_refused(
    case: str,
    make_app: MakeApp,
    idp: LocalIdentityProvider,
    issued: list[OAuth2Info],
    captured_logs: list[logging.LogRecord],
) -> None:
    tamper, signing, message = BAD_ID_TOKENS[case]
    idp.id_token_tamper = tamper
    idp.sign_id_token_with = signing  # type: ignore[assignment]
    app = make_app({"local": discovery_block(idp)})
    outcome = watch(app)
    client = app.test_client()
    response = sign_in(client)
    assert response.status_code == 502
    assert isinstance(outcome.error, IdTokenError)
    assert message in str(outcome.error)
    assert outcome.infos == []
    with client.session_transaction() as session:
        assert "social_profile" not in session
    assert idp.userinfo_requests == []  # no profile fetched with an unverified token
    secrets = token_strings(issued)
    assert not any(secret in response.text or secret in str(outcome.error) for secret in secrets)
    assert_not_logged(captured_logs, secrets)


def test_clock_skew_within_the_leeway_is_accepted(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    idp.id_token_tamper = _times(exp=-20, iat=30)
    app = make_app({"local": discovery_block(idp)})
    assert sign_in(app.test_client()).status_code == 302
    strict = make_app({"local": discovery_block(idp, idTokenLeeway="0")})
    outcome = watch(strict)
    assert sign_in(strict.test_client()).status_code == 502
    assert isinstance(outcome.error, IdTokenError)


def test_several_audiences_with_azp_are_accepted(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    idp.id_token_tamper = _claims(aud=[CLIENT_ID, "another-client"], azp=CLIENT_ID)
    app = make_app({"local": discovery_block(idp)})
    assert sign_in(app.test_client()).status_code == 302


def test_unknown_kid_refetches_the_key_set_once(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    app = make_app({"local": discovery_block(idp)})
    outcome = watch(app)
    assert sign_in(app.test_client()).status_code == 302
    assert idp.jwks_requests == 1
    idp.id_token_tamper = _header(kid="made-up-kid")
    for _ in range(3):
        assert sign_in(app.test_client()).status_code == 502
    # One refetch for the unknown kid, then none within KEY_REFETCH_INTERVAL.
    assert idp.jwks_requests == 2
    assert all(isinstance(error, IdTokenError) for error in outcome.errors)


def test_rotated_signing_key_is_fetched_once(make_app: MakeApp, idp: LocalIdentityProvider) -> None:
    app = make_app({"local": discovery_block(idp)})
    assert sign_in(app.test_client()).status_code == 302
    idp.rotate_signing_key()
    assert sign_in(app.test_client()).status_code == 302
    assert sign_in(app.test_client()).status_code == 302
    assert idp.jwks_requests == 2


def test_plain_oauth_block_is_not_verified(make_app: MakeApp, idp: LocalIdentityProvider) -> None:
    """Without an issuer (and not a built-in OpenID provider) nothing changes: no discovery."""
    idp.sign_id_token_with = "none"
    app = make_app({"local": idp.settings_block(CLIENT_ID, CLIENT_SECRET, "/authenticate/local")})
    outcome = watch(app)
    assert sign_in(app.test_client()).status_code == 302
    assert outcome.infos[0].id_token_claims is None
    assert (idp.discovery_requests, idp.jwks_requests) == (0, 0)


# -- RFC 9207 ------------------------------------------------------------------------------------


@pytest.fixture
def iss_idp() -> Iterator[LocalIdentityProvider]:
    with LocalIdentityProvider(iss_parameter=True) as server:
        server.register_client(CLIENT_ID, CLIENT_SECRET, [LOCAL_REDIRECT])
        server.auto_approve = ALICE
        yield server


@pytest.mark.parametrize("iss", [None, "https://evil.example", ""])
def test_callback_iss_is_required_where_announced(
    make_app: MakeApp, iss_idp: LocalIdentityProvider, iss: str | None
) -> None:
    app = make_app({"local": discovery_block(iss_idp)})
    outcome = watch(app)
    client = app.test_client()
    started = client.get("/authenticate/local")
    callback = follow_to_provider(started.headers["Location"])
    assert query_of(callback)["iss"] == iss_idp.issuer
    response = client.get(with_query(callback, iss=iss))
    assert response.status_code == 400
    assert isinstance(outcome.error, StateError)
    assert iss_idp.token_requests == []


def test_callback_with_the_right_iss_is_accepted(
    make_app: MakeApp, iss_idp: LocalIdentityProvider
) -> None:
    app = make_app({"local": discovery_block(iss_idp)})
    assert sign_in(app.test_client()).status_code == 302
    assert len(iss_idp.token_requests) == 1


# -- a hand-signed provider on the fault server ----------------------------------------------------


@pytest.fixture(scope="module")
def rsa_key() -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": "rsa-1", "use": "sig"})


@pytest.fixture(scope="module")
def ec_key() -> ECKey:
    return ECKey.generate_key("P-256", parameters={"kid": "ec-1", "use": "sig"})


class FakeOpenIDProvider:
    """Discovery, keys and token answers of an OpenID provider, served by the fault server."""

    def __init__(self, server: FaultServer, *keys: RSAKey | ECKey, userinfo: bool = True) -> None:
        self.server = server
        self.issuer = server.url
        document = fake_document(server.url)
        if not userinfo:
            del document["userinfo_endpoint"]
        server.set(WELL_KNOWN, Behaviour.json(document))
        server.set("/jwks", Behaviour.json({"keys": [key.as_dict(private=False) for key in keys]}))

    def claims(self, **changes: Any) -> dict[str, Any]:
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "sub": "user-1",
            "aud": CLIENT_ID,
            "exp": now + 300,
            "iat": now,
            "name": "Ada Lovelace",
            "given_name": "Ada",
            "family_name": "Lovelace",
            "email": "ada@example.test",
        }
        claims.update(changes)
        return {key: value for key, value in claims.items() if value is not None}

    def serve_token(self, id_token: object, **fields: Any) -> None:
        answer: dict[str, Any] = {"access_token": "fake-access-token", "token_type": "Bearer"}
        if id_token is not None:
            answer["id_token"] = id_token
        answer.update(fields)
        self.server.set("/token", Behaviour.json(answer))


def signed(key: Any, alg: str, claims: dict[str, Any], **header: Any) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # joserfc warns about an HMAC key that is a public key
        kid = getattr(key, "kid", None)
        full_header = {"alg": alg, **({"kid": kid} if kid else {}), **header}
        return jwt.encode(full_header, claims, key, algorithms=[alg])


def start_fake(client: Any) -> dict[str, str]:
    started = client.get("/authenticate/fake")
    assert started.status_code == 302, started.text
    return query_of(started.headers["Location"])


def finish_fake(client: Any, state: str) -> Any:
    return client.get("/authenticate/fake", query_string={"code": "the-code", "state": state})


def test_es256_id_token_fills_the_profile_without_userinfo(
    make_app: MakeApp, fault_server: FaultServer, rsa_key: RSAKey, ec_key: ECKey
) -> None:
    fake = FakeOpenIDProvider(fault_server, rsa_key, ec_key, userinfo=False)
    app = fake_app(make_app, fault_server)
    outcome = watch(app)
    client = app.test_client()
    query = start_fake(client)
    assert query["nonce"]
    fake.serve_token(signed(ec_key, "ES256", fake.claims(nonce=query["nonce"])))
    assert finish_fake(client, query["state"]).status_code == 302
    (profile,) = outcome.profiles
    assert (profile.provider_key, profile.full_name, profile.email) == (
        "user-1",
        "Ada Lovelace",
        "ada@example.test",
    )
    assert profile.first_name == "Ada"
    assert fault_server.count("/userinfo") == 0


def test_id_token_without_kid_uses_the_matching_key(
    make_app: MakeApp, fault_server: FaultServer, rsa_key: RSAKey, ec_key: ECKey
) -> None:
    fake = FakeOpenIDProvider(fault_server, rsa_key, ec_key, userinfo=False)
    app = fake_app(make_app, fault_server)
    client = app.test_client()
    query = start_fake(client)
    anonymous = RSAKey.import_key(rsa_key.as_dict(private=True) | {"kid": ""})
    token = jwt.encode({"alg": "RS256"}, fake.claims(nonce=query["nonce"]), anonymous)
    assert "kid" not in json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))
    fake.serve_token(token)
    assert finish_fake(client, query["state"]).status_code == 302


def _segment(part: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(part).encode()).rstrip(b"=").decode()


def _unsigned(claims: dict[str, Any]) -> str:
    return f"{_segment({'alg': 'none', 'kid': 'rsa-1'})}.{_segment(claims)}."


@pytest.mark.parametrize(
    ("forgery", "message"),
    [
        ("hmac-with-public-key", "algorithm 'HS256' is not allowed"),
        ("alg-none", "algorithm 'none' is not allowed"),
        ("alg-not-announced", "algorithm 'RS384' is not allowed"),
        ("garbage", "not a signed JWT"),
        ("not-a-string", "missing or not a string"),
    ],
)
def test_forged_id_tokens_are_refused(
    make_app: MakeApp, fault_server: FaultServer, rsa_key: RSAKey, forgery: str, message: str
) -> None:
    fake = FakeOpenIDProvider(fault_server, rsa_key)
    app = fake_app(make_app, fault_server)
    outcome = watch(app)
    client = app.test_client()
    query = start_fake(client)
    claims = fake.claims(nonce=query["nonce"])
    token: Any
    if forgery == "hmac-with-public-key":
        # joserfc itself refuses a public key as an HMAC secret, so the forgery is made by hand.
        signing_input = ".".join(
            _segment(part) for part in ({"alg": "HS256", "kid": "rsa-1"}, claims)
        )
        mac = hmac.new(rsa_key.as_pem(private=False), signing_input.encode(), hashlib.sha256)
        token = f"{signing_input}.{base64.urlsafe_b64encode(mac.digest()).rstrip(b'=').decode()}"
    elif forgery == "alg-none":
        token = _unsigned(claims)
    elif forgery == "alg-not-announced":  # the discovery document lists RS256 and ES256
        token = signed(rsa_key, "RS384", claims)
    elif forgery == "garbage":
        token = "a.b.c"
    else:
        token = 12345
    fake.serve_token(token)
    assert finish_fake(client, query["state"]).status_code == 502
    assert isinstance(outcome.error, IdTokenError)
    assert message in str(outcome.error)


def test_posted_code_is_verified_without_a_nonce(
    make_app: MakeApp, fault_server: FaultServer, rsa_key: RSAKey
) -> None:
    """A client-side framework POSTs the code: no server-side state, so no nonce to compare,
    but the ID token is verified all the same."""
    fake = FakeOpenIDProvider(fault_server, rsa_key, userinfo=False)
    app = fake_app(make_app, fault_server)
    outcome = watch(app)
    client = app.test_client()
    fake.serve_token(signed(rsa_key, "RS256", fake.claims(nonce="chosen-by-the-browser")))
    assert client.post("/authenticate/fake", json={"code": "c"}).status_code == 302
    assert outcome.profiles[0].provider_key == "user-1"
    fake.serve_token(signed(rsa_key, "RS256", fake.claims(aud="another-client")))
    assert client.post("/authenticate/fake", json={"code": "c"}).status_code == 502
    assert isinstance(outcome.error, IdTokenError)


def test_a_different_discovered_token_endpoint_is_logged_not_used(
    make_app: MakeApp,
    fault_server: FaultServer,
    rsa_key: RSAKey,
    captured_logs: list[logging.LogRecord],
) -> None:
    fake = FakeOpenIDProvider(fault_server, rsa_key, userinfo=False)
    document = fake_document(
        fault_server.url, token_endpoint="https://elsewhere.example/token", userinfo_endpoint=None
    )
    fault_server.set(WELL_KNOWN, Behaviour.json(document))
    app = fake_app(make_app, fault_server)
    client = app.test_client()
    query = start_fake(client)
    fake.serve_token(signed(rsa_key, "RS256", fake.claims(nonce=query["nonce"])))
    assert finish_fake(client, query["state"]).status_code == 302
    assert fault_server.count("/token") == 1
    assert any("differs from the discovery" in r.getMessage() for r in captured_logs)


def test_token_response_without_id_token_is_refused(
    make_app: MakeApp, fault_server: FaultServer, rsa_key: RSAKey
) -> None:
    fake = FakeOpenIDProvider(fault_server, rsa_key)
    app = fake_app(make_app, fault_server)
    outcome = watch(app)
    client = app.test_client()
    query = start_fake(client)
    fake.serve_token(None)
    assert finish_fake(client, query["state"]).status_code == 502
    assert "no id_token" in str(outcome.error)


def test_userinfo_of_another_user_is_refused(
    make_app: MakeApp, fault_server: FaultServer, rsa_key: RSAKey
) -> None:
    fake = FakeOpenIDProvider(fault_server, rsa_key)
    fault_server.set("/userinfo", Behaviour.json({"sub": "someone-else", "name": "Mallory"}))
    app = fake_app(make_app, fault_server)
    outcome = watch(app)
    client = app.test_client()
    query = start_fake(client)
    fake.serve_token(signed(rsa_key, "RS256", fake.claims(nonce=query["nonce"])))
    assert finish_fake(client, query["state"]).status_code == 502
    assert isinstance(outcome.error, ProfileRetrievalError)
    assert "sub" in str(outcome.error)


def test_algorithm_allow_list_from_custom_properties(
    make_app: MakeApp, fault_server: FaultServer, rsa_key: RSAKey, ec_key: ECKey
) -> None:
    fake = FakeOpenIDProvider(fault_server, rsa_key, ec_key)
    fault_server.set("/userinfo", Behaviour.json({"sub": "user-1"}))
    properties = {"issuer": fault_server.url, "idTokenAlgorithms": "ES256"}
    app = fake_app(make_app, fault_server, customProperties=properties)
    outcome = watch(app)
    client = app.test_client()
    query = start_fake(client)
    fake.serve_token(signed(rsa_key, "RS256", fake.claims(nonce=query["nonce"])))
    assert finish_fake(client, query["state"]).status_code == 502
    assert "algorithm 'RS256' is not allowed" in str(outcome.error)


def test_builtin_class_accepts_its_extra_issuer(
    make_app: MakeApp, fault_server: FaultServer, rsa_key: RSAKey
) -> None:
    """Google's ID tokens may say ``accounts.google.com`` without the scheme."""
    fake = FakeOpenIDProvider(fault_server, rsa_key)
    fault_server.set("/userinfo", Behaviour.json({"sub": "user-1"}))
    app = fake_app(
        make_app,
        fault_server,
        apiURL=f"{fault_server.url}/userinfo",
        classes={"fake": "google"},
    )
    assert type(local_provider(app, "fake")).__name__ == "GoogleProvider"
    outcome = watch(app)
    client = app.test_client()
    query = start_fake(client)
    token = signed(rsa_key, "RS256", fake.claims(nonce=query["nonce"], iss="accounts.google.com"))
    fake.serve_token(token)
    assert finish_fake(client, query["state"]).status_code == 302
    assert outcome.infos[0].id_token_claims is not None


# -- refresh -------------------------------------------------------------------------------------


def signed_in_info(app: Flask) -> OAuth2Info:
    outcome = watch(app)
    assert sign_in(app.test_client()).status_code == 302
    (info,) = outcome.infos
    return info


def test_refresh_rotates_the_refresh_token(
    make_app: MakeApp,
    idp: LocalIdentityProvider,
    issued: list[OAuth2Info],
    captured_logs: list[logging.LogRecord],
) -> None:
    app = make_app({"local": discovery_block(idp)})
    first = signed_in_info(app)
    assert first.refresh_token is not None
    provider = local_provider(app)
    with app.app_context():
        second = provider.refresh(first)
    assert idp.token_requests[-1].grant_type == "refresh_token"
    assert second.access_token != first.access_token
    assert second.refresh_token not in (None, first.refresh_token)
    assert second.expires_in == 3600
    assert second.id_token_claims == first.id_token_claims  # no new ID token: claims kept
    with app.app_context():
        with pytest.raises(UnexpectedResponseError, match="invalid_grant") as raised:
            provider.refresh(first)  # the rotated-away refresh token is spent
        third = provider.refresh(second)
    assert raised.value.status_code == 502
    assert third.access_token not in (first.access_token, second.access_token)
    assert_not_logged(captured_logs, token_strings(issued))


def test_refresh_with_a_revoked_refresh_token_fails(
    make_app: MakeApp,
    idp: LocalIdentityProvider,
    issued: list[OAuth2Info],
    captured_logs: list[logging.LogRecord],
) -> None:
    app = make_app({"local": discovery_block(idp)})
    info = signed_in_info(app)
    idp.revoke_refresh_tokens()
    with app.app_context(), pytest.raises(UnexpectedResponseError) as raised:
        local_provider(app).refresh(info)
    message = str(raised.value)
    assert "refresh request failed" in message
    assert "invalid_grant" in message
    secrets = token_strings(issued)
    assert not any(secret in message for secret in secrets)
    assert_not_logged(captured_logs, secrets)


def refresh_app(make_app: MakeApp, server: FaultServer, **custom: str) -> Flask:
    block = {
        "accessTokenURL": f"{server.url}/token",
        "redirectURL": "/authenticate/plain",
        "apiURL": f"{server.url}/userinfo",
        "clientID": CLIENT_ID,
        "clientSecret": CLIENT_SECRET,
        "customProperties": custom,
    }
    return make_app({"plain": block}, SOCIAL_OAUTH2_TIMEOUT=1)


def test_refresh_keeps_the_refresh_token_a_provider_does_not_rotate(
    make_app: MakeApp, fault_server: FaultServer
) -> None:
    fault_server.set(
        "/token", Behaviour.json({"access_token": "new-access", "expires_in": "60", "scope": "a"})
    )
    app = refresh_app(make_app, fault_server)
    old = OAuth2Info(access_token="old-access", refresh_token="keep-me")
    with app.app_context():
        new = local_provider(app, "plain").refresh(old, scope="a")
    assert (new.access_token, new.refresh_token, new.expires_in) == ("new-access", "keep-me", 60)
    assert new.params == {"scope": "a"}
    (request,) = fault_server.requests
    form = {key: values[0] for key, values in request.form().items()}
    assert form == {
        "grant_type": "refresh_token",
        "refresh_token": "keep-me",
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
        "scope": "a",
    }


def test_refresh_with_basic_client_authentication(
    make_app: MakeApp, fault_server: FaultServer
) -> None:
    fault_server.set("/token", Behaviour.json({"access_token": "new", "refresh_token": "next"}))
    app = refresh_app(make_app, fault_server, tokenEndpointAuthMethod="client_secret_basic")
    with app.app_context():
        new = local_provider(app, "plain").refresh(OAuth2Info(access_token="a", refresh_token="r"))
    assert new.refresh_token == "next"
    (request,) = fault_server.requests
    assert request.headers["Authorization"].startswith("Basic ")
    assert "client_secret" not in request.form()


@pytest.mark.parametrize(
    ("behaviour", "status"),
    [
        (Behaviour.json({"error": "server_error"}, status=500), 502),
        (Behaviour.html("<p>down</p>"), 502),
        (Behaviour.json({"token_type": "bearer"}), 502),
        (Behaviour.json({"access_token": "x", "token_type": "mac"}), 502),
        (Behaviour.hang(), 504),
    ],
    ids=["http-500", "html", "no-access-token", "token-type", "timeout"],
)
def test_refresh_failures_are_unexpected_response_errors(
    make_app: MakeApp, fault_server: FaultServer, behaviour: Behaviour, status: int
) -> None:
    fault_server.set("/token", behaviour)
    app = refresh_app(make_app, fault_server)
    with app.app_context(), pytest.raises(UnexpectedResponseError) as raised:
        local_provider(app, "plain").refresh(OAuth2Info(access_token="a", refresh_token="r-tok"))
    assert raised.value.status_code == status
    assert "refresh request" in str(raised.value)
    assert "r-tok" not in str(raised.value)


def test_refresh_without_refresh_token_is_a_clear_error(
    make_app: MakeApp, fault_server: FaultServer
) -> None:
    app = refresh_app(make_app, fault_server)
    with app.app_context(), pytest.raises(AuthenticationError, match="no refresh_token"):
        local_provider(app, "plain").refresh(OAuth2Info(access_token="a"))
    assert fault_server.count() == 0


def test_refresh_needs_an_app_context(make_app: MakeApp, fault_server: FaultServer) -> None:
    app = refresh_app(make_app, fault_server)
    provider = local_provider(app, "plain")
    with pytest.raises(RuntimeError, match="application context"):
        provider.refresh(OAuth2Info(access_token="a", refresh_token="r"))


def test_refreshed_id_token_is_verified_and_must_keep_the_user(
    make_app: MakeApp, fault_server: FaultServer, rsa_key: RSAKey
) -> None:
    fake = FakeOpenIDProvider(fault_server, rsa_key)
    app = fake_app(make_app, fault_server)
    provider = local_provider(app, "fake")
    old = OAuth2Info(access_token="a", refresh_token="r", id_token_claims=fake.claims(), params={})
    fake.serve_token(signed(rsa_key, "RS256", fake.claims()), refresh_token="r2")
    with app.app_context():
        new = provider.refresh(old)
    assert new.id_token_claims is not None
    assert new.id_token_claims["sub"] == "user-1"
    fake.serve_token(signed(rsa_key, "RS256", fake.claims(sub="user-2")))
    with app.app_context(), pytest.raises(IdTokenError, match="sub"):
        provider.refresh(old)
    fake.serve_token(signed(rsa_key, "RS256", fake.claims(aud="another-client")))
    with app.app_context(), pytest.raises(IdTokenError, match="aud"):
        provider.refresh(old)
