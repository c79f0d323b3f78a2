"""Sign in with Apple against the local Apple-like server on loopback: the form-post callback
and its same-origin hop, the ES256 client-secret JWT, the ID token and the first-sign-in name.

The real Chromium proof (provider on another site, state cookie Lax) is test_apple_browser.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from fault_server import Behaviour, FaultServer
from flask import Flask
from helpers import MakeApp, PageForm, parse_form, watch
from joserfc import jwt

from flask_social_oauth2.errors import ConfigurationError, IdTokenError, UnexpectedResponseError
from flask_social_oauth2.local_idp import LocalUser, ManualClock
from flask_social_oauth2.local_idp.apple import LocalAppleProvider
from flask_social_oauth2.providers import apple_secret
from flask_social_oauth2.providers.apple import first_sign_in_name
from flask_social_oauth2.web.form_post import HOP_FIELD, FormPost, read_form_post

SERVICES_ID = "com.example.web"
CALLBACK = "http://localhost/authenticate/apple"
ADA = LocalUser.from_name_email("Ada Lovelace", "x7k2p9@privaterelay.appleid.com")


@pytest.fixture
def apple() -> Iterator[LocalAppleProvider]:
    with LocalAppleProvider() as server:
        server.register_client(SERVICES_ID, [CALLBACK])
        server.auto_approve = ADA
        yield server


@pytest.fixture
def apple_app(make_app: MakeApp, apple: LocalAppleProvider) -> Flask:
    return make_app({"apple": apple.settings_block(SERVICES_ID, "/authenticate/apple")})


@pytest.fixture(autouse=True)
def _fresh_secrets() -> Iterator[None]:
    apple_secret.SECRETS.clear()
    yield
    apple_secret.SECRETS.clear()


def provider_form(client: Any) -> dict[str, str]:
    """Start a sign-in and let the Apple server answer: the fields its page would POST."""
    started = client.get("/authenticate/apple")
    assert started.status_code == 302
    page = requests.get(started.headers["Location"], timeout=10)
    assert page.status_code == 200, page.text
    form = parse_form(page.text)
    assert form.action == CALLBACK
    return form.fields


def hop(client: Any, fields: dict[str, str], **headers: str) -> PageForm:
    """POST the provider's fields as its page would; the app answers with the hop page."""
    answer = client.post("/authenticate/apple", data=fields, headers=headers)
    assert answer.status_code == 200, answer.text
    return parse_form(answer.text)


def apple_sign_in(client: Any) -> Any:
    """A whole sign-in: start, the provider's form post, the hop; the final answer."""
    hopped = hop(client, provider_form(client))
    return client.post("/authenticate/apple", data=hopped.fields)


def test_sign_in_carries_the_name_the_first_time_only(
    apple_app: Flask, apple: LocalAppleProvider
) -> None:
    outcome = watch(apple_app)
    with apple_app.test_client() as client:
        first = apple_sign_in(client)
        second = apple_sign_in(client)
    assert first.status_code == second.status_code == 302
    assert "user" in apple.posted_forms[0]
    assert "user" not in apple.posted_forms[1]
    one, two = outcome.profiles
    assert (one.first_name, one.last_name, one.full_name) == ("Ada", "Lovelace", "Ada Lovelace")
    assert (two.first_name, two.last_name, two.full_name) == (None, None, None)
    for profile in (one, two):
        assert profile.provider_id == "apple"
        assert profile.provider_key == ADA.sub
        assert profile.email == ADA.email
        assert profile.email_verified is True  # Apple's string "true"
        assert profile.raw["is_private_email"] == "true"
        assert profile.username is None
        assert profile.avatar_url is None


def test_without_a_handler_the_form_post_ends_like_a_get(
    apple_app: Flask, apple: LocalAppleProvider
) -> None:
    with apple_app.test_client() as client:
        started = client.get("/authenticate/apple?next=/account")
        fields = parse_form(requests.get(started.headers["Location"], timeout=10).text).fields
        done = client.post("/authenticate/apple", data=hop(client, fields).fields)
        assert done.status_code == 302
        assert done.headers["Location"] == "/account"
        assert done.mimetype != "application/json"
        with client.session_transaction() as session:
            assert session["social_profile"]["first_name"] == "Ada"


