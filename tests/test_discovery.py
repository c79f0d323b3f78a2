"""Discovery: a provider's metadata and key set, read lazily, cached per process, a failed
fetch remembered briefly, and RFC 9207's ``iss`` announced in the metadata.

The provider is the real OpenID provider on loopback (:class:`LocalIdentityProvider`, Authlib's
server classes) or, for answers it cannot give, the fault server.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any, Final

import pytest
from fault_server import Behaviour, FaultServer
from helpers import (
    ALICE,
    CLIENT_ID,
    CLIENT_SECRET,
    LOCAL_REDIRECT,
    WELL_KNOWN,
    Clock,
    FakeOpenIDProvider,
    MakeApp,
    assert_not_logged,
    callback_path,
    discovery_block,
    fake_app,
    fake_document,
    finish_fake,
    follow_to_provider,
    local_provider,
    query_of,
    sign_in,
    signed,
    start_fake,
    token_strings,
    watch,
    with_query,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from joserfc.jwk import RSAKey

from flask_social_oauth2 import OAuth2Info
from flask_social_oauth2.config.provider_options import read_provider_options
from flask_social_oauth2.config.settings import OAuth2Settings
from flask_social_oauth2.errors import (
    ConfigurationError,
    DiscoveryError,
    StateError,
)
from flask_social_oauth2.local_idp import LocalIdentityProvider
from flask_social_oauth2.oauth.metadata import (
    ProviderMetadata,
    expected_token_issuer,
    issuer_matches,
)
from flask_social_oauth2.oidc import discovery
from flask_social_oauth2.oidc.discovery import (
    cache_seconds,
    issuer_from_discovery_url,
    metadata_urls,
)
from flask_social_oauth2.providers import BUILTIN_PROVIDERS

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


def test_discovery_naming_another_issuer_is_refused(
    make_app: MakeApp, fault_server: FaultServer, discovery_clock: Clock
) -> None:
    fault_server.set(WELL_KNOWN, Behaviour.json(fake_document("https://other.example")))
    app = fake_app(make_app, fault_server)
    outcome = watch(app)
    client = app.test_client()
    for expected_fetches in (1, 1):  # the refusal is remembered for a while, not the document
        response = client.get("/authenticate/fake")
        assert response.status_code == 502
        assert fault_server.count(WELL_KNOWN) == expected_fetches
    discovery_clock.offset = discovery.DEFAULT_FAILURE_TTL
    assert client.get("/authenticate/fake").status_code == 502
    assert fault_server.count(WELL_KNOWN) == 2
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


def test_discovery_cache_honours_max_age(
    make_app: MakeApp, fault_server: FaultServer, discovery_clock: Clock
) -> None:
    fault_server.set(
        WELL_KNOWN,
        Behaviour.json(fake_document(fault_server.url), headers={"Cache-Control": "max-age=120"}),
    )
    app = fake_app(make_app, fault_server)
    provider = local_provider(app, "fake")
    with app.app_context():
        assert provider.openid_metadata() is not None
        discovery_clock.offset = 100
        provider.openid_metadata()
        assert fault_server.count(WELL_KNOWN) == 1
        discovery_clock.offset = 130
        provider.openid_metadata()
        assert fault_server.count(WELL_KNOWN) == 2


def test_expired_document_serves_on_when_its_successor_fails(
    make_app: MakeApp,
    fault_server: FaultServer,
    discovery_clock: Clock,
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
        discovery_clock.offset = discovery.DEFAULT_CACHE_SECONDS + 1
        assert provider.openid_metadata() == first
        assert fault_server.count(WELL_KNOWN) == 2
        discovery_clock.offset += discovery.MIN_CACHE_SECONDS / 2
        provider.openid_metadata()
        assert fault_server.count(WELL_KNOWN) == 2  # retried after MIN_CACHE_SECONDS only
        discovery_clock.offset += discovery.MAX_STALE_SECONDS
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
        ("max-age=\xb2", 3600),
        ("max-age=\u0663\u0660\u0660", 3600),
        ("max-age=-5", 3600),
        ("max-age=1e400", 3600),
        ("max-age=" + "9" * 5000, 3600),
        ("max-age=", 3600),
        (",,=,max-age,==", 3600),
        ("\xff\xfe", 3600),
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
    ],
)
def test_discovery_properties_are_checked_at_setup(
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


# -- a failed fetch is remembered briefly, and made once (issue 12 T6) ---------------------------

FAILING_FETCHES = pytest.mark.parametrize(
    ("behaviour", "status"),
    [
        (Behaviour.hang(), 504),
        (Behaviour.json({"error": "unavailable"}, status=503), 502),
        (Behaviour.html("<h1>maintenance</h1>"), 502),
    ],
    ids=["timeout", "http-503", "html"],
)


def failure_lines(records: list[logging.LogRecord]) -> list[str]:
    return [r.getMessage() for r in records if r.getMessage().startswith("sign-in failed:")]


@FAILING_FETCHES
def test_five_starts_after_a_failed_discovery_make_one_fetch(
    make_app: MakeApp,
    fault_server: FaultServer,
    behaviour: Behaviour,
    status: int,
    captured_logs: list[logging.LogRecord],
) -> None:
    fault_server.set(WELL_KNOWN, behaviour)
    app = fake_app(make_app, fault_server)
    client = app.test_client()
    assert client.get("/authenticate/fake").status_code == status
    started = time.monotonic()
    for _ in range(4):
        assert client.get("/authenticate/fake").status_code == status
    assert time.monotonic() - started < 0.5  # none of them waited for the provider
    assert fault_server.count(WELL_KNOWN) == 1
    lines = failure_lines(captured_logs)
    assert len(lines) == 5
    prefix = "sign-in failed: provider 'fake': discovery request"
    assert all(line.startswith(prefix) for line in lines)
    assert all("an earlier failure, remembered for" in line for line in lines[1:])
    assert not any(r.exc_info for r in captured_logs)


@FAILING_FETCHES
def test_concurrent_starts_wait_for_one_failing_fetch(
    make_app: MakeApp, fault_server: FaultServer, behaviour: Behaviour, status: int
) -> None:
    fault_server.set(WELL_KNOWN, Behaviour.delayed(0.3, behaviour))
    app = fake_app(make_app, fault_server)
    together = threading.Barrier(8)
    statuses: list[int] = []

    def start() -> None:
        client = app.test_client()
        together.wait(5)
        statuses.append(client.get("/authenticate/fake").status_code)

    threads = [threading.Thread(target=start) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert statuses == [status] * 8
    assert fault_server.count(WELL_KNOWN) == 1


def test_a_failed_discovery_is_fetched_again_after_the_failure_ttl(
    make_app: MakeApp, fault_server: FaultServer, discovery_clock: Clock
) -> None:
    fault_server.set(
        WELL_KNOWN,
        Behaviour.sequence(
            Behaviour.json({}, status=500), Behaviour.json(fake_document(fault_server.url))
        ),
    )
    app = fake_app(make_app, fault_server, app_config={"SOCIAL_OAUTH2_DISCOVERY_FAILURE_TTL": 5})
    client = app.test_client()
    assert client.get("/authenticate/fake").status_code == 502
    discovery_clock.offset = 4.9
    assert client.get("/authenticate/fake").status_code == 502
    assert fault_server.count(WELL_KNOWN) == 1
    discovery_clock.offset = 5
    assert client.get("/authenticate/fake").status_code == 302  # the provider is back
    assert client.get("/authenticate/fake").status_code == 302
    assert fault_server.count(WELL_KNOWN) == 2


def test_the_default_failure_ttl_is_thirty_seconds(
    make_app: MakeApp, fault_server: FaultServer, discovery_clock: Clock
) -> None:
    fault_server.set(WELL_KNOWN, Behaviour.json({}, status=500))
    app = fake_app(make_app, fault_server)
    assert app.config["SOCIAL_OAUTH2_DISCOVERY_FAILURE_TTL"] == 30
    client = app.test_client()
    assert client.get("/authenticate/fake").status_code == 502
    discovery_clock.offset = 29.9
    assert client.get("/authenticate/fake").status_code == 502
    assert fault_server.count(WELL_KNOWN) == 1
    discovery_clock.offset = 30
    assert client.get("/authenticate/fake").status_code == 502
    assert fault_server.count(WELL_KNOWN) == 2


def test_a_failure_ttl_of_zero_remembers_nothing(
    make_app: MakeApp, fault_server: FaultServer
) -> None:
    fault_server.set(WELL_KNOWN, Behaviour.json({}, status=500))
    app = fake_app(make_app, fault_server, app_config={"SOCIAL_OAUTH2_DISCOVERY_FAILURE_TTL": 0})
    client = app.test_client()
    for _ in range(3):
        assert client.get("/authenticate/fake").status_code == 502
    assert fault_server.count(WELL_KNOWN) == 3


def test_a_failed_key_set_is_fetched_once_for_several_callbacks(
    make_app: MakeApp,
    fault_server: FaultServer,
    rsa_key: RSAKey,
    discovery_clock: Clock,
    issued: list[OAuth2Info],
    captured_logs: list[logging.LogRecord],
) -> None:
    fake = FakeOpenIDProvider(fault_server, rsa_key, userinfo=False)
    fault_server.set("/jwks", Behaviour.hang())
    app = fake_app(make_app, fault_server)
    outcome = watch(app)
    client = app.test_client()
    for _ in range(3):
        query = start_fake(client)
        fake.serve_token(signed(rsa_key, "RS256", fake.claims(nonce=query["nonce"])))
        response = finish_fake(client, query["state"])
        assert response.status_code == 504
    assert fault_server.count("/jwks") == 1
    assert all(isinstance(error, DiscoveryError) for error in outcome.errors)
    assert all("key set request" in str(error) for error in outcome.errors)
    fake.serve_keys(rsa_key)
    discovery_clock.offset = discovery.DEFAULT_FAILURE_TTL
    query = start_fake(client)
    fake.serve_token(signed(rsa_key, "RS256", fake.claims(nonce=query["nonce"])))
    assert finish_fake(client, query["state"]).status_code == 302
    assert fault_server.count("/jwks") == 2
    secrets = [CLIENT_SECRET, "the-code", *token_strings(issued)]
    assert_not_logged(captured_logs, secrets)


def test_providers_sharing_an_issuer_share_its_remembered_failure(
    make_app: MakeApp, fault_server: FaultServer
) -> None:
    fault_server.set(WELL_KNOWN, Behaviour.json({}, status=500))
    block = {
        "accessTokenURL": f"{fault_server.url}/token",
        "clientID": CLIENT_ID,
        "clientSecret": CLIENT_SECRET,
        "scope": "openid",
        "customProperties": {"issuer": fault_server.url},
    }
    app = make_app(
        {
            "one": {**block, "redirectURL": "/authenticate/one"},
            "two": {**block, "redirectURL": "/authenticate/two"},
        }
    )
    outcome = watch(app)
    client = app.test_client()
    assert client.get("/authenticate/one").status_code == 502
    assert client.get("/authenticate/two").status_code == 502
    assert fault_server.count(WELL_KNOWN) == 1
    assert [error.provider for error in outcome.errors] == ["one", "two"]
    assert str(outcome.errors[1]).startswith("provider 'two': discovery request failed: HTTP 500")


@pytest.mark.parametrize("value", [-1, "30", True, None, [30], float("nan"), float("inf"), 10**400])
def test_the_failure_ttl_setting_is_checked_at_setup(make_app: MakeApp, value: Any) -> None:
    with pytest.raises(ConfigurationError) as raised:
        make_app({}, SOCIAL_OAUTH2_DISCOVERY_FAILURE_TTL=value)
    assert "SOCIAL_OAUTH2_DISCOVERY_FAILURE_TTL" in str(raised.value)


ODD_CACHE_CONTROL = [
    "max-age=\xb2",
    "max-age=\u00b9\u00b2",
    "max-age=-1",
    "max-age=1e400",
    "max-age=" + "9" * 5000,
    'max-age="',
    "no-store=\xff, max-age=\xb2",
    "\xa0,\t,",
]


@pytest.mark.parametrize("header", ODD_CACHE_CONTROL)
def test_odd_cache_control_never_fails_a_sign_in(
    make_app: MakeApp, fault_server: FaultServer, rsa_key: RSAKey, header: str
) -> None:
    """``Cache-Control: max-age=\\xb2`` on the discovery document made every sign-in a 500."""
    fake = FakeOpenIDProvider(fault_server, rsa_key, userinfo=False)
    odd = {"Cache-Control": header}
    document = fake_document(fault_server.url, userinfo_endpoint=None)
    fault_server.set(WELL_KNOWN, Behaviour.json(document, headers=odd))
    keys = {"keys": [rsa_key.as_dict(private=False)]}
    fault_server.set("/jwks", Behaviour.json(keys, headers=odd))
    app = fake_app(make_app, fault_server)
    outcome = watch(app)
    client = app.test_client()
    for _ in range(2):  # the second sign-in from the cache: the odd max-age meant the default
        query = start_fake(client)
        fake.serve_token(signed(rsa_key, "RS256", fake.claims(nonce=query["nonce"])))
        assert finish_fake(client, query["state"]).status_code == 302
    assert (fault_server.count(WELL_KNOWN), fault_server.count("/jwks")) == (1, 1)
    assert len(outcome.profiles) == 2


FAST: Final = settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# -- whatever the discovery document and key set say (issue 12 T3, SECURITY.md 26) ---------------

#: JSON number literals Python reads into odd values (or refuses: 5,000 digits).
ODD_NUMBERS: Final = ["1e400", "-1e400", "NaN", "Infinity", "-0", "1E-400", "9" * 5000, "0.5"]
DOCUMENT_FIELDS: Final = [
    "issuer",
    "authorization_endpoint",
    "token_endpoint",
    "userinfo_endpoint",
    "jwks_uri",
    "id_token_signing_alg_values_supported",
    "authorization_response_iss_parameter_supported",
    "response_types_supported",
    "subject_types_supported",
    "a-field-nobody-knows",
]
KEY_MEMBERS: Final = ["kty", "kid", "use", "alg", "n", "e", "crv", "x", "y", "d", "key_ops"]
# Header values as the fault server sends them (latin-1, no line breaks).
HEADER_TEXT: Final = st.text(
    st.characters(codec="latin-1", exclude_characters="\r\n\x00"), max_size=40
)


def json_fragments() -> st.SearchStrategy[str]:
    """JSON text of odd values: numbers, types, Unicode (lone surrogates included), nesting."""
    plain = st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
        max_leaves=8,
    )
    return st.one_of(
        plain.map(lambda value: json.dumps(value, ensure_ascii=False)),
        plain.map(json.dumps),
        st.sampled_from(ODD_NUMBERS),
        st.text(max_size=30).map(lambda text: json.dumps("https://127.0.0.1:1/" + text)),
        st.sampled_from(['"\\ud800"', '"https://\\u0000.example"', '"http://[::1"']),
        st.integers(1, 3000).map(lambda depth: "[" * depth + "]" * depth),
    )


def document_text(document: dict[str, Any], changes: dict[str, str], drop: list[str]) -> str:
    """``document`` as JSON, its ``changes`` given as raw JSON text, ``drop`` left out."""
    parts = [f"{json.dumps(name)}: {json.dumps(value)}" for name, value in document.items()]
    parts = [p for p, name in zip(parts, document, strict=True) if name not in (*changes, *drop)]
    parts += [f"{json.dumps(name)}: {text}" for name, text in changes.items()]
    return "{" + ", ".join(parts) + "}"


def key_set_text(good_key: dict[str, Any], data: st.DataObject) -> str:
    """A key set: the provider's key with odd members, odd extra keys, or not a key set at all."""
    choice = data.draw(st.sampled_from(["odd-members", "odd-keys", "odd-set"]))
    if choice == "odd-set":
        return data.draw(json_fragments())
    keys = [json.dumps(good_key)]
    if choice == "odd-members":
        changes = data.draw(st.dictionaries(st.sampled_from(KEY_MEMBERS), json_fragments()))
        members = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in good_key.items()]
        members = [m for m, k in zip(members, good_key, strict=True) if k not in changes]
        members += [f"{json.dumps(k)}: {text}" for k, text in changes.items()]
        keys = ["{" + ", ".join(members) + "}"]
    else:
        keys += data.draw(st.lists(json_fragments(), max_size=3))
    return '{"keys": [' + ", ".join(keys) + "]}"


