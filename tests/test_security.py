"""Every line of SECURITY.md, proved against a real authorization server on loopback.

Test names carry the line's number (``test_sNN_...``). The authorization server is
:class:`~flask_social_oauth2.local_idp.LocalIdentityProvider` (Authlib's server classes): it
checks PKCE, client authentication, code reuse and redirect_uri equality itself, and records
every request it receives.
"""

from __future__ import annotations

import base64
import dataclasses
import hmac
import time
import tracemalloc
from collections.abc import Callable, Iterator
from secrets import token_urlsafe
from typing import Any
from urllib.parse import urlsplit

import pytest
from fault_server import Behaviour, FaultServer
from flask import Flask, Response, request
from helpers import (
    ALICE,
    BACKCHANNEL_PATH,
    CLIENT_ID,
    CLIENT_SECRET,
    LOCAL_REDIRECT,
    OIDF_REFUSED,
    FakeOpenIDProvider,
    LocalGoogle,
    MakeApp,
    backchannel_app,
    browser_code,
    callback_path,
    fault_app,
    follow_to_provider,
    idp_block,
    logout_claims,
    one_tap_app,
    post_credential,
    query_of,
    refused_tokens,
    sign_in,
    sign_in_fake,
    signed,
    start_flow,
    state_cookie_name,
)
from werkzeug.middleware.proxy_fix import ProxyFix

from flask_social_oauth2 import (
    OAuth2Info,
    OAuth2Provider,
    OAuth2Settings,
    SocialOAuth2,
    SocialProfile,
    SocialProvider,
)
from flask_social_oauth2.errors import AuthenticationError, ConfigurationError
from flask_social_oauth2.local_idp import LocalIdentityProvider, LocalUser
from flask_social_oauth2.web import state_cookie


def extension(app: Flask) -> SocialOAuth2:
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension
    return social


def begin(client: Any, provider: str = "local", **query: str) -> str:
    """Start a flow; the provider's callback URL after auto-approval."""
    started = client.get(f"/authenticate/{provider}", query_string=query)
    assert started.status_code == 302
    return follow_to_provider(started.headers["Location"])


def state_cookie_value(client: Any) -> str | None:
    cookie = client.get_cookie(state_cookie_name(client.application))
    return None if cookie is None else str(cookie.value)


# -- State and CSRF -----------------------------------------------------------------------------


def test_s01_state_is_unique_and_has_at_least_160_bits(idp_app: Flask) -> None:
    client = idp_app.test_client()
    states = set()
    for _ in range(1000):
        state = start_flow(client, "local")["state"]
        raw = base64.urlsafe_b64decode(state + "=" * (-len(state) % 4))
        assert len(raw) >= 20
        states.add(state)
    assert len(states) == 1000


def test_s02_state_is_bound_to_the_browser_that_started(
    idp_app: Flask, idp: LocalIdentityProvider
) -> None:
    browser_a = idp_app.test_client()
    browser_b = idp_app.test_client()
    callback = begin(browser_a)
    browser_b.get("/authenticate/local")  # B has a state cookie of its own
    response = browser_b.get(callback_path(callback))
    assert response.status_code == 400
    assert idp.token_requests == []
    assert browser_a.get(callback_path(callback)).status_code == 302


@pytest.mark.parametrize(
    "query",
    [
        {"code": "c"},
        {"code": "c", "state": ""},
        {"code": "c", "state": "wrong-state-value-wrong-state-value"},
    ],
    ids=["missing", "empty", "wrong"],
)
def test_s03_bad_state_is_refused_before_any_call(
    idp_app: Flask, idp: LocalIdentityProvider, query: dict[str, str]
) -> None:
    client = idp_app.test_client()
    callback = begin(client)
    real = query_of(callback)
    query = {**query, "code": real["code"]}
    response = client.get("/authenticate/local", query_string=query)
    assert 400 <= response.status_code < 500
    assert idp.token_requests == []


def test_s03_duplicated_state_is_refused_before_any_call(
    idp_app: Flask, idp: LocalIdentityProvider
) -> None:
    client = idp_app.test_client()
    real = query_of(begin(client))
    response = client.get(
        f"/authenticate/local?code={real['code']}&state={real['state']}&state={real['state']}"
    )
    assert response.status_code == 400
    assert idp.token_requests == []


def test_s04_state_is_single_use(idp_app: Flask, idp: LocalIdentityProvider) -> None:
    client = idp_app.test_client()
    callback = begin(client)
    assert client.get(callback_path(callback)).status_code == 302
    replay = client.get(callback_path(callback))
    assert replay.status_code == 400
    assert len(idp.token_requests) == 1