def test_authorization_request_is_apples(apple_app: Flask, apple: LocalAppleProvider) -> None:
    with apple_app.test_client() as client:
        provider_form(client)
    query = apple.authorization_requests[0]
    assert query["response_mode"] == "form_post"
    assert query["scope"] == "name email"
    assert query["code_challenge_method"] == "S256"
    assert query["code_challenge"]
    assert query["nonce"]
    assert query["client_id"] == SERVICES_ID


def test_client_secret_is_an_es256_jwt_for_apple(
    apple_app: Flask, apple: LocalAppleProvider
) -> None:
    with apple_app.test_client() as client:
        assert apple_sign_in(client).status_code == 302
    (checked,) = apple.checked_secrets
    assert checked.problem is None
    assert checked.header["alg"] == "ES256"
    assert checked.header["kid"] == apple.key_id
    claims = checked.claims
    assert claims["iss"] == apple.team_id
    assert claims["sub"] == SERVICES_ID
    assert claims["aud"] == apple.issuer
    assert 0 < claims["exp"] - claims["iat"] <= 3600
    assert checked.secret not in apple_app.extensions["social_oauth2"].providers["apple"].__repr__()


def test_client_secret_is_kept_until_near_expiry(
    apple_app: Flask, apple: LocalAppleProvider
) -> None:
    with apple_app.test_client() as client:
        apple_sign_in(client)
        apple_sign_in(client)
    first, second = apple.checked_secrets
    assert first.secret == second.secret

    now = [1_700_000_000.0]
    cache = apple_secret.ClientSecretCache(clock=lambda: now[0])
    claims = apple_secret.SecretClaims("TEAM123456", "KEY1234567", SERVICES_ID, apple.issuer)
    made = cache.secret(claims, apple.private_key_pem)
    now[0] += apple_secret.SECRET_LIFETIME - apple_secret.RENEW_BEFORE - 1
    assert cache.secret(claims, apple.private_key_pem) == made
    now[0] += 2
    renewed = cache.secret(claims, apple.private_key_pem)
    assert renewed != made
    decoded = jwt.decode(renewed, apple_secret.load_private_key(apple.private_key_pem))
    assert decoded.claims["iat"] == int(now[0])
    assert decoded.claims["exp"] == int(now[0]) + apple_secret.SECRET_LIFETIME
    other = apple_secret.SecretClaims("TEAM123456", "KEY1234567", "com.example.other", "x")
    assert cache.secret(other, apple.private_key_pem) != renewed


def test_a_wrong_client_secret_is_refused_by_the_server(
    make_app: MakeApp, apple: LocalAppleProvider
) -> None:
    block = apple.settings_block(SERVICES_ID, "/authenticate/apple")
    block["customProperties"]["teamID"] = "OTHERTEAM1"
    app = make_app({"apple": block})
    outcome = watch(app)
    with app.test_client() as client:
        answer = apple_sign_in(client)
    assert answer.status_code == 502
    assert apple.checked_secrets[0].problem == "iss is not the team id"
    assert "invalid_client" in str(outcome.error)


@pytest.mark.parametrize(
    ("flags", "expected"),
    [(True, (True, "false")), (False, (True, False))],
    ids=["strings", "booleans"],
)
def test_flags_as_strings_or_booleans(
    make_app: MakeApp, apple: LocalAppleProvider, flags: bool, expected: tuple[Any, Any]
) -> None:
    apple.string_booleans = flags
    apple.auto_approve = LocalUser.from_name_email("Grace Hopper", "grace@example.test")
    app = make_app({"apple": apple.settings_block(SERVICES_ID, "/authenticate/apple")})
    outcome = watch(app)
    with app.test_client() as client:
        apple_sign_in(client)
    (profile,) = outcome.profiles
    assert (profile.email_verified, profile.raw["is_private_email"]) == expected