def test_no_discovery_answer_gives_a_500_or_leaks_a_secret(
    make_app: MakeApp,
    fault_server: FaultServer,
    rsa_key: RSAKey,
    captured_logs: list[logging.LogRecord],
) -> None:
    """Every field of the discovery document and of the key set, and the headers of both, with
    odd numbers, types and Unicode, served by a real server: a sign-in ends in a redirect, a
    4xx, or a 502/504 with a clear log line; never a 500 or a traceback, and neither the client
    secret, the code nor a token in the page or the log."""
    fake = FakeOpenIDProvider(fault_server, rsa_key, userinfo=False)
    good_document = fake_document(fault_server.url, userinfo_endpoint=None)
    good_key = rsa_key.as_dict(private=False)
    app = fake_app(make_app, fault_server, app_config={"SOCIAL_OAUTH2_DISCOVERY_FAILURE_TTL": 0})
    code = "the-code-0d3c9e1f"

    @FAST
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        discovery.clear_caches()
        captured_logs.clear()
        changes = data.draw(st.dictionaries(st.sampled_from(DOCUMENT_FIELDS), json_fragments()))
        drop = data.draw(st.lists(st.sampled_from(DOCUMENT_FIELDS), max_size=2))
        header_values = HEADER_TEXT | st.sampled_from(ODD_CACHE_CONTROL)
        headers = data.draw(
            st.dictionaries(st.sampled_from(["Cache-Control", "Content-Type"]), header_values)
        )
        document = document_text(good_document, changes, drop)
        fault_server.set(WELL_KNOWN, Behaviour.respond(200, document, headers))
        keys = (
            key_set_text(good_key, data)
            if data.draw(st.booleans())
            else json.dumps({"keys": [good_key]})
        )
        fault_server.set("/jwks", Behaviour.respond(200, keys, headers))
        client = app.test_client()
        started = client.get("/authenticate/fake")
        responses = [started]
        id_token = ""
        if started.status_code == 302:
            query = query_of(started.headers["Location"])
            id_token = signed(rsa_key, "RS256", fake.claims(nonce=query.get("nonce")))
            fake.serve_token(id_token)
            responses.append(
                client.get(
                    "/authenticate/fake",
                    query_string={"code": code, "state": query.get("state", "")},
                )
            )
        secrets = [CLIENT_SECRET, code, "fake-access-token", *([id_token] if id_token else [])]
        for response in responses:
            assert response.status_code in (302, 400, 502, 504), response.status_code
            assert not any(secret in response.text for secret in secrets)
        final = responses[-1].status_code
        seen.add(final)
        failures = [r for r in captured_logs if r.getMessage().startswith("sign-in failed:")]
        if final in (502, 504):
            (line,) = failures
            assert line.getMessage().startswith("sign-in failed: provider 'fake': ")
        assert not any(record.exc_info for record in captured_logs)
        assert_not_logged(captured_logs, secrets)

    seen: set[int] = set()
    check()
    assert {302, 502} <= seen  # whole sign-ins and refusals were both reached


