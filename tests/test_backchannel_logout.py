"""Back-Channel Logout 1.0: ``POST <url rule>/backchannel-logout`` with a logout token, every
check of its section 2.6, against a hand-signed OpenID provider on loopback (its key set has an
RSA and an EC key) and a real SQLite store; bad input is a 400 JSON error, never a 500, and
ends nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from fault_server import FaultServer
from flask import Flask
from helpers import (
    BACKCHANNEL_PATH,
    CLIENT_ID,
    LOGOUT_EVENT,
    FakeOpenIDProvider,
    MakeApp,
    backchannel_app,
    fake_app,
    logout_claims,
    refused_tokens,
    sign_in_fake,
    signed,
)
from joserfc.jwk import ECKey, RSAKey

from flask_social_oauth2 import signals
from flask_social_oauth2.config.provider_options import read_provider_options
from flask_social_oauth2.config.settings import OAuth2Settings
from flask_social_oauth2.errors import ConfigurationError, LogoutTokenError
from flask_social_oauth2.oauth.metadata import ProviderMetadata
from flask_social_oauth2.oidc.logout_token import check_logout_claims
from flask_social_oauth2.web.backchannel import MAX_BODY


@pytest.fixture
def fake(fault_server: FaultServer, rsa_key: RSAKey, ec_key: ECKey) -> FakeOpenIDProvider:
    return FakeOpenIDProvider(fault_server, rsa_key, ec_key, userinfo=False)


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'sessions.sqlite3'}"


@pytest.fixture
def app(make_app: MakeApp, fault_server: FaultServer, store: str) -> Flask:
    app = backchannel_app(make_app, fault_server, store)
    ended: list[dict[str, Any]] = []
    app.config["ENDED"] = ended

    def record(sender: Flask, **seen: Any) -> None:
        ended.append(seen)

    signals.provider_logged_out.connect(record, app, weak=False)
    return app


def ended_rows(store: str) -> list[Any]:
    with sa.create_engine(store).connect() as connection:
        return list(
            connection.execute(
                sa.text("SELECT sid FROM social_oauth2_sessions WHERE ended_at IS NOT NULL")
            ).all()
        )


def assert_refused(answer: Any, reason: str) -> None:
    assert answer.status_code == 400, answer.text
    assert answer.headers["Cache-Control"] == "no-store"
    assert answer.json["error"] == "invalid_request"
    assert reason in answer.json["error_description"]


def test_a_good_logout_token_ends_the_session_at_the_next_request(
    app: Flask, fake: FakeOpenIDProvider, fault_server: FaultServer, rsa_key: RSAKey, store: str
) -> None:
    browser, other = app.test_client(), app.test_client()
    sign_in_fake(browser, fake, rsa_key)
    jwks_fetches = fault_server.count("/jwks")
    token = signed(rsa_key, "RS256", logout_claims(fake), typ="logout+jwt")
    answer = app.test_client().post(BACKCHANNEL_PATH, data={"logout_token": token})
    assert answer.status_code == 200, answer.text
    assert answer.headers["Cache-Control"] == "no-store"
    assert answer.get_data() == b""
    assert fault_server.count("/jwks") == jwks_fetches  # a cached key set: no round trip
    assert other.get("/me").json == {"identities": {}}
    assert browser.get("/me").json == {"identities": {}}
    assert app.config["ENDED"] == [{"provider": "fake", "sub": "user-1", "sid": "sid-1"}]
    assert browser.get("/me").json == {"identities": {}}
    assert len(app.config["ENDED"]) == 1


def test_a_token_with_sub_alone_ends_every_session_of_the_user(
    app: Flask, fake: FakeOpenIDProvider, rsa_key: RSAKey
) -> None:
    browsers = [app.test_client() for _ in range(3)]
    for browser in browsers:
        sign_in_fake(browser, fake, rsa_key)
    token = signed(rsa_key, "RS256", logout_claims(fake, sid=None))
    assert app.test_client().post(BACKCHANNEL_PATH, data={"logout_token": token}).status_code == 200
    for browser in browsers:
        assert browser.get("/me").json == {"identities": {}}
    assert len(app.config["ENDED"]) == 3


def test_a_token_for_another_sid_or_user_ends_nothing(
    app: Flask, fake: FakeOpenIDProvider, rsa_key: RSAKey, store: str
) -> None:
    browser = app.test_client()
    sign_in_fake(browser, fake, rsa_key)
    for changes in ({"sid": "sid-2"}, {"sub": "user-2", "sid": None}, {"sub": "user-2"}):
        token = signed(rsa_key, "RS256", logout_claims(fake, **changes))
        assert (
            app.test_client().post(BACKCHANNEL_PATH, data={"logout_token": token}).status_code
            == 200
        )
    assert browser.get("/me").json == {"identities": {"fake": "user-1"}}
    assert ended_rows(store) == []


#: Beyond the OpenID Foundation's seven (tests/test_security.py, line 38): the rest of section
#: 2.6 and the issue's bad input.
CASES = [
    "not a JWT",
    "encrypted",
    "HMAC",
    "other key",
    "expired",
    "old without exp",
    "in the future",
    "no iat",
    "no jti",
    "event not an object",
    "no sub nor sid",
    "sub not a string",
    "iat not a number",
    "too long",
    "aud list without us",
]


@pytest.mark.parametrize("case", CASES)
def test_a_bad_logout_token_is_refused_and_ends_nothing(
    app: Flask,
    fake: FakeOpenIDProvider,
    rsa_key: RSAKey,
    ec_key: ECKey,
    store: str,
    case: str,
) -> None:
    browser = app.test_client()
    sign_in_fake(browser, fake, rsa_key)
    token, reason = refused_tokens(fake, rsa_key, ec_key)[case]
    answer = app.test_client().post(BACKCHANNEL_PATH, data={"logout_token": token})
    assert_refused(answer, reason)
    assert browser.get("/me").json == {"identities": {"fake": "user-1"}}
    assert ended_rows(store) == []
    assert app.config["ENDED"] == []


def test_a_replayed_token_is_refused(app: Flask, fake: FakeOpenIDProvider, rsa_key: RSAKey) -> None:
    browser = app.test_client()
    sign_in_fake(browser, fake, rsa_key)
    token = signed(rsa_key, "RS256", logout_claims(fake))
    assert app.test_client().post(BACKCHANNEL_PATH, data={"logout_token": token}).status_code == 200
    sign_in_fake(browser, fake, rsa_key)  # a new session with the same sid
    replayed = app.test_client().post(BACKCHANNEL_PATH, data={"logout_token": token})
    assert_refused(replayed, "used already")
    assert browser.get("/me").json == {"identities": {"fake": "user-1"}}


@pytest.mark.parametrize(
    ("request_kwargs", "reason"),
    [
        ({"json": {"logout_token": "x.y.z"}}, "must be a form"),
        (
            {
                "data": b"logout_token=" + b"a" * MAX_BODY,
                "content_type": "application/x-www-form-urlencoded",
            },
            "too large",
        ),
        ({"data": {"other": "x"}}, "one logout_token"),
        ({"data": {"logout_token": ["a.b.c", "a.b.c"]}}, "one logout_token"),
        (
            {"data": b"logout_token=%ff", "content_type": "application/x-www-form-urlencoded"},
            "not a signed JWT",
        ),
        ({"data": b"\xff\xfe", "content_type": "application/x-www-form-urlencoded"}, "not a form"),
    ],
)
def test_a_bad_request_is_a_400_json_error(
    app: Flask, fake: FakeOpenIDProvider, request_kwargs: dict[str, Any], reason: str
) -> None:
    answer = app.test_client().post(BACKCHANNEL_PATH, **request_kwargs)
    assert_refused(answer, reason)


def test_an_unknown_kid_fetches_the_key_set_once_more(
    app: Flask,
    fake: FakeOpenIDProvider,
    fault_server: FaultServer,
    rsa_key: RSAKey,
    ec_key: ECKey,
) -> None:
    browser = app.test_client()
    sign_in_fake(browser, fake, rsa_key)
    rotated = RSAKey.generate_key(2048, parameters={"kid": "rsa-2", "use": "sig"})
    fake.serve_keys(rsa_key, rotated, ec_key)
    before = fault_server.count("/jwks")
    token = signed(rotated, "RS256", logout_claims(fake))
    assert app.test_client().post(BACKCHANNEL_PATH, data={"logout_token": token}).status_code == 200
    assert fault_server.count("/jwks") == before + 1
    assert browser.get("/me").json == {"identities": {}}
    unknown = RSAKey.generate_key(2048, parameters={"kid": "rsa-9", "use": "sig"})
    answer = app.test_client().post(
        BACKCHANNEL_PATH, data={"logout_token": signed(unknown, "RS256", logout_claims(fake))}
    )
    assert_refused(answer, "no key of the provider's key set")


def test_the_route_is_only_for_blocks_that_turn_it_on(
    make_app: MakeApp, fault_server: FaultServer, fake: FakeOpenIDProvider, store: str
) -> None:
    app = fake_app(make_app, fault_server, app_config={"SOCIAL_OAUTH2_TOKEN_STORE": store})
    assert app.test_client().post(BACKCHANNEL_PATH, data={"logout_token": "a"}).status_code == 404
    on = backchannel_app(make_app, fault_server, store)
    assert on.test_client().get(BACKCHANNEL_PATH).status_code == 405
    assert on.test_client().post("/authenticate/nobody/backchannel-logout").status_code == 404


def test_turning_it_on_needs_a_session_index_and_an_issuer(
    make_app: MakeApp, fault_server: FaultServer, fake: FakeOpenIDProvider, store: str
) -> None:
    with pytest.raises(ConfigurationError, match=r"backchannelLogout': needs a token store"):
        backchannel_app(make_app, fault_server, "session")
    with pytest.raises(ConfigurationError, match=r"backchannelLogout': must be true or false"):
        backchannel_app(make_app, fault_server, store, backchannelLogout="yes")
    block = {
        "authorizationURL": f"{fault_server.url}/authorize",
        "accessTokenURL": f"{fault_server.url}/token",
        "redirectURL": "/authenticate/plain",
        "clientID": CLIENT_ID,
        "clientSecret": "s",
        "customProperties": {"backchannelLogout": "true"},
    }
    with pytest.raises(ConfigurationError, match=r"needs an OpenID Connect provider"):
        make_app({"plain": block}, SOCIAL_OAUTH2_TOKEN_STORE=store)


def test_the_claims_check_takes_the_leeway_and_a_list_audience() -> None:
    settings = OAuth2Settings.from_config(
        {
            "accessTokenURL": "https://op.example/token",
            "redirectURL": "/authenticate/op",
            "clientID": CLIENT_ID,
            "clientSecret": "s",
            "customProperties": {"issuer": "https://op.example", "idTokenLeeway": "5"},
        }
    )
    options, problems = read_provider_options(settings)
    assert not problems
    metadata = ProviderMetadata.from_document("op", {"issuer": "https://op.example"})
    claims = {
        "iss": "https://op.example",
        "aud": ["other", CLIENT_ID],
        "iat": 1000,
        "jti": "j",
        "sid": "s",
        "events": {LOGOUT_EVENT: {}},
    }
    checked = check_logout_claims("op", settings, options, claims, metadata, "RS256", now=1004)
    assert (checked.sub, checked.sid, checked.jti, checked.alg) == (None, "s", "j", "RS256")
    assert checked.remember_until == 1009
    assert "'s'" not in repr(checked)
    assert "'j'" not in repr(checked)
    with pytest.raises(LogoutTokenError, match="too old"):
        check_logout_claims("op", settings, options, claims, metadata, "RS256", now=1006)


def test_a_failing_store_is_a_503_and_never_a_500(
    app: Flask,
    make_app: MakeApp,
    fault_server: FaultServer,
    fake: FakeOpenIDProvider,
    rsa_key: RSAKey,
    store: str,
) -> None:
    browser = app.test_client()
    sign_in_fake(browser, fake, rsa_key)
    front = backchannel_app(
        make_app, fault_server, store, backchannelLogout="false", frontchannelLogout="true"
    )
    with front.app_context():
        assert front.extensions["social_oauth2"].token_store.engine  # its tables made now
    with sa.create_engine(store).begin() as connection:
        connection.execute(sa.text("DROP TABLE social_oauth2_sessions"))
    token = signed(rsa_key, "RS256", logout_claims(fake))
    answer = app.test_client().post(BACKCHANNEL_PATH, data={"logout_token": token})
    assert answer.status_code == 503
    assert answer.get_json()["error"] == "temporarily_unavailable"
    assert answer.headers["Cache-Control"] == "no-store"
    path = "/authenticate/fake/frontchannel-logout"
    failed = front.test_client().get(path, query_string={"iss": fake.issuer, "sid": "sid-1"})
    assert failed.status_code == 503