@pytest.mark.parametrize(
    ("claim", "value", "check"),
    [
        ("aud", "com.example.someone-else", "aud"),
        ("iss", "https://appleid.example", "iss"),
        ("nonce", "not-this-flows-nonce", "nonce"),
    ],
)
def test_a_wrong_id_token_is_refused(
    apple_app: Flask, apple: LocalAppleProvider, claim: str, value: str, check: str
) -> None:
    def tamper(header: dict[str, Any], claims: dict[str, Any]) -> tuple[Any, Any]:
        return header, {**claims, claim: value}

    apple.keys.tamper = tamper
    outcome = watch(apple_app)
    with apple_app.test_client() as client:
        answer = apple_sign_in(client)
    assert answer.status_code == 502
    assert isinstance(outcome.error, IdTokenError)
    assert check in str(outcome.error)
    assert outcome.profiles == []


def test_the_hop_page(apple_app: Flask, apple: LocalAppleProvider) -> None:
    with apple_app.test_client() as client:
        fields = provider_form(client)
        answer = client.post("/authenticate/apple", data=fields)
    headers = answer.headers
    policy = headers["Content-Security-Policy"]
    nonce = re.search(r"script-src 'nonce-([A-Za-z0-9_-]{20,})'", policy)
    assert nonce is not None
    page = parse_form(answer.text)
    assert page.script_nonces == [nonce.group(1)]
    assert "form-action 'self'" in policy
    assert "default-src 'none'" in policy
    assert "frame-ancestors 'none'" in policy
    assert "base-uri 'none'" in policy
    assert headers["Cache-Control"] == "no-store"
    assert headers["Referrer-Policy"] == "no-referrer"
    assert headers["X-Frame-Options"] == "DENY"
    assert page.action == "/authenticate/apple"
    assert page.fields == {**fields, HOP_FIELD: "1"}  # the user JSON too, in a POST body
    assert json.loads(page.fields["user"])["name"]["firstName"] == "Ada"
    assert fields["code"] not in str(answer.headers)
    with apple_app.test_client() as client:  # a new nonce each time
        again = client.post("/authenticate/apple", data=fields)
    assert again.headers["Content-Security-Policy"] != policy


def test_a_hop_without_the_state_cookie_is_refused(
    apple_app: Flask, apple: LocalAppleProvider
) -> None:
    outcome = watch(apple_app)
    with apple_app.test_client() as client:
        fields = provider_form(client)
    with apple_app.test_client() as stranger:  # no state cookie: another browser, or expired
        hopped = hop(stranger, fields)
        answer = stranger.post("/authenticate/apple", data=hopped.fields)
    assert answer.status_code == 400
    assert "invalid or has expired" in answer.text
    assert type(outcome.error).__name__ == "StateError"
    assert apple.checked_secrets == []  # nothing was sent to the token endpoint


def test_a_same_origin_hop_with_origin_null_is_accepted(
    apple_app: Flask, apple: LocalAppleProvider
) -> None:
    outcome = watch(apple_app)
    with apple_app.test_client() as client:
        hopped = hop(client, provider_form(client))
        answer = client.post("/authenticate/apple", data=hopped.fields, headers={"Origin": "null"})
    assert answer.status_code == 302
    assert len(outcome.profiles) == 1


def test_a_cancelled_sign_in_is_access_denied(apple_app: Flask) -> None:
    outcome = watch(apple_app)
    with apple_app.test_client() as client:
        client.get("/authenticate/apple")
        hopped = hop(client, {"error": "user_cancelled_authorize", "state": "whatever"})
        answer = client.post("/authenticate/apple", data=hopped.fields)
    assert answer.status_code == 403
    assert type(outcome.error).__name__ == "AccessDeniedError"


