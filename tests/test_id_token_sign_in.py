"""Sign-in with an ID token the browser posts (Google Identity Services: the button, One Tap,
FedCM), through the real route.

The issuer is :class:`~helpers.LocalGoogle`: a discovery document and key set on loopback, and
ID tokens shaped like Google's. The tests POST the form Google's script posts: ``credential``
and the ``g_csrf_token`` double-submit pair.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import time
from typing import Any

import pytest
from fault_server import Behaviour, FaultServer
from flask import Flask
from helpers import (
    CLIENT_ID,
    CLIENT_SECRET,
    WELL_KNOWN,
    LocalGoogle,
    MakeApp,
    assert_not_logged,
    one_tap_app,
    one_tap_block,
    post_credential,
    signed,
    valid_block,
    watch,
)
from joserfc.jwk import RSAKey

from flask_social_oauth2 import SocialOAuth2
from flask_social_oauth2.errors import (
    AccessDeniedError,
    ConfigurationError,
    IdTokenError,
    InvalidCallbackError,
    SocialOAuth2Error,
    StateError,
)
from flask_social_oauth2.web import id_token_sign_in
from flask_social_oauth2.web.id_token_sign_in import IssuedNonce, NonceCookie


@pytest.fixture
def google(fault_server: FaultServer, rsa_key: RSAKey) -> LocalGoogle:
    return LocalGoogle(fault_server, rsa_key)


@pytest.fixture
def app(make_app: MakeApp, google: LocalGoogle) -> Flask:
    return one_tap_app(make_app, google)


def nonce_for(client: Any, next_url: str | None = None) -> str:
    answer = client.get("/nonce", query_string={"next": next_url} if next_url else {})
    assert answer.status_code == 200
    return str(answer.text)


def _segment(part: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(part).encode()).rstrip(b"=").decode()


# -- configuration -------------------------------------------------------------------------------


def _github_block(**custom: str) -> dict[str, Any]:
    return valid_block(redirectURL="/authenticate/github", customProperties=custom)


@pytest.mark.parametrize(
    ("name", "block", "key", "message"),
    [
        (
            "google",
            one_tap_block("https://accounts.google.com", idTokenSignIn="yes"),
            "customProperties.idTokenSignIn",
            "true or false",
        ),
        (
            "google",
            one_tap_block("https://accounts.google.com", hostedDomains=" "),
            "customProperties.hostedDomains",
            "at least one",
        ),
        (
            "google",
            one_tap_block(
                "https://accounts.google.com", idTokenSignIn="false", hostedDomains="a.test"
            ),
            "customProperties.hostedDomains",
            "ID-token sign-in only",
        ),
        (
            "github",
            _github_block(idTokenSignIn="true"),
            "customProperties.idTokenSignIn",
            "OpenID Connect",
        ),
    ],
)
def test_the_properties_are_checked_at_setup(
    make_app: MakeApp, name: str, block: dict[str, Any], key: str, message: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        make_app({name: block})
    assert (name, key) in [(p.provider, p.key) for p in raised.value.problems]
    assert message in str(raised.value)


def test_a_nonce_needs_a_block_that_takes_id_tokens(make_app: MakeApp) -> None:
    app = make_app({"example": valid_block()})
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension
    with app.test_request_context(), pytest.raises(SocialOAuth2Error, match="idTokenSignIn"):
        social.id_token_nonce("example")


# -- the sign-in ---------------------------------------------------------------------------------


def test_a_posted_id_token_signs_in_from_its_claims_and_keeps_no_token(
    app: Flask, google: LocalGoogle, fault_server: FaultServer
) -> None:
    outcome = watch(app)
    client = app.test_client()
    credential = google.credential(nonce_for(client), name="Ada Lovelace")
    answer = post_credential(client, credential)
    assert answer.status_code == 302, answer.text
    (info,) = outcome.infos
    assert info.access_token == ""
    assert info.params["id_token"] == credential
    assert info.id_token_claims is not None
    assert info.id_token_claims["hd"] == "example.test"
    (profile,) = outcome.profiles
    assert (profile.provider_id, profile.provider_key) == ("google", "user-1")
    assert (profile.email, profile.email_verified, profile.full_name) == (
        "ada@example.test",
        True,
        "Ada Lovelace",
    )
    assert profile.avatar_url == "https://lh3.googleusercontent.com/a/ada"
    # nothing kept: no API for this identity, and no token sent anywhere
    assert client.get("/api").text == "SignInRequiredError"
    assert [r.path for r in fault_server.requests] == [WELL_KNOWN, "/jwks"]
    with client.session_transaction() as session:
        assert "social_oauth2_identities" not in session
        assert not any("token" in key for key in session)


def test_the_default_handler_keeps_the_profile_and_goes_to_next(
    make_app: MakeApp, google: LocalGoogle
) -> None:
    app = one_tap_app(make_app, google)
    client = app.test_client()
    answer = post_credential(client, google.credential(nonce_for(client, "/account?tab=1")))
    assert answer.status_code == 302
    assert answer.headers["Location"] == "/account?tab=1"
    with client.session_transaction() as session:
        assert session["social_profile"]["email"] == "ada@example.test"


def test_a_foreign_next_is_dropped(app: Flask, google: LocalGoogle) -> None:
    client = app.test_client()
    answer = post_credential(client, google.credential(nonce_for(client, "//evil.example/")))
    assert answer.headers["Location"] == "/"


def test_an_earlier_code_flow_identity_stops_serving_the_api(
    app: Flask, google: LocalGoogle
) -> None:
    client = app.test_client()
    with client.session_transaction() as session:
        session["social_oauth2_identities"] = {"google": "someone-else"}
    assert post_credential(client, google.credential(nonce_for(client))).status_code == 302
    assert client.get("/api").text == "SignInRequiredError"


def test_googles_short_issuer_is_accepted_as_in_the_code_flow(
    make_app: MakeApp, google: LocalGoogle
) -> None:
    app = one_tap_app(make_app, google)
    client = app.test_client()
    credential = google.credential(nonce_for(client), iss="accounts.google.com")
    assert post_credential(client, credential).status_code == 302


def test_an_allowed_hosted_domain_signs_in(make_app: MakeApp, google: LocalGoogle) -> None:
    app = one_tap_app(make_app, google, hostedDomains="other.test Example.TEST")
    client = app.test_client()
    assert post_credential(client, google.credential(nonce_for(client))).status_code == 302


def test_a_credential_post_from_another_site_is_not_a_start(
    app: Flask, google: LocalGoogle
) -> None:
    """Google's script posts from the app's own page; whatever the browser marks it, a POST
    with ``credential`` is an ID token, never a sign-in start to confirm."""
    client = app.test_client()
    client.set_cookie("g_csrf_token", "pair")
    answer = client.post(
        "/authenticate/google",
        data={"credential": google.credential(nonce_for(client)), "g_csrf_token": "pair"},
        headers={"Sec-Fetch-Site": "cross-site"},
    )
    assert answer.status_code == 302
    assert answer.headers["Location"] == "/"


def test_the_start_confirmation_still_works_on_a_one_tap_block(app: Flask) -> None:
    client = app.test_client()
    page = client.get("/authenticate/google", headers={"Sec-Fetch-Site": "cross-site"})
    assert page.status_code == 200
    assert "Continue to" in page.text
    forged = client.post("/authenticate/google", data={"start_token": "forged"})
    assert forged.status_code == 403


# -- the nonce -----------------------------------------------------------------------------------


def test_the_nonce_is_reused_while_fresh_and_its_page_is_never_cached(app: Flask) -> None:
    client = app.test_client()
    first = client.get("/nonce")
    cookie = first.headers["Set-Cookie"]
    assert cookie.startswith("social_oauth2_state_")
    assert "_nonce=" in cookie
    assert "HttpOnly" in cookie
    assert "SameSite=Lax" in cookie
    assert "Max-Age=600" in cookie
    assert first.headers["Cache-Control"] == "no-store"
    assert "Cookie" in first.headers["Vary"]
    second = client.get("/nonce")
    assert second.text == first.text
    assert "Set-Cookie" not in second.headers
    assert second.headers["Cache-Control"] == "no-store"
    assert client.get("/nonce", query_string={"next": "/elsewhere"}).text != first.text


def test_the_nonce_cookie_is_host_prefixed_on_https(app: Flask) -> None:
    client = app.test_client()
    answer = client.get("/nonce", base_url="https://localhost")
    cookie = answer.headers["Set-Cookie"]
    assert cookie.startswith("__Host-social_oauth2_state_")
    assert "Secure" in cookie
    assert "Path=/" in cookie


def test_a_spent_nonce_gives_way_to_a_new_one(app: Flask, google: LocalGoogle) -> None:
    client = app.test_client()
    spent = nonce_for(client)
    assert post_credential(client, google.credential(spent)).status_code == 302
    assert nonce_for(client) != spent


def test_a_nonce_expires_with_the_state_ttl(
    app: Flask, google: LocalGoogle, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcome = watch(app)
    client = app.test_client()
    credential = google.credential(nonce_for(client), exp=int(time.time()) + 7200)
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 601)
    assert post_credential(client, credential).status_code == 400
    assert isinstance(outcome.error, StateError)


def test_a_credential_expires_on_the_clock_of_each_sign_in(
    app: Flask, google: LocalGoogle, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The claims checks are made once per leeway and shared: "now" must be read per sign-in.
    first = app.test_client()
    assert post_credential(first, google.credential(nonce_for(first))).status_code == 302
    outcome = watch(app)
    client = app.test_client()
    now = int(time.time())
    credential = google.credential(nonce_for(client), iat=now, exp=now + 120)
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 300)
    assert post_credential(client, credential).status_code == 400
    assert isinstance(outcome.error, IdTokenError)
    assert "expired" in str(outcome.error)


def test_at_most_eight_nonces_are_kept(app: Flask) -> None:
    client = app.test_client()
    nonces = [nonce_for(client, f"/page-{index}") for index in range(10)]
    with app.test_request_context(headers={"Cookie": _cookie_header(client)}):
        kept = NonceCookie(app.extensions["social_oauth2"].state_cookies).load()
    assert [entry.nonce for entry in kept] == nonces[2:]


def _cookie_header(client: Any) -> str:
    return "; ".join(f"{c.key}={c.value}" for c in client._cookies.values())


def test_the_nonce_is_not_shown_in_reprs() -> None:
    entry = IssuedNonce("google", "the-secret-nonce", 1, "/next")
    assert "the-secret-nonce" not in repr(entry)
    assert IssuedNonce.from_list(["google", "n", True, None]) is None
    assert IssuedNonce.from_list(["google", "n", 1]) is None


def test_one_tap_gives_what_googles_markup_needs(app: Flask) -> None:
    runtime = app.extensions["social_oauth2"]
    with app.test_request_context(base_url="https://localhost"):
        found = id_token_sign_in.one_tap(runtime.providers["google"], runtime, "/account")
    assert found.client_id == CLIENT_ID
    assert found.login_uri == "https://localhost/authenticate/google"
    assert found.data_attributes() == {
        "data-client_id": CLIENT_ID,
        "data-login_uri": "https://localhost/authenticate/google",
        "data-nonce": found.nonce,
        "data-use_fedcm_for_prompt": "true",
    }


# -- bad input -----------------------------------------------------------------------------------


def _hmac_signed(key: RSAKey, claims: dict[str, Any]) -> str:
    signing_input = ".".join(_segment(p) for p in ({"alg": "HS256", "kid": "rsa-1"}, claims))
    mac = hmac.new(key.as_pem(private=False), signing_input.encode(), hashlib.sha256)
    return f"{signing_input}.{base64.urlsafe_b64encode(mac.digest()).rstrip(b'=').decode()}"


def _bad_credential(kind: str, google: LocalGoogle, nonce: str) -> str:
    if kind == "not-a-jwt":
        return "not-a-jwt"
    if kind == "oversized":
        return google.credential(nonce, padding="x" * 20_000)
    if kind == "unsigned":
        claims = google.claims(nonce=nonce, azp=CLIENT_ID)
        return f"{_segment({'alg': 'none', 'kid': 'rsa-1'})}.{_segment(claims)}."
    if kind == "hmac":
        return _hmac_signed(google.key, google.claims(nonce=nonce))
    if kind == "another-key":
        stranger = RSAKey.generate_key(2048, parameters={"kid": "rsa-1"})
        return signed(stranger, "RS256", google.claims(nonce=nonce))
    if kind == "another-client":
        return google.credential(nonce, aud="another-client", azp="another-client")
    if kind == "another-issuer":
        return google.credential(nonce, iss="https://issuer.example")
    if kind == "expired":
        now = int(time.time())
        return google.credential(nonce, iat=now - 7200, exp=now - 3600)
    if kind == "issued-in-the-future":
        return google.credential(nonce, iat=int(time.time()) + 3600)
    if kind == "nonce-not-issued":
        return google.credential("a-nonce-this-browser-never-saw")
    if kind == "no-nonce":
        return google.credential(None)
    raise AssertionError(kind)


BAD_CREDENTIALS = {
    "not-a-jwt": IdTokenError,
    "oversized": InvalidCallbackError,
    "unsigned": IdTokenError,
    "hmac": IdTokenError,
    "another-key": IdTokenError,
    "another-client": IdTokenError,
    "another-issuer": IdTokenError,
    "expired": IdTokenError,
    "issued-in-the-future": IdTokenError,
    "nonce-not-issued": StateError,
    "no-nonce": StateError,
}


@pytest.mark.parametrize("kind", sorted(BAD_CREDENTIALS))
def test_a_bad_credential_is_a_400_and_nobody_signs_in(
    app: Flask,
    google: LocalGoogle,
    kind: str,
    captured_logs: list[logging.LogRecord],
) -> None:
    outcome = watch(app)
    client = app.test_client()
    credential = _bad_credential(kind, google, nonce_for(client))
    answer = post_credential(client, credential)
    assert answer.status_code == 400, answer.text
    assert outcome.infos == []
    assert isinstance(outcome.error, BAD_CREDENTIALS[kind])
    assert "<html" in answer.text.lower()
    assert credential not in answer.text
    assert_not_logged(captured_logs, [credential])
    with client.session_transaction() as session:
        assert "social_profile" not in session


def test_a_replayed_credential_is_a_400(app: Flask, google: LocalGoogle) -> None:
    outcome = watch(app)
    client = app.test_client()
    credential = google.credential(nonce_for(client))
    assert post_credential(client, credential).status_code == 302
    assert post_credential(client, credential).status_code == 400
    assert len(outcome.infos) == 1
    assert isinstance(outcome.error, StateError)


def test_a_nonce_issued_to_another_browser_is_a_400(app: Flask, google: LocalGoogle) -> None:
    outcome = watch(app)
    other_browser = app.test_client()
    credential = google.credential(nonce_for(other_browser))
    client = app.test_client()
    nonce_for(client)  # this browser has a nonce, but another one
    assert post_credential(client, credential).status_code == 400
    assert outcome.infos == []
    # and the browser it was issued to can still use it
    assert post_credential(other_browser, credential).status_code == 302


@pytest.mark.parametrize(
    ("field", "cookie"),
    [
        (None, "pair"),
        ("pair", None),
        ("pair", "other"),
        ("", ""),
        ("p" * 600, "p" * 600),
    ],
    ids=["no-field", "no-cookie", "mismatched", "empty", "oversized"],
)
def test_a_missing_or_mismatched_csrf_pair_is_a_400_before_anything_is_verified(
    app: Flask,
    google: LocalGoogle,
    fault_server: FaultServer,
    field: str | None,
    cookie: str | None,
) -> None:
    outcome = watch(app)
    client = app.test_client()
    credential = google.credential(nonce_for(client))
    answer = post_credential(client, credential, field=field, cookie=cookie)
    assert answer.status_code == 400
    assert isinstance(outcome.error, InvalidCallbackError)
    assert fault_server.requests == []  # not even the key set was fetched
    # the nonce was not spent: the real pair still signs in
    assert post_credential(client, credential).status_code == 302


def test_a_repeated_field_is_a_400(app: Flask, google: LocalGoogle) -> None:
    client = app.test_client()
    credential = google.credential(nonce_for(client))
    client.set_cookie("g_csrf_token", "pair")
    answer = client.post(
        "/authenticate/google",
        data={"credential": [credential, credential], "g_csrf_token": "pair"},
    )
    assert answer.status_code == 400


def test_an_empty_credential_is_a_400(app: Flask) -> None:
    assert post_credential(app.test_client(), "").status_code == 400


@pytest.mark.parametrize("hd", ["evil.test", None])
def test_a_foreign_or_missing_hosted_domain_is_a_403(
    make_app: MakeApp, google: LocalGoogle, hd: str | None
) -> None:
    app = one_tap_app(make_app, google, hostedDomains="example.test")
    outcome = watch(app)
    client = app.test_client()
    credential = google.credential(nonce_for(client), hd=hd)
    assert post_credential(client, credential).status_code == 403
    assert isinstance(outcome.error, AccessDeniedError)
    assert outcome.infos == []
    # the nonce is spent all the same
    assert post_credential(client, credential).status_code == 400


def test_an_unreachable_key_set_is_a_502_never_a_500(
    app: Flask, google: LocalGoogle, fault_server: FaultServer
) -> None:
    fault_server.set("/jwks", Behaviour.json({"error": "down"}, status=503))
    client = app.test_client()
    assert post_credential(client, google.credential(nonce_for(client))).status_code == 502


def test_a_post_that_is_not_a_form_is_not_an_id_token(app: Flask) -> None:
    client = app.test_client()
    answer = client.post("/authenticate/google", json={"credential": "x"})
    assert answer.status_code == 405  # a block with authorizationURL takes no posted code


@pytest.mark.parametrize(
    ("custom", "changes", "status"),
    [
        ({}, {}, 405),
        ({"responseMode": "form_post"}, {}, 400),
        ({}, {"authorizationURL": None}, 415),
    ],
    ids=["code-flow", "form-post", "client-side"],
)
def test_a_post_to_a_block_without_id_token_sign_in_is_a_4xx(
    make_app: MakeApp,
    google: LocalGoogle,
    custom: dict[str, str],
    changes: dict[str, Any],
    status: int,
) -> None:
    block = valid_block(redirectURL="/authenticate/google", customProperties=custom, **changes)
    block = {key: value for key, value in block.items() if value is not None}
    app = make_app({"google": block})
    outcome = watch(app)
    client = app.test_client()
    answer = post_credential(client, google.credential("any"))
    assert answer.status_code == status
    assert outcome.infos == []


def test_the_secret_of_the_block_never_reaches_the_page_or_log(
    app: Flask, google: LocalGoogle, captured_logs: list[logging.LogRecord]
) -> None:
    client = app.test_client()
    credential = google.credential(nonce_for(client))
    answer = post_credential(client, credential)
    assert answer.status_code == 302
    assert_not_logged(captured_logs, [credential, CLIENT_SECRET])


@pytest.mark.parametrize("credential", ["not-a-jwt", "a.b", "a.b.c.d", "....."])
def test_a_credential_that_is_no_jws_is_refused_before_any_fetch(
    app: Flask, fault_server: FaultServer, credential: str
) -> None:
    client = app.test_client()
    nonce_for(client)
    assert post_credential(client, credential).status_code == 400
    assert fault_server.requests == []


def test_a_nonce_needs_the_secret_key(make_app: MakeApp, google: LocalGoogle) -> None:
    app = one_tap_app(make_app, google)
    app.secret_key = None
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension
    with app.test_request_context(), pytest.raises(SocialOAuth2Error, match="SECRET_KEY"):
        social.id_token_nonce("google")


def test_a_megabyte_credential_is_capped(app: Flask, fault_server: FaultServer) -> None:
    outcome = watch(app)
    client = app.test_client()
    client.set_cookie("g_csrf_token", "pair")
    answer = client.post(
        "/authenticate/google", data={"credential": "x" * 1_000_000, "g_csrf_token": "pair"}
    )
    # refused by the credential's own cap (400), or, with the oldest Werkzeug the package
    # supports, already by Werkzeug's cap on a form field (413): never read, never a 500
    assert answer.status_code in (400, 413), answer.status_code
    if answer.status_code == 400:
        assert isinstance(outcome.error, InvalidCallbackError)
    assert outcome.infos == []
    assert fault_server.requests == []