# -- RFC 8414 metadata where there is no OpenID configuration --------------------------------------

RFC8414 = "/.well-known/oauth-authorization-server"


@pytest.mark.parametrize(
    ("issuer", "properties", "urls"),
    [
        (
            "https://id.example",
            {},
            (
                "https://id.example/.well-known/openid-configuration",
                "https://id.example/.well-known/oauth-authorization-server",
            ),
        ),
        (
            "https://id.example/tenant/1/",
            {},
            (
                "https://id.example/tenant/1/.well-known/openid-configuration",
                "https://id.example/.well-known/oauth-authorization-server/tenant/1",
            ),
        ),
        (
            "https://id.example",
            {"discoveryURL": "https://id.example/meta.json"},
            ("https://id.example/meta.json",),
        ),
    ],
)
def test_metadata_urls(issuer: str, properties: dict[str, str], urls: tuple[str, ...]) -> None:
    settings = OAuth2Settings(
        access_token_url=f"{issuer}/token",
        redirect_url="/authenticate/x",
        client_id=CLIENT_ID,
        client_secret=CLIENT_SECRET,
        custom_properties={"issuer": issuer, **properties},
    )
    assert metadata_urls(read_provider_options(settings)[0], issuer) == urls


def test_rfc8414_metadata_where_there_is_no_openid_configuration(
    make_app: MakeApp, fault_server: FaultServer
) -> None:
    document = fake_document(fault_server.url, userinfo_endpoint=None)
    fault_server.set(RFC8414, Behaviour.json(document))
    app = fake_app(make_app, fault_server)
    client = app.test_client()
    for _ in range(2):
        location = client.get("/authenticate/fake").headers["Location"]
        assert location.startswith(f"{fault_server.url}/authorize?")
    assert (fault_server.count(WELL_KNOWN), fault_server.count(RFC8414)) == (1, 1)


def test_an_openid_configuration_comes_before_rfc8414_metadata(
    make_app: MakeApp, fault_server: FaultServer
) -> None:
    fault_server.set(WELL_KNOWN, Behaviour.json({}, status=500))
    fault_server.set(RFC8414, Behaviour.json(fake_document(fault_server.url)))
    app = fake_app(make_app, fault_server)
    assert app.test_client().get("/authenticate/fake").status_code == 502
    assert (fault_server.count(WELL_KNOWN), fault_server.count(RFC8414)) == (1, 0)


def test_no_metadata_at_all_is_a_remembered_502(
    make_app: MakeApp, fault_server: FaultServer
) -> None:
    app = fake_app(make_app, fault_server)
    outcome = watch(app)
    client = app.test_client()
    for _ in range(3):
        assert client.get("/authenticate/fake").status_code == 502
    assert (fault_server.count(WELL_KNOWN), fault_server.count(RFC8414)) == (1, 1)
    assert "discovery request failed: HTTP 404" in str(outcome.errors[0])