@pytest.mark.parametrize(
    ("data", "content_type", "status"),
    [
        ('{"code": "c", "code_verifier": "v"}', "application/json", 415),
        ("code=a&code=b&state=s", "application/x-www-form-urlencoded", 400),
        ("user=" + "x" * 5000 + "&state=s", "application/x-www-form-urlencoded", 400),
        ("code=" + "c" * 2049 + "&state=s", "application/x-www-form-urlencoded", 400),
        ("other=1", "application/x-www-form-urlencoded", 400),
    ],
    ids=["json", "repeated", "oversized-user", "oversized-code", "no-fields"],
)
def test_bad_form_posts_are_refused(
    apple_app: Flask, data: str, content_type: str, status: int
) -> None:
    with apple_app.test_client() as client:
        answer = client.post("/authenticate/apple", data=data, content_type=content_type)
    assert answer.status_code == status
    assert "Sign-in failed" in answer.text


def test_a_form_post_reads_each_field_once_with_the_user_field_allowed_more_length(
    apple_app: Flask,
) -> None:
    user = json.dumps({"name": {"firstName": "A" * 3000}})  # over the 2,048 of the others
    fields = {"user": user, "state": "s", "code": "c", HOP_FIELD: "1", "iss": "", "other": "x"}
    with apple_app.test_request_context("/authenticate/apple", method="POST", data=fields):
        received = read_form_post("apple")
    assert received == FormPost(state="s", code="c", error=None, iss=None, user=user, hopped=True)
    with apple_app.test_request_context("/authenticate/apple", method="POST", data={"state": "s"}):
        assert read_form_post("apple") == FormPost(
            state="s", code="", error=None, iss=None, user=None, hopped=False
        )


def test_the_unsigned_user_json_gives_the_name_only(
    apple_app: Flask, apple: LocalAppleProvider
) -> None:
    outcome = watch(apple_app)
    with apple_app.test_client() as client:
        fields = provider_form(client)
        forged = {"name": {"firstName": "Eve"}, "email": "eve@attacker.example"}
        fields["user"] = json.dumps(forged)
        hopped = hop(client, fields)
        client.post("/authenticate/apple", data=hopped.fields)
    (profile,) = outcome.profiles
    assert profile.first_name == "Eve"
    assert profile.email == ADA.email  # from the signed ID token


@pytest.mark.parametrize(
    ("user", "expected"),
    [
        (
            '{"name": {"firstName": " Ada ", "lastName": "Lovelace"}}',
            {"firstName": "Ada", "lastName": "Lovelace"},
        ),
        ('{"name": {"firstName": 3, "lastName": ""}}', {}),
        ('{"name": "Ada"}', {}),
        ("[1, 2]", {}),
        ("not json", {}),
        ("[" * 5000 + "]" * 5000, {}),
        (None, {}),
    ],
)
def test_first_sign_in_name(user: str | None, expected: dict[str, str]) -> None:
    assert first_sign_in_name(user) == expected


def test_configuration_problems_name_the_key_never_the_value(
    make_app: MakeApp, apple: LocalAppleProvider
) -> None:
    block = apple.settings_block(SERVICES_ID, "/authenticate/apple")
    secret = "-----BEGIN PRIVATE KEY-----\nnot-really-a-key-value\n-----END PRIVATE KEY-----"
    block["clientSecret"] = secret
    del block["customProperties"]["keyID"]
    block["customProperties"]["teamID"] = "team"
    with pytest.raises(ConfigurationError) as raised:
        make_app({"apple": block})
    message = str(raised.value)
    assert "apple" in message
    assert "clientSecret" in message
    assert "customProperties.keyID" in message
    assert "customProperties.teamID" in message
    assert "not-really-a-key-value" not in message


def test_a_public_key_or_another_curve_is_refused(apple: LocalAppleProvider) -> None:
    from joserfc.jwk import ECKey

    public = apple_secret.load_private_key(apple.private_key_pem).as_pem(private=False).decode()
    with pytest.raises(ValueError, match="public key"):
        apple_secret.load_private_key(public)
    p384 = ECKey.generate_key("P-384", private=True).as_pem(private=True).decode()
    with pytest.raises(ValueError, match="P-384"):
        apple_secret.load_private_key(p384)
    one_line = apple.private_key_pem.strip().replace("\n", "\\n")
    assert apple_secret.load_private_key(one_line).is_private