def test_s05_state_expires(
    idp_app: Flask, idp: LocalIdentityProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = idp_app.test_client()
    callback = begin(client)
    started = int(time.time())
    monkeypatch.setattr(state_cookie, "now", lambda: started + 601)
    response = client.get(callback_path(callback))
    assert response.status_code == 400
    assert "invalid or has expired" in response.text
    assert idp.token_requests == []


def test_s05_state_ttl_is_configurable(
    make_app: MakeApp, idp: LocalIdentityProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app({"local": idp_block(idp)}, SOCIAL_OAUTH2_STATE_TTL=60)
    client = app.test_client()
    callback = begin(client)
    started = int(time.time())
    monkeypatch.setattr(state_cookie, "now", lambda: started + 30)
    assert client.get(callback_path(callback)).status_code == 302
    callback = begin(client)  # created at started + 30
    monkeypatch.setattr(state_cookie, "now", lambda: started + 30 + 61)
    assert client.get(callback_path(callback)).status_code == 400


def test_s06_state_comparison_is_constant_time(
    idp_app: Flask, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[bytes, bytes]] = []
    real_compare = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real_compare(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    client = idp_app.test_client()
    callback = begin(client)
    assert client.get(callback_path(callback)).status_code == 302
    assert (query_of(callback)["state"].encode(),) * 2 in calls


def test_s07_parallel_flows_each_complete(make_app: MakeApp, idp: LocalIdentityProvider) -> None:
    idp.register_client("second", "second-secret", ["http://localhost/authenticate/second"])
    second = idp.settings_block("second", "second-secret", "/authenticate/second")
    app = make_app({"local": idp_block(idp), "second": second})
    client = app.test_client()
    tab_one = begin(client)
    tab_two = begin(client)
    other_provider = begin(client, "second")
    assert client.get(callback_path(other_provider)).status_code == 302
    assert client.get(callback_path(tab_two)).status_code == 302
    assert client.get(callback_path(tab_one)).status_code == 302
    assert len(idp.token_requests) == 3


def test_s07_cookie_stays_small_after_50_abandoned_flows(
    idp_app: Flask, idp: LocalIdentityProvider
) -> None:
    client = idp_app.test_client()
    for _ in range(50):
        response = client.get("/authenticate/local", query_string={"next": "/" + "n" * 500})
        header = response.headers["Set-Cookie"]
        assert len(header) < 4093
    assert sign_in(client).status_code == 302


# -- PKCE and redirect URIs ---------------------------------------------------------------------


def test_s08_pkce_s256_with_a_fresh_verifier(idp_app: Flask, idp: LocalIdentityProvider) -> None:
    client = idp_app.test_client()
    sign_in(client)
    sign_in(client)
    first, second = idp.authorization_requests
    assert first["code_challenge_method"] == second["code_challenge_method"] == "S256"
    assert first["code_challenge"] != second["code_challenge"]
    verifiers = [request.form["code_verifier"] for request in idp.token_requests]
    assert len(set(verifiers)) == 2
    assert all(len(verifier) >= 43 for verifier in verifiers)


def test_s08_the_server_rejects_a_swapped_verifier(
    idp_app: Flask, idp: LocalIdentityProvider
) -> None:
    client = idp_app.test_client()
    first = begin(client)
    begin(client)
    serializer = idp_app.extensions["social_oauth2"].state_cookies.serializer(idp_app)
    flows = state_cookie.decode(serializer, state_cookie_value(client), 600, state_cookie.now())
    one, two = flows
    swapped = [
        dataclasses.replace(one, verifier=two.verifier),
        dataclasses.replace(two, verifier=one.verifier),
    ]
    value = state_cookie.encode(serializer, swapped)
    assert value is not None
    client.set_cookie(state_cookie_name(idp_app), value)
    response = client.get(callback_path(first))
    assert response.status_code == 502
    (token_request,) = idp.token_requests
    assert token_request.status_code == 400


def test_s09_token_request_repeats_the_exact_redirect_uri(
    idp_app: Flask, idp: LocalIdentityProvider
) -> None:
    sign_in(idp_app.test_client())
    (authorization,) = idp.authorization_requests
    (token,) = idp.token_requests
    assert token.form["redirect_uri"].encode() == authorization["redirect_uri"].encode()
    assert token.status_code == 200


def test_s10_foreign_host_is_refused_with_trusted_hosts(idp_app: Flask) -> None:
    response = idp_app.test_client().get("/authenticate/local", headers={"Host": "evil.example"})
    assert response.status_code == 400
    assert "Location" not in response.headers


def test_s10_forwarded_host_without_proxy_fix_changes_nothing(idp_app: Flask) -> None:
    query = start_flow(
        idp_app.test_client(),
        "local",
    )
    client = idp_app.test_client()
    response = client.get(
        "/authenticate/local",
        headers={"X-Forwarded-Host": "evil.example", "X-Forwarded-Proto": "https"},
    )
    redirect_uri = query_of(response.headers["Location"])["redirect_uri"]
    assert redirect_uri == query["redirect_uri"] == "http://localhost/authenticate/local"


def test_s10_proxy_fix_gives_an_https_redirect_uri(
    idp_app: Flask, idp: LocalIdentityProvider
) -> None:
    idp_app.wsgi_app = ProxyFix(idp_app.wsgi_app, x_proto=1)  # type: ignore[method-assign]
    client = idp_app.test_client()
    started = client.get("/authenticate/local", headers={"X-Forwarded-Proto": "https"})
    assert query_of(started.headers["Location"])["redirect_uri"] == (
        "https://localhost/authenticate/local"
    )
    assert "Secure" in started.headers["Set-Cookie"]


def test_s10_redirect_is_not_cached(idp_app: Flask) -> None:
    response = idp_app.test_client().get("/authenticate/local")
    assert response.headers["Cache-Control"] == "no-store"


@pytest.mark.parametrize(
    "target",
    [
        "https://evil",
        "//evil",
        "////evil",
        "/\\evil",
        "\\\\evil",
        "https:evil",
        "/%09/evil",
        "/\t/evil",
        "javascript:alert(1)",
    ],
)
def test_s11_next_is_a_same_origin_path_only(idp_app: Flask, target: str) -> None:
    client = idp_app.test_client()
    started = client.get(f"/authenticate/local?next={target}")
    callback = follow_to_provider(started.headers["Location"])
    response = client.get(callback_path(callback))
    assert response.status_code == 302
    assert response.headers["Location"] == "/"


def test_s11_next_is_kept_with_the_state(idp_app: Flask) -> None:
    client = idp_app.test_client()
    callback = begin(client, next="/dashboard?tab=2")
    response = client.get(callback_path(callback) + "&next=https://evil")
    assert response.headers["Location"] == "/dashboard?tab=2"


# -- Callback input -----------------------------------------------------------------------------


def test_s12_access_denied_is_an_access_denied_error(
    idp_app: Flask, idp: LocalIdentityProvider
) -> None:
    errors: list[AuthenticationError] = []
    idp.deny_next("access_denied", "<script>alert(1)</script>")

    @extension(idp_app).on_error
    def failed(provider_name: str, error: AuthenticationError) -> Any:
        errors.append(error)
        return "denied", error.status_code

    client = idp_app.test_client()
    response = client.get(callback_path(begin(client)))
    assert response.status_code == 403
    assert type(errors[0]).__name__ == "AccessDeniedError"
    assert idp.token_requests == []


@pytest.mark.parametrize("code", ["server_error", "temporarily_unavailable", "invalid_scope"])
def test_s12_other_errors_are_authentication_errors_and_never_reflected(
    idp_app: Flask, idp: LocalIdentityProvider, code: str
) -> None:
    client = idp_app.test_client()
    query = start_flow(client, "local")
    response = client.get(
        "/authenticate/local",
        query_string={
            "error": code,
            "error_description": "<script>alert(1)</script>",
            "state": query["state"],
        },
    )
    assert 400 <= response.status_code < 500
    assert "<script>" not in response.text
    assert "alert(1)" not in response.text
    assert idp.token_requests == []


@pytest.mark.parametrize(
    "query",
    [
        "code=a&code=b&state=s",
        "code=c&state=a&state=b",
        "code=" + "c" * 2049 + "&state=s",
        "code=c&state=" + "s" * 2049,
    ],
    ids=["double-code", "double-state", "long-code", "long-state"],
)
def test_s13_oversized_or_repeated_parameters_get_400_before_any_work(
    idp_app: Flask, idp: LocalIdentityProvider, query: str
) -> None:
    client = idp_app.test_client()
    start_flow(client, "local")
    response = client.get(f"/authenticate/local?{query}")
    assert response.status_code == 400
    assert idp.token_requests == []


def test_s14_flow_pages_send_no_referrer_and_load_nothing_from_third_parties(
    idp_app: Flask, idp: LocalIdentityProvider
) -> None:
    client = idp_app.test_client()
    started = client.get("/authenticate/local")
    assert started.headers["Referrer-Policy"] == "no-referrer"
    finished = client.get(callback_path(follow_to_provider(started.headers["Location"])))
    assert finished.headers["Referrer-Policy"] == "no-referrer"
    failed = client.get("/authenticate/local?code=x&state=nope")
    assert failed.headers["Referrer-Policy"] == "no-referrer"
    assert "default-src 'none'" in failed.headers["Content-Security-Policy"]
    assert "src=" not in failed.text
    assert "http" not in failed.text.split("</head>")[1]


# -- Back channel -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "url"),
    [
        ("accessTokenURL", "http://provider.example/token"),
        ("apiURL", "http://provider.example/me"),
        ("accessTokenURL", "http://localhost:80@attacker.test/"),
        ("apiURL", "http://127.0.0.1.attacker.test/me"),
    ],
)
def test_s15_plain_http_only_for_loopback_checked_at_load(
    make_app: MakeApp, idp: LocalIdentityProvider, key: str, url: str
) -> None:
    with pytest.raises(ConfigurationError, match=key):
        make_app({"local": idp_block(idp, **{key: url})})


def test_s15_loopback_http_works_without_environment_switches(
    idp_app: Flask, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OAUTHLIB_INSECURE_TRANSPORT", raising=False)
    monkeypatch.delenv("AUTHLIB_INSECURE_TRANSPORT", raising=False)
    assert sign_in(idp_app.test_client()).status_code == 302
    import os

    assert "OAUTHLIB_INSECURE_TRANSPORT" not in os.environ
    assert "OAUTHLIB_RELAX_TOKEN_SCOPE" not in os.environ


def test_s16_timeouts_are_enforced(make_app: MakeApp, fault_server: FaultServer) -> None:
    fault_server.set("/token", Behaviour.hang())
    app = fault_app(make_app, fault_server, SOCIAL_OAUTH2_TIMEOUT=0.5)
    client = app.test_client()
    query = start_flow(client, "faulty")
    began = time.monotonic()
    response = client.get(
        "/authenticate/faulty", query_string={"code": "c", "state": query["state"]}
    )
    assert time.monotonic() - began < 1.5
    assert response.status_code == 504


def test_s17_response_bodies_are_capped_with_bounded_memory(
    make_app: MakeApp, fault_server: FaultServer
) -> None:
    fault_server.set("/token", Behaviour.huge(50 * 1024 * 1024))
    app = fault_app(make_app, fault_server)
    client = app.test_client()
    query = start_flow(client, "faulty")
    tracemalloc.start()
    try:
        response = client.get(
            "/authenticate/faulty", query_string={"code": "c", "state": query["state"]}
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert response.status_code == 502
    assert peak < 8 * 1024 * 1024


@pytest.mark.parametrize(
    "kind", ["server_error", "invalid_grant", "no_access_token", "html", "error_in_200"]
)
def test_s18_token_response_is_validated(
    idp_app: Flask, idp: LocalIdentityProvider, kind: Any, captured_logs: list[Any]
) -> None:
    idp.fail_next_token(kind)
    response = sign_in(idp_app.test_client())
    assert response.status_code == 502
    failures = [r.getMessage() for r in captured_logs if "sign-in failed" in r.getMessage()]
    assert len(failures) == 1
    assert "provider 'local'" in failures[0]
    assert "HTTP" in failures[0]
    assert idp.userinfo_requests == []


def test_s19_access_token_goes_in_the_authorization_header(
    idp_app: Flask, idp: LocalIdentityProvider
) -> None:
    tokens: list[OAuth2Info] = []

    @extension(idp_app).on_authenticated
    def done(provider: SocialProvider, info: OAuth2Info, profile: SocialProfile) -> str:
        tokens.append(info)
        return "ok"

    assert sign_in(idp_app.test_client()).text == "ok"
    (userinfo,) = idp.userinfo_requests
    headers = {key.lower(): value for key, value in userinfo.items()}
    assert headers["authorization"] == f"Bearer {tokens[0].access_token}"


def _secrets_of_a_flow(
    app: Flask, idp: LocalIdentityProvider
) -> tuple[list[str], list[OAuth2Info]]:
    tokens: list[OAuth2Info] = []

    @extension(app).on_authenticated
    def done(provider: SocialProvider, info: OAuth2Info, profile: SocialProfile) -> str:
        tokens.append(info)
        return f"{info!r} {profile!r}"

    client = app.test_client()
    callback = begin(client)
    response = client.get(callback_path(callback))
    assert response.status_code == 200
    for text in (response.text,):
        assert tokens[0].access_token not in text
    found = [CLIENT_SECRET, query_of(callback)["code"], idp.token_requests[0].form["code_verifier"]]
    info = tokens[0]
    found += [info.access_token, str(info.refresh_token), str(info.params.get("id_token"))]
    return found, tokens


def test_s20_secrets_never_reach_logs_reprs_or_errors(
    make_app: MakeApp, idp: LocalIdentityProvider, captured_logs: list[Any]
) -> None:
    app = make_app({"local": idp_block(idp)})
    secrets, tokens = _secrets_of_a_flow(app, idp)
    errors: list[AuthenticationError] = []

    @extension(app).on_error
    def failed(provider_name: str, error: AuthenticationError) -> Any:
        errors.append(error)
        return "failed", error.status_code

    client = app.test_client()
    # every failure path: replay, wrong state, denied, bad token answer, profile failure
    callback = begin(client)
    client.get(callback_path(callback))
    client.get(callback_path(callback))
    secrets.append(query_of(callback)["code"])
    client.get(f"/authenticate/local?code={query_of(callback)['code']}&state=wrong")
    idp.deny_next()
    client.get(callback_path(begin(client)))
    for kind in ("server_error", "no_access_token", "html", "error_in_200", "invalid_grant"):
        idp.fail_next_token(kind)
        callback = begin(client)
        secrets.append(query_of(callback)["code"])
        client.get(callback_path(callback))
    idp.revoke_access_tokens()
    callback = begin(client)
    secrets.append(query_of(callback)["code"])
    client.get(callback_path(callback))
    assert len(errors) >= 8
    texts = [record.getMessage() for record in captured_logs]
    texts += [f"{record.args!r}" for record in captured_logs]
    texts += [str(error) for error in errors] + [repr(error) for error in errors]
    texts += [repr(info) for info in tokens] + [str(info) for info in tokens]
    texts += [repr(provider) for provider in app.extensions["social_oauth2"].providers.values()]
    texts += [repr(p.settings) for p in app.extensions["social_oauth2"].providers.values()]
    assert len(captured_logs) > 20
    for secret in secrets:
        assert len(secret) >= 8
        leaks = [text for text in texts if secret in text]
        assert leaks == [], f"a secret leaked: {leaks[:2]}"


# -- Several providers and sign-in --------------------------------------------------------------


def test_s21_callback_at_another_providers_route_is_refused(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    idp.register_client("second", "second-secret", ["http://localhost/authenticate/second"])
    second = idp.settings_block("second", "second-secret", "/authenticate/second")
    app = make_app({"local": idp_block(idp), "second": second})
    client = app.test_client()
    callback = begin(client, "local")
    response = client.get("/authenticate/second?" + urlsplit(callback).query)
    assert response.status_code == 400
    assert idp.token_requests == []


def test_s21_iss_must_equal_the_expected_issuer(make_app: MakeApp) -> None:
    with LocalIdentityProvider(iss_parameter=True) as server:
        from helpers import CLIENT_ID, LOCAL_REDIRECT

        server.register_client(CLIENT_ID, CLIENT_SECRET, [LOCAL_REDIRECT])
        server.auto_approve = ALICE
        good = make_app({"local": idp_block(server, customProperties={"issuer": server.issuer})})
        assert sign_in(good.test_client()).status_code == 302
        # PAR off: "auto" would read the (unreachable) issuer's metadata at the start
        custom = {"issuer": "https://other.example", "pushedAuthorization": "off"}
        wrong = make_app({"local": idp_block(server, customProperties=custom)})
        client = wrong.test_client()
        callback = begin(client)
        assert query_of(callback)["iss"] == server.issuer
        assert client.get(callback_path(callback)).status_code == 400
        assert len(server.token_requests) == 1


def test_s22_users_are_identified_by_provider_and_immutable_id(
    idp_app: Flask, idp: LocalIdentityProvider
) -> None:
    profiles: list[SocialProfile] = []

    @extension(idp_app).on_authenticated
    def done(provider: SocialProvider, info: OAuth2Info, profile: SocialProfile) -> str:
        profiles.append(profile)
        return "ok"

    client = idp_app.test_client()
    sign_in(client)
    idp.auto_approve = LocalUser(
        sub=ALICE.sub, name="Alice Renamed", email="new-address@example.test"
    )
    sign_in(client)
    first, second = profiles
    assert (first.provider_id, first.provider_key) == (second.provider_id, second.provider_key)
    assert first.provider_key == ALICE.sub
    assert first.email != second.email
    assert first.provider_key not in (first.email, second.email)


def test_s22_a_profile_without_an_id_is_refused_never_keyed_by_email(
    make_app: MakeApp, fault_server: FaultServer
) -> None:
    fault_server.set("/token", Behaviour.json({"access_token": "at"}))
    fault_server.set("/userinfo", Behaviour.json({"email": "a@example.test", "name": "A"}))
    app = fault_app(make_app, fault_server)
    client = app.test_client()
    response = sign_in(client, "faulty", code="c")
    assert response.status_code == 502


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_s23_state_cookie_attributes(idp_app: Flask, scheme: str) -> None:
    client = idp_app.test_client()
    response = client.get("/authenticate/local", base_url=f"{scheme}://localhost")
    header = response.headers["Set-Cookie"]
    assert header.startswith(f"{state_cookie_name(idp_app, secure=scheme == 'https')}=")
    assert "HttpOnly" in header
    assert "SameSite=Lax" in header
    assert ("Secure" in header) == (scheme == "https")
    assert "Max-Age=600" in header


# -- 24: a code posted by a client-side framework ------------------------------------------------


@pytest.fixture
def spa_app(make_app: MakeApp, idp: LocalIdentityProvider) -> Flask:
    """An app whose provider ``local`` is configured for a client-side framework: no
    ``authorizationURL``, so the browser runs the authorization request and POSTs the code."""
    block = idp_block(idp)
    del block["authorizationURL"]
    return make_app({"local": block})


def new_verifier() -> str:
    return token_urlsafe(48)


def test_s24_a_posted_code_without_its_verifier_is_refused_before_any_call(
    spa_app: Flask, idp: LocalIdentityProvider
) -> None:
    code = browser_code(idp, new_verifier())
    response = spa_app.test_client().post("/authenticate/local", json={"code": code})
    assert response.status_code == 400
    assert idp.token_requests == []


@pytest.mark.parametrize(
    "verifier",
    ["", "too-short", "x" * 129, "a" * 42 + "!", "a" * 43 + " ", 12345, None],
    ids=["empty", "short", "long", "bad-character", "space", "number", "null"],
)
def test_s24_a_malformed_verifier_is_refused_before_any_call(
    spa_app: Flask, idp: LocalIdentityProvider, verifier: Any
) -> None:
    body = {"code": browser_code(idp, new_verifier()), "code_verifier": verifier}
    response = spa_app.test_client().post("/authenticate/local", json=body)
    assert response.status_code == 400
    assert idp.token_requests == []


@pytest.mark.parametrize(
    "origin",
    ["https://evil.example", "http://localhost.evil.example", "http://localhost:8080", "null"],
)
def test_s24_a_post_from_another_origin_is_refused_before_any_call(
    spa_app: Flask, idp: LocalIdentityProvider, origin: str
) -> None:
    verifier = new_verifier()
    body = {"code": browser_code(idp, verifier), "code_verifier": verifier}
    client = spa_app.test_client()
    response = client.post("/authenticate/local", json=body, headers={"Origin": origin})
    assert response.status_code == 403
    assert idp.token_requests == []


def test_s24_the_right_verifier_from_the_apps_own_origin_signs_in(
    spa_app: Flask, idp: LocalIdentityProvider
) -> None:
    verifier = new_verifier()
    body = {"code": browser_code(idp, verifier), "code_verifier": verifier}
    client = spa_app.test_client()
    response = client.post("/authenticate/local", json=body, headers={"Origin": "http://localhost"})
    assert response.status_code == 200
    assert response.json == {"signed_in": True, "provider": "local", "next": "/"}
    (token_request,) = idp.token_requests
    assert token_request.status_code == 200
    assert token_request.form["code_verifier"] == verifier
    assert token_request.form["redirect_uri"] == LOCAL_REDIRECT
    with client.session_transaction() as session:
        assert session["social_profile"]["provider_key"] == ALICE.sub


def test_s24_a_stolen_code_with_another_verifier_is_refused_by_the_server(
    spa_app: Flask, idp: LocalIdentityProvider
) -> None:
    code = browser_code(idp, new_verifier())  # the victim's code; the thief lacks its verifier
    client = spa_app.test_client()
    response = client.post("/authenticate/local", json={"code": code, "code_verifier": "a" * 43})
    assert response.status_code == 502
    (token_request,) = idp.token_requests
    assert token_request.status_code == 400  # the server checked the PKCE pair
    with client.session_transaction() as session:
        assert "social_profile" not in session


@pytest.mark.parametrize("size", [1_000, 100_000])
def test_s24_a_deeply_nested_json_body_is_a_400_never_a_500(
    spa_app: Flask, idp: LocalIdentityProvider, size: int
) -> None:
    response = spa_app.test_client().post(
        "/authenticate/local", data="[" * size, content_type="application/json"
    )
    assert response.status_code == 400
    assert idp.token_requests == []


# -- 25: a flow is finished only under the settings that started it ------------------------------


@pytest.fixture
def second_idp() -> Iterator[LocalIdentityProvider]:
    """Another tenant's authorization server."""
    with LocalIdentityProvider() as server:
        server.register_client("tenant-b", CLIENT_SECRET, [LOCAL_REDIRECT])
        server.auto_approve = ALICE
        yield server


SettingsChange = Callable[[OAuth2Settings, LocalIdentityProvider], OAuth2Settings]
CHANGES: dict[str, SettingsChange] = {
    "another tenant's server": lambda s, other: s.replace(
        access_token_url=other.token_url, api_url=other.userinfo_url, client_id="tenant-b"
    ),
    "token endpoint": lambda s, other: s.replace(access_token_url=other.token_url),
    "client id": lambda s, other: s.replace(client_id="another-client"),
    "redirect_uri": lambda s, other: s.replace(redirect_url="/tenant/local"),
    "issuer": lambda s, other: s.replace(custom_properties={"issuer": other.issuer}),
    "openid dropped": lambda s, other: s.replace(scope="profile email"),
}


def tenant_app(make_app: MakeApp, idp: LocalIdentityProvider) -> Flask:
    """An app whose ``local`` route derives the provider per tenant (a cookie names it), as a
    multi-tenant view would with ``with_settings``."""
    app = make_app({"local": idp_block(idp)})
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension
    app.config["TENANTS"] = {"a": lambda s: s}

    @app.get("/tenant/<provider>")
    def tenant_view(provider: str) -> Any:
        change = app.config["TENANTS"][request.cookies.get("tenant", "a")]
        result = social.provider(provider).with_settings(change).authenticate()
        return result if isinstance(result, Response) else f"signed in: {result.token_type}"

    return app


@pytest.mark.parametrize("change", list(CHANGES))
def test_s25_a_flow_started_under_one_variant_cannot_finish_under_another(
    make_app: MakeApp,
    idp: LocalIdentityProvider,
    second_idp: LocalIdentityProvider,
    change: str,
) -> None:
    app = tenant_app(make_app, idp)
    app.config["TENANTS"]["b"] = lambda s: CHANGES[change](s, second_idp)
    client = app.test_client()
    started = client.get("/tenant/local")
    assert started.status_code == 302
    callback = follow_to_provider(started.headers["Location"])
    client.set_cookie("tenant", "b")
    response = client.get("/tenant/local?" + callback.split("?", 1)[1])
    assert response.status_code == 400
    assert idp.token_requests == []
    assert second_idp.token_requests == []
    assert second_idp.authorization_requests == []


def test_s25_a_flow_finishes_under_the_variant_that_started_it(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    app = tenant_app(make_app, idp)
    app.config["TENANTS"]["same"] = lambda s: s.replace(
        authorization_params={"prompt": "login"}  # not part of what the flow is bound to
    )
    client = app.test_client()
    client.set_cookie("tenant", "same")
    started = client.get("/tenant/local")
    callback = follow_to_provider(started.headers["Location"])
    response = client.get("/tenant/local?" + callback.split("?", 1)[1])
    assert response.text == "signed in: Bearer"
    assert len(idp.token_requests) == 1


# -- 29: the state cookie is __Host- prefixed on https and scoped to the app ---------------------


def test_s29_on_https_the_state_cookie_is_host_prefixed_with_path_root(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    app = make_app({"local": idp_block(idp)}, SOCIAL_OAUTH2_STATE_COOKIE_PATH="/authenticate")
    client = app.test_client()
    started = client.get("/authenticate/local", base_url="https://localhost")
    header = started.headers["Set-Cookie"]
    assert header.startswith(f"__Host-{state_cookie_name(app)}=")
    assert state_cookie_name(app, secure=True) == f"__Host-{state_cookie_name(app)}"
    assert "; Secure" in header
    assert "; Path=/;" in header
    assert "Domain=" not in header
    callback = follow_to_provider(started.headers["Location"])
    assert callback.startswith("https://localhost/authenticate/local?")
    finished = client.get(callback_path(callback), base_url="https://localhost")
    assert finished.status_code == 302
    assert len(idp.token_requests) == 1
    plain = client.get("/authenticate/local", base_url="http://localhost")
    assert "; Path=/authenticate;" in plain.headers["Set-Cookie"]


def test_s29_a_cookie_planted_without_the_prefix_is_not_read_on_https(
    idp_app: Flask, idp: LocalIdentityProvider
) -> None:
    """A sibling subdomain can set a ``Domain=`` cookie of the plain name (login CSRF: the
    attacker's own flow planted in the victim's browser), never a ``__Host-`` one."""
    attacker = idp_app.test_client()
    started = attacker.get("/authenticate/local", base_url="https://localhost")
    callback = follow_to_provider(started.headers["Location"])
    cookie = attacker.get_cookie(state_cookie_name(idp_app, secure=True))
    assert cookie is not None
    victim = idp_app.test_client()
    victim.set_cookie(state_cookie_name(idp_app), cookie.value)
    response = victim.get(callback_path(callback), base_url="https://localhost")
    assert response.status_code == 400
    assert idp.token_requests == []


def test_s29_another_app_with_the_same_secret_key_cannot_finish_a_flow(
    idp: LocalIdentityProvider,
) -> None:
    apps = []
    for import_name in ("shop", "blog"):
        app = Flask(import_name)
        app.config.update(
            SECRET_KEY="one-key-for-the-whole-host",
            TRUSTED_HOSTS=["localhost"],
            SOCIAL_OAUTH2_PROVIDERS={"local": idp_block(idp)},
        )
        SocialOAuth2(app)
        apps.append(app)
    shop, blog = apps
    assert state_cookie_name(shop) != state_cookie_name(blog)
    client = shop.test_client()
    callback = follow_to_provider(client.get("/authenticate/local").headers["Location"])
    cookie = client.get_cookie(state_cookie_name(shop))
    assert cookie is not None
    other = blog.test_client()
    other.set_cookie(state_cookie_name(blog), cookie.value)  # even under the right name
    response = other.get(callback_path(callback))
    assert response.status_code == 400
    assert idp.token_requests == []
    assert client.get(callback_path(callback)).status_code == 302  # the shop's flow is intact


def test_s29_an_explicit_cookie_name_is_kept(make_app: MakeApp, idp: LocalIdentityProvider) -> None:
    app = make_app({"local": idp_block(idp)}, SOCIAL_OAUTH2_STATE_COOKIE="signin")
    assert state_cookie_name(app) == "signin"
    assert state_cookie_name(app, secure=True) == "__Host-signin"
    assert sign_in(app.test_client()).status_code == 302


# -- 21: iss (RFC 9207) is checked on error callbacks too ----------------------------------------


@pytest.fixture
def iss_app(make_app: MakeApp) -> Iterator[tuple[Flask, LocalIdentityProvider]]:
    with LocalIdentityProvider(iss_parameter=True) as server:
        server.register_client(CLIENT_ID, CLIENT_SECRET, [LOCAL_REDIRECT])
        block = idp_block(server, customProperties={"issuer": server.issuer})
        yield make_app({"local": block}), server


@pytest.mark.parametrize(
    ("iss", "status"),
    [("https://evil.example", 400), (None, 400), ("issuer", 403)],
    ids=["wrong-iss", "missing-iss", "right-iss"],
)
def test_s21_an_error_callback_is_trusted_only_with_the_right_iss(
    iss_app: tuple[Flask, LocalIdentityProvider], iss: str | None, status: int
) -> None:
    app, server = iss_app
    client = app.test_client()
    state = start_flow(client, "local")["state"]
    query = {"error": "access_denied", "state": state}
    if iss is not None:
        query["iss"] = server.issuer if iss == "issuer" else iss
    response = client.get("/authenticate/local", query_string=query)
    assert response.status_code == status  # 400: StateError (mix-up), 403: AccessDeniedError
    assert server.token_requests == []


# -- T10: only a real navigation redeems a code ----------------------------------------------------


def test_s13_a_head_request_on_the_callback_touches_no_flow(
    idp_app: Flask, idp: LocalIdentityProvider
) -> None:
    """Link previews and prefetchers send HEAD: no token request, the state is not used up,
    and the user's own GET still signs in."""
    client = idp_app.test_client()
    callback = follow_to_provider(client.get("/authenticate/local").headers["Location"])
    preview = client.head(callback_path(callback))
    assert preview.status_code == 200
    assert preview.data == b""
    assert "Set-Cookie" not in preview.headers
    assert preview.headers["Cache-Control"] == "no-store"
    assert idp.token_requests == []
    assert client.get(callback_path(callback)).status_code == 302
    assert len(idp.token_requests) == 1


def test_s13_a_head_request_starts_no_flow(idp_app: Flask, idp: LocalIdentityProvider) -> None:
    response = idp_app.test_client().head("/authenticate/local")
    assert response.status_code == 200
    assert "Set-Cookie" not in response.headers
    assert "Location" not in response.headers
    assert idp.authorization_requests == []


def test_s13_a_custom_view_calling_authenticate_is_safe_from_head_too(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    app = tenant_app(make_app, idp)
    client = app.test_client()
    callback = follow_to_provider(client.get("/tenant/local").headers["Location"])
    assert client.head("/tenant/local?" + callback.split("?", 1)[1]).status_code == 200
    assert idp.token_requests == []
    response = client.get("/tenant/local?" + callback.split("?", 1)[1])
    assert response.text == "signed in: Bearer"


# -- Browser-issued ID tokens -------------------------------------------------------------------


@pytest.mark.parametrize(
    "attack", ["mismatched-pair", "replayed", "another-client", "foreign-hd", "foreign-nonce"]
)
def test_s42_a_browser_posted_id_token_needs_the_pair_its_nonce_and_the_checks(
    make_app: MakeApp, fault_server: FaultServer, rsa_key: Any, attack: str
) -> None:
    google = LocalGoogle(fault_server, rsa_key)
    app = one_tap_app(make_app, google, hostedDomains="example.test")
    signed_in: list[SocialProfile] = []
    failed: list[AuthenticationError] = []

    @extension(app).on_authenticated
    def done(provider: SocialProvider, info: OAuth2Info, profile: SocialProfile) -> str:
        signed_in.append(profile)
        return "signed in"

    @extension(app).on_error
    def refused(provider: str, error: AuthenticationError) -> tuple[str, int]:
        failed.append(error)
        return "refused", error.status_code

    client = app.test_client()
    nonce = client.get("/nonce").text
    if attack == "replayed":
        credential = google.credential(nonce)
        assert post_credential(client, credential).text == "signed in"
        signed_in.clear()
        answer = post_credential(client, credential)
    elif attack == "mismatched-pair":
        answer = post_credential(client, google.credential(nonce), field="planted-by-attacker")
    elif attack == "another-client":
        answer = post_credential(client, google.credential(nonce, aud="other", azp="other"))
    elif attack == "foreign-hd":
        answer = post_credential(client, google.credential(nonce, hd="attacker.test"))
    else:  # the attacker's own nonce, from their own browser
        attacker = app.test_client()
        answer = post_credential(client, google.credential(attacker.get("/nonce").text))
    expected = 403 if attack == "foreign-hd" else 400
    assert (answer.status_code, answer.text) == (expected, "refused")
    assert signed_in == []
    assert len(failed) == 1
    with client.session_transaction() as session:
        assert "social_profile" not in session


# -- 41: providers loaded at runtime -------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["a%2Fb", "a/b", "..", "a..b", "a" * 200, "Local", "ACME", "acme%00", "-acme", "acme%0a"],
)
def test_s41_the_loader_sees_only_names_of_the_documented_shape(
    idp_app: Flask, idp: LocalIdentityProvider, name: str
) -> None:
    social = extension(idp_app)
    asked: list[str] = []

    @social.provider_loader
    def everyone(wanted: str) -> SocialProvider | None:
        asked.append(wanted)
        return social.build_provider(wanted, idp_block(idp, redirectURL=f"/authenticate/{wanted}"))

    client = idp_app.test_client()
    assert client.get(f"/authenticate/{name}").status_code == 404
    assert client.get(f"/authenticate/{name}/jwks.json").status_code == 404
    assert asked == []
    assert idp.authorization_requests == []
    assert client.get("/authenticate/acme").status_code == 302  # a good name does reach it
    assert asked == ["acme"]


def test_s41_a_configured_name_is_never_shadowed_by_the_loader(
    idp_app: Flask, idp: LocalIdentityProvider
) -> None:
    social = extension(idp_app)
    asked: list[str] = []
    with LocalIdentityProvider() as impostor:
        impostor.register_client(CLIENT_ID, CLIENT_SECRET, [LOCAL_REDIRECT])
        impostor.auto_approve = ALICE

        @social.provider_loader
        def shadowing(wanted: str) -> SocialProvider | None:
            asked.append(wanted)
            return OAuth2Provider(wanted, OAuth2Settings.from_config(idp_block(impostor)))

        assert sign_in(idp_app.test_client()).status_code == 302
        with idp_app.app_context():
            assert (
                social.provider("local") is idp_app.extensions["social_oauth2"].providers["local"]
            )
            with pytest.raises(ConfigurationError, match="is a configured provider"):
                social.build_provider("local", idp_block(impostor))
        assert asked == []
        assert impostor.authorization_requests == []
        assert impostor.token_requests == []
        assert len(idp.token_requests) == 1


# -- 40: the post-logout return takes only the single-use state it gave this browser -------------


def _signed_out_return(make_app: MakeApp, idp: LocalIdentityProvider) -> tuple[Flask, Any, str]:
    """An app signed in with ``local`` (discovery: an end-session endpoint), a browser that
    signed out with ``logout_redirect``; the provider's return URL (path and query)."""
    block = {**idp_block(idp), "customProperties": {"issuer": idp.issuer}}
    del block["authorizationURL"], block["apiURL"]
    app = make_app({"local": block})

    @app.post("/logout")
    def logout() -> Response:
        return extension(app).logout_redirect("local", next="/after")

    client = app.test_client()
    sign_in(client)
    location = client.post("/logout").headers["Location"]
    return app, client, callback_path(follow_to_provider(location))


def test_s40_the_logged_out_return_redirects_once_to_a_same_origin_next(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    _, client, back = _signed_out_return(make_app, idp)
    assert client.get(back).headers["Location"] == "/after"
    replayed = client.get(back)
    assert replayed.status_code == 400
    assert "Location" not in replayed.headers


def test_s40_no_state_or_another_browsers_state_is_a_400(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    app, client, back = _signed_out_return(make_app, idp)
    for path in ("/authenticate/local/logged-out", "/authenticate/local/logged-out?state="):
        answer = client.get(path)
        assert answer.status_code == 400
        assert "Location" not in answer.headers
    other_browser = app.test_client()
    stolen = other_browser.get(back)
    assert stolen.status_code == 400
    assert "Location" not in stolen.headers
    doubled = client.get(f"{back}&state=again")
    assert doubled.status_code == 400
    assert client.get(back).headers["Location"] == "/after"  # still this browser's, once


# -- 38: a back-channel logout token is accepted only as section 2.6 says, once by any process ---


@pytest.mark.parametrize("case", OIDF_REFUSED)
def test_s38_the_openid_foundations_seven_refused_logout_tokens(
    make_app: MakeApp,
    fault_server: FaultServer,
    rsa_key: Any,
    ec_key: Any,
    tmp_path: Any,
    case: str,
) -> None:
    fake = FakeOpenIDProvider(fault_server, rsa_key, ec_key, userinfo=False)
    app = backchannel_app(make_app, fault_server, f"sqlite:///{tmp_path / 's.sqlite3'}")
    browser = app.test_client()
    sign_in_fake(browser, fake, rsa_key)
    token, _ = refused_tokens(fake, rsa_key, ec_key)[case]
    answer = app.test_client().post(BACKCHANNEL_PATH, data={"logout_token": token})
    assert answer.status_code == 400
    assert answer.get_json()["error"] == "invalid_request"
    assert browser.get("/me").json == {"identities": {"fake": "user-1"}}


def test_s38_a_good_token_replayed_to_a_second_instance_is_refused(
    make_app: MakeApp, fault_server: FaultServer, rsa_key: Any, tmp_path: Any
) -> None:
    fake = FakeOpenIDProvider(fault_server, rsa_key, userinfo=False)
    store = f"sqlite:///{tmp_path / 'shared.sqlite3'}"
    first, second = (backchannel_app(make_app, fault_server, store) for _ in range(2))
    browser = first.test_client()
    sign_in_fake(browser, fake, rsa_key)
    token = signed(rsa_key, "RS256", logout_claims(fake))
    assert (
        first.test_client().post(BACKCHANNEL_PATH, data={"logout_token": token}).status_code == 200
    )
    assert browser.get("/me").json == {"identities": {}}
    again = second.test_client()
    sign_in_fake(again, fake, rsa_key)  # a new session of the same sid, served by the second
    replayed = second.test_client().post(BACKCHANNEL_PATH, data={"logout_token": token})
    assert replayed.status_code == 400
    assert "used already" in replayed.get_json()["error_description"]
    assert again.get("/me").json == {"identities": {"fake": "user-1"}}


# -- 39: a session the provider ended is ended in every process; a foreign iss ends nothing ------


def test_s39_a_logout_delivered_to_one_instance_ends_the_session_another_serves(
    make_app: MakeApp, fault_server: FaultServer, rsa_key: Any, tmp_path: Any
) -> None:
    fake = FakeOpenIDProvider(fault_server, rsa_key, userinfo=False)
    store = f"sqlite:///{tmp_path / 'shared.sqlite3'}"
    both = {"backchannelLogout": "false", "frontchannelLogout": "true"}
    first, second = (backchannel_app(make_app, fault_server, store, **both) for _ in range(2))
    browser = first.test_client()
    sign_in_fake(browser, fake, rsa_key)
    cookie = browser.get_cookie("session")
    assert cookie is not None
    elsewhere = second.test_client()  # the same browser, served by the other instance
    elsewhere.set_cookie("session", cookie.value, domain="localhost")
    assert elsewhere.get("/me").json == {"identities": {"fake": "user-1"}}
    path = "/authenticate/fake/frontchannel-logout"
    foreign = first.test_client().get(
        path, query_string={"iss": "https://evil.example", "sid": "sid-1"}
    )
    assert foreign.status_code == 400
    assert elsewhere.get("/me").json == {"identities": {"fake": "user-1"}}
    ended = first.test_client().get(path, query_string={"iss": fake.issuer, "sid": "sid-1"})
    assert ended.status_code == 200
    assert elsewhere.get("/me").json == {"identities": {}}