def test_the_token_request_sends_the_jwt_never_the_key(
    apple_app: Flask, apple: LocalAppleProvider, captured_logs: list[Any]
) -> None:
    with apple_app.test_client() as client:
        apple_sign_in(client)
    secret = apple.checked_secrets[0].secret
    key_body = apple.private_key_pem.splitlines()[1]
    for record in captured_logs:
        text = record.getMessage()
        assert secret not in text
        assert key_body not in text
        for token in apple.id_tokens:
            assert token not in text


def _recorded(name: str, **values: str) -> Any:
    """A recorded (reconstructed) Apple answer with its ``<PLACEHOLDER>`` values filled in."""
    text = (Path(__file__).parent / "fixtures" / "providers" / f"{name}.json").read_text("utf-8")
    for placeholder, value in values.items():
        text = text.replace(f"<{placeholder}>", value)
    return json.loads(text)


def test_the_recorded_answers_read_as_documented(
    apple_app: Flask, apple: LocalAppleProvider
) -> None:
    recorded = _recorded("apple.id_token", SERVICES_ID=SERVICES_ID, EMAIL="r@example.test")

    def as_recorded(header: dict[str, Any], claims: dict[str, Any]) -> tuple[Any, Any]:
        times = {"iat": claims["iat"], "exp": claims["exp"]}
        mine = {"iss": claims["iss"], "nonce": claims["nonce"], "sub": "001234.abcd.1234"}
        return header, {**recorded, **times, **mine}

    apple.keys.tamper = as_recorded
    outcome = watch(apple_app)
    with apple_app.test_client() as client:
        fields = provider_form(client)
        user = _recorded("apple.user", FIRST_NAME="Jane", LAST_NAME="Doe", EMAIL="u@x.test")
        fields["user"] = json.dumps(user)
        client.post("/authenticate/apple", data=hop(client, fields).fields)
    (profile,) = outcome.profiles
    assert profile.provider_key == "001234.abcd.1234"
    assert (profile.first_name, profile.last_name) == ("Jane", "Doe")
    assert profile.email == "r@example.test"
    assert profile.email_verified is True
    assert profile.raw["is_private_email"] == "true"
    assert profile.raw["real_user_status"] == 2
    (info,) = outcome.infos  # the local server answers the fields Apple's TokenResponse has
    token = _recorded("apple.token")
    assert info.token_type == token["token_type"]
    assert isinstance(info.expires_in, int)
    assert info.refresh_token
    assert isinstance(info.params["id_token"], str)


def test_refresh_sends_the_client_secret_jwt_and_keeps_the_claims(
    apple_app: Flask, apple: LocalAppleProvider
) -> None:
    outcome = watch(apple_app)
    with apple_app.test_client() as client:
        apple_sign_in(client)
    (info,) = outcome.infos
    assert info.refresh_token
    with apple_app.app_context():
        renewed = apple_app.extensions["social_oauth2"].providers["apple"].refresh(info)
    assert renewed.access_token != info.access_token
    assert renewed.refresh_token == info.refresh_token  # Apple sends no new one
    assert renewed.id_token_claims == info.id_token_claims  # nor a new ID token
    code_exchange, refresh = apple.checked_secrets
    assert refresh.problem is None
    assert refresh.secret == code_exchange.secret  # the kept client secret


def test_an_expired_code_is_apples_invalid_grant(make_app: MakeApp) -> None:
    """Apple's documented error answer (apple.error.json): a 502 naming ``invalid_grant``."""
    clock = ManualClock()
    with LocalAppleProvider(clock=clock) as slow:
        slow.register_client(SERVICES_ID, [CALLBACK])
        slow.auto_approve = ADA
        app = make_app({"apple": slow.settings_block(SERVICES_ID, "/authenticate/apple")})
        outcome = watch(app)
        with app.test_client() as client:
            fields = provider_form(client)
            clock.advance(120)  # codes live 60 s
            answer = client.post("/authenticate/apple", data=hop(client, fields).fields)
    assert answer.status_code == 502
    assert "invalid_grant" in str(outcome.error)
    assert _recorded("apple.error")["error"] in str(outcome.error)
    assert outcome.profiles == []


def test_the_local_server_enforces_pkce_and_the_client_secret(
    apple_app: Flask, apple: LocalAppleProvider
) -> None:
    with apple_app.test_client() as client:
        code = provider_form(client)["code"]
    claims = apple_secret.SecretClaims(apple.team_id, apple.key_id, SERVICES_ID, apple.issuer)
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": CALLBACK,
        "client_id": SERVICES_ID,
        "client_secret": apple_secret.SECRETS.secret(claims, apple.private_key_pem),
    }
    token_url = f"{apple.url}/auth/token"
    no_secret = requests.post(token_url, data={**form, "client_secret": "s3cret"}, timeout=10)
    assert no_secret.json()["error"] == "invalid_client"
    no_verifier = requests.post(token_url, data=form, timeout=10)
    assert no_verifier.status_code == 400
    wrong = requests.post(token_url, data={**form, "code_verifier": "w" * 43}, timeout=10)
    assert wrong.status_code == 400
    assert wrong.json()["error"] == "invalid_grant"


def test_revoke_sends_the_client_secret_jwt_to_the_issuers_endpoint(
    apple_app: Flask, apple: LocalAppleProvider
) -> None:
    outcome = watch(apple_app)
    with apple_app.test_client() as client:
        apple_sign_in(client)
    (info,) = outcome.infos
    provider = apple_app.extensions["social_oauth2"].providers["apple"]
    with apple_app.app_context():
        assert provider.revoke(info) is True
        with pytest.raises(UnexpectedResponseError, match="invalid_grant"):
            provider.refresh(info)  # the grant is gone
    assert apple.revoked == [info.refresh_token]
    revocation = apple.checked_secrets[1]
    assert revocation.problem is None
    assert revocation.secret == apple.checked_secrets[0].secret


def test_without_an_issuer_apple_revokes_at_apples_address(make_app: MakeApp) -> None:
    from flask_social_oauth2.providers import AppleProvider

    block = {
        "authorizationURL": "https://appleid.apple.com/auth/authorize",
        "accessTokenURL": "https://appleid.apple.com/auth/token",
        "redirectURL": "/authenticate/apple",
        "clientID": SERVICES_ID,
        "clientSecret": apple_secret_pem(),
        "customProperties": {"teamID": "ABCDE12345", "keyID": "FGHIJ67890"},
    }
    app = make_app({"apple": block})
    provider = app.extensions["social_oauth2"].providers["apple"]
    assert isinstance(provider, AppleProvider)
    assert provider.built_in_revocation_url() == "https://appleid.apple.com/auth/revoke"
    assert provider.issuer == "https://appleid.apple.com"


def apple_secret_pem() -> str:
    from joserfc.jwk import ECKey

    pem: bytes = ECKey.generate_key("P-256", private=True).as_pem(private=True)
    return pem.decode("ascii")


def test_a_token_answer_without_an_id_token_is_refused(
    make_app: MakeApp, apple: LocalAppleProvider, fault_server: FaultServer
) -> None:
    fault_server.set("/token", Behaviour.json({"access_token": "a", "token_type": "Bearer"}))
    block = apple.settings_block(SERVICES_ID, "/authenticate/apple")
    block["accessTokenURL"] = f"{fault_server.url}/token"
    app = make_app({"apple": block})
    outcome = watch(app)
    with app.test_client() as client:
        answer = apple_sign_in(client)
    assert answer.status_code == 502
    assert isinstance(outcome.error, IdTokenError)
    assert "no id_token" in str(outcome.error)
    (sent,) = fault_server.requests
    assert "client_secret=ey" in sent.body.decode()  # the JWT, never the key
