"""social.api(): the post-sign-in session against the local identity provider's protected API,
refresh through the token store (one at a time), the HTTP rules, and faults."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from fault_server import Behaviour, FaultServer
from flask import Flask
from helpers import (
    ALICE,
    CLIENT_ID,
    CLIENT_SECRET,
    LOCAL_REDIRECT,
    MakeApp,
    assert_not_logged,
    block_for,
    idp_block,
    plain_block,
    sign_in,
)
from requests_oauthlib import OAuth2Session

from flask_social_oauth2 import OAuth2Info, SocialOAuth2, signals
from flask_social_oauth2.api import ProviderSession
from flask_social_oauth2.errors import (
    ConfigurationError,
    SignInRequiredError,
    UnexpectedResponseError,
)
from flask_social_oauth2.local_idp import LocalIdentityProvider, ManualClock
from flask_social_oauth2.tokens import TokenStore


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def short_idp(clock: ManualClock) -> Iterator[LocalIdentityProvider]:
    """The identity provider with 60-second access tokens on a hand-moved clock; it rotates
    refresh tokens and refuses a used one."""
    with LocalIdentityProvider(access_token_ttl=60, clock=clock) as server:
        server.register_client(CLIENT_ID, CLIENT_SECRET, [LOCAL_REDIRECT])
        server.auto_approve = ALICE
        yield server


def api_app(make_app: MakeApp, idp: LocalIdentityProvider, **config: Any) -> Flask:
    block = idp_block(idp, customProperties={"apiBaseURL": idp.api_base_url})
    app = make_app({"local": block}, **config)
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension

    @app.get("/me")
    def me() -> Any:
        answer = social.api("local").get("me")
        return {"status": answer.status_code, "sub": answer.json().get("sub")}

    @app.get("/as/<key>")
    def as_identity(key: str) -> Any:
        answer = social.api("local", key=key).get("me", timeout=(2, 3))
        return {"status": answer.status_code, "sub": answer.json().get("sub")}

    return app


def signed_in_sql_app(make_app: MakeApp, idp: LocalIdentityProvider, tmp_path: Path) -> Flask:
    """An app keeping tokens in a SQLite file, after Alice signed in."""
    app = api_app(make_app, idp, SOCIAL_OAUTH2_TOKEN_STORE=f"sqlite:///{tmp_path / 't.sqlite3'}")
    assert sign_in(app.test_client()).status_code == 302
    return app


def token_store(app: Flask) -> TokenStore:
    store: TokenStore | None = app.extensions["social_oauth2"].token_store
    assert store is not None
    return store


def make_due(app: Flask, key: str = ALICE.sub) -> OAuth2Info:
    """Mark the kept token as expired, as the clock would; the token it was."""
    with app.app_context():
        store = token_store(app)
        info = store.load("local", key)
        assert info is not None
        store.save("local", key, dataclasses.replace(info, expires_at=time.time() - 1))
    return info


def refreshes(idp: LocalIdentityProvider) -> list[Any]:
    return [r for r in idp.token_requests if r.grant_type == "refresh_token"]


def test_api_calls_the_provider_as_the_browser_signed_in(
    make_app: MakeApp, short_idp: LocalIdentityProvider, captured_logs: list[logging.LogRecord]
) -> None:
    app = api_app(make_app, short_idp)
    client = app.test_client()
    assert sign_in(client).status_code == 302
    answer = client.get("/me")
    assert answer.json == {"status": 200, "sub": ALICE.sub}
    (call,) = short_idp.api_requests
    token = call["Authorization"].removeprefix("Bearer ")
    assert len(token) > 20
    assert call.get("Cookie") is None
    assert_not_logged(captured_logs, [token])
    # another browser has signed in with nothing: the default error page, 401, even when it
    # names the first browser's identity
    other = app.test_client()
    assert other.get("/me").status_code == 401
    assert other.get(f"/as/{ALICE.sub}").status_code == 401
    assert client.get(f"/as/{ALICE.sub}").json == {"status": 200, "sub": ALICE.sub}
    assert len(short_idp.api_requests) == 2


def test_the_session_is_an_oauth2_session_without_a_token_on_it(
    make_app: MakeApp, short_idp: LocalIdentityProvider, tmp_path: Path
) -> None:
    app = signed_in_sql_app(make_app, short_idp, tmp_path)
    with app.app_context():
        kept = token_store(app).load("local", ALICE.sub)
        assert kept is not None
        session = app.extensions["social_oauth2"].extension.api("local", key=ALICE.sub)
        assert isinstance(session, OAuth2Session)
        assert isinstance(session, ProviderSession)
        assert session.get("me").json()["sub"] == ALICE.sub
        assert session.token == {}
        assert kept.access_token not in repr(session)
        assert session.trust_env is False
        assert session.auto_refresh_url is None


def test_expired_token_is_refreshed_through_the_store_once(
    make_app: MakeApp,
    short_idp: LocalIdentityProvider,
    clock: ManualClock,
    tmp_path: Path,
    captured_logs: list[logging.LogRecord],
) -> None:
    app = signed_in_sql_app(make_app, short_idp, tmp_path)
    old = make_due(app)
    clock.advance(61)  # the old access token is dead at the provider too
    updates: list[dict[str, Any]] = []

    def updated(sender: Flask, **extra: Any) -> None:
        updates.append({"sender": sender, **extra})

    signals.token_updated.connect(updated, app, weak=False)
    with app.app_context():
        social: SocialOAuth2 = app.extensions["social_oauth2"].extension
        answer = social.api("local", key=ALICE.sub).get("/me")
        again = social.api("local", key=ALICE.sub).get("me")
        kept = token_store(app).load("local", ALICE.sub)
    assert (answer.status_code, again.status_code) == (200, 200)
    assert len(refreshes(short_idp)) == 1
    assert kept is not None
    assert kept.access_token != old.access_token
    assert kept.refresh_token != old.refresh_token  # rotated
    (update,) = updates
    assert update["sender"] is app
    assert (update["provider"], update["key"]) == ("local", ALICE.sub)
    assert update["info"].access_token == kept.access_token
    sent = [call["Authorization"] for call in short_idp.api_requests]
    assert sent == [f"Bearer {kept.access_token}"] * 2
    secrets = [old.access_token, kept.access_token]
    assert_not_logged(captured_logs, [*secrets, str(old.refresh_token), str(kept.refresh_token)])


def test_twenty_threads_on_an_expired_identity_refresh_once(
    make_app: MakeApp, short_idp: LocalIdentityProvider, clock: ManualClock, tmp_path: Path
) -> None:
    app = signed_in_sql_app(make_app, short_idp, tmp_path)
    make_due(app)
    clock.advance(61)
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension
    start = threading.Barrier(20)

    def call(_: int) -> int:
        with app.app_context():
            session = social.api("local", key=ALICE.sub)
            start.wait()
            return int(session.get("me").status_code)

    with ThreadPoolExecutor(20) as pool:
        statuses = list(pool.map(call, range(20)))
    assert statuses == [200] * 20
    assert len(refreshes(short_idp)) == 1
    assert all(r.status_code == 200 for r in refreshes(short_idp))
    with app.app_context():
        kept = token_store(app).load("local", ALICE.sub)
    assert kept is not None
    assert {call["Authorization"] for call in short_idp.api_requests} == {
        f"Bearer {kept.access_token}"
    }


def test_a_refused_refresh_deletes_the_token_and_asks_to_sign_in(
    make_app: MakeApp, short_idp: LocalIdentityProvider, clock: ManualClock, tmp_path: Path
) -> None:
    app = signed_in_sql_app(make_app, short_idp, tmp_path)
    make_due(app)
    short_idp.revoke_refresh_tokens()
    with app.app_context():
        social: SocialOAuth2 = app.extensions["social_oauth2"].extension
        with pytest.raises(SignInRequiredError, match="invalid_grant") as raised:
            social.api("local", key=ALICE.sub).get("me")
        assert raised.value.status_code == 401
        assert token_store(app).load("local", ALICE.sub) is None
    assert short_idp.api_requests == []


@pytest.mark.parametrize(
    ("failure", "status"), [("server_error", 502), ("html", 502)], ids=["http-500", "html"]
)
def test_a_provider_fault_during_refresh_keeps_the_old_token(
    make_app: MakeApp,
    short_idp: LocalIdentityProvider,
    tmp_path: Path,
    failure: str,
    status: int,
) -> None:
    app = signed_in_sql_app(make_app, short_idp, tmp_path)
    make_due(app)
    with app.app_context():
        before = token_store(app).load("local", ALICE.sub)
        short_idp.fail_next_token(failure)
        social: SocialOAuth2 = app.extensions["social_oauth2"].extension
        with pytest.raises(UnexpectedResponseError) as raised:
            social.api("local", key=ALICE.sub).get("me")
        assert raised.value.status_code == status
        assert token_store(app).load("local", ALICE.sub) == before
        # the next call refreshes with the kept refresh token, which still works
        assert social.api("local", key=ALICE.sub).get("me").status_code == 200
    assert short_idp.api_requests
    assert len(refreshes(short_idp)) == 2


def test_a_refresh_timeout_is_504_and_keeps_the_token(
    make_app: MakeApp, fault_server: FaultServer, tmp_path: Path
) -> None:
    fault_server.set("/token", Behaviour.hang())
    block = plain_block(fault_server, apiBaseURL=f"{fault_server.url}/api/")
    app = make_app(
        {"plain": block},
        SOCIAL_OAUTH2_TIMEOUT=1,
        SOCIAL_OAUTH2_TOKEN_STORE=f"sqlite:///{tmp_path / 't.sqlite3'}",
    )
    due = OAuth2Info(access_token="old-at", refresh_token="old-rt", expires_at=time.time() - 1)
    with app.app_context():
        token_store(app).save("plain", "u1", due)
        with pytest.raises(UnexpectedResponseError, match="timed out") as raised:
            app.extensions["social_oauth2"].extension.api("plain", key="u1").get("me")
        assert raised.value.status_code == 504
        kept = token_store(app).load("plain", "u1")
    assert kept is not None
    assert kept.refresh_token == "old-rt"
    assert fault_server.count("/api/me") == 0


def fault_api_app(make_app: MakeApp, server: FaultServer, tmp_path: Path, **custom: str) -> Flask:
    block = plain_block(server, **custom)
    app = make_app(
        {"plain": block},
        SOCIAL_OAUTH2_TIMEOUT=1,
        SOCIAL_OAUTH2_MAX_RESPONSE_BYTES=4096,
        SOCIAL_OAUTH2_TOKEN_STORE=f"sqlite:///{tmp_path / 't.sqlite3'}",
    )
    with app.app_context():
        token_store(app).save("plain", "u1", OAuth2Info(access_token="at-1", expires_in=3600))
    return app


def plain_session(app: Flask) -> ProviderSession:
    session: ProviderSession = app.extensions["social_oauth2"].extension.api("plain", key="u1")
    return session


def test_relative_url_without_an_api_base_is_a_value_error_and_nothing_is_sent(
    make_app: MakeApp, fault_server: FaultServer, tmp_path: Path
) -> None:
    app = fault_api_app(make_app, fault_server, tmp_path)
    with app.app_context():
        session = plain_session(app)
        with pytest.raises(ValueError, match=r"'plain'.*apiBaseURL"):
            session.get("user/repos")
        fault_server.set("/abs", Behaviour.json({"ok": True}))
        assert session.get(f"{fault_server.url}/abs").json() == {"ok": True}
    (request,) = fault_server.requests
    assert request.path == "/abs"
    assert request.headers["Authorization"] == "Bearer at-1"


def test_plain_http_to_another_host_is_refused(
    make_app: MakeApp, fault_server: FaultServer, tmp_path: Path
) -> None:
    app = fault_api_app(make_app, fault_server, tmp_path)
    with app.app_context(), pytest.raises(ValueError, match="https"):
        plain_session(app).get("http://api.example.com/me")


def test_api_base_url_must_be_https(make_app: MakeApp, short_idp: LocalIdentityProvider) -> None:
    block = idp_block(short_idp, customProperties={"apiBaseURL": "http://api.example.com/"})
    with pytest.raises(ConfigurationError, match=r"customProperties\.apiBaseURL"):
        make_app({"local": block})


@pytest.mark.parametrize(
    ("behaviour", "status", "message"),
    [
        (Behaviour.hang(), 504, "timed out"),
        (Behaviour.huge(size=100_000), 502, "larger than 4096 bytes"),
        (Behaviour.huge(size=100_000, chunked=True), 502, "larger than 4096 bytes"),
    ],
    ids=["timeout", "huge", "huge-chunked"],
)
def test_api_call_faults_are_typed_errors(
    make_app: MakeApp,
    fault_server: FaultServer,
    tmp_path: Path,
    behaviour: Behaviour,
    status: int,
    message: str,
) -> None:
    fault_server.set("/api/me", behaviour)
    app = fault_api_app(make_app, fault_server, tmp_path, apiBaseURL=f"{fault_server.url}/api")
    with app.app_context(), pytest.raises(UnexpectedResponseError, match=message) as raised:
        plain_session(app).get("me")
    assert raised.value.status_code == status
    assert "at-1" not in str(raised.value)


def test_no_cookie_is_kept_between_calls(
    make_app: MakeApp, fault_server: FaultServer, tmp_path: Path
) -> None:
    fault_server.set("/api/me", Behaviour.json({}, headers={"Set-Cookie": "sid=abc; Path=/"}))
    app = fault_api_app(make_app, fault_server, tmp_path, apiBaseURL=f"{fault_server.url}/api")
    with app.app_context():
        session = plain_session(app)
        session.get("me")
        session.get("me")
    assert [r.headers.get("Cookie") for r in fault_server.requests] == [None, None]


def test_closing_a_session_keeps_the_shared_pools_open(
    make_app: MakeApp, fault_server: FaultServer, tmp_path: Path
) -> None:
    fault_server.set("/api/me", Behaviour.json({}))
    app = fault_api_app(make_app, fault_server, tmp_path, apiBaseURL=f"{fault_server.url}/api")
    with app.app_context():
        with plain_session(app) as session:
            session.get("me")
        pools = session.get_adapter(fault_server.url).poolmanager.pools
        assert len(pools) >= 1  # requests.Session.close would have cleared them
        plain_session(app).get("me")
    assert fault_server.count("/api/me") == 2


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("twitch", {"Authorization": "Bearer at-1", "Client-Id": CLIENT_ID}),
        ("yandex", {"Authorization": "OAuth at-1"}),
    ],
)
def test_built_in_providers_send_their_own_scheme_and_headers(
    make_app: MakeApp,
    fault_server: FaultServer,
    tmp_path: Path,
    name: str,
    expected: dict[str, str],
) -> None:
    fault_server.set("/api/me", Behaviour.json({}))
    block = block_for(name, customProperties={"apiBaseURL": f"{fault_server.url}/api"})
    app = make_app({name: block}, SOCIAL_OAUTH2_TOKEN_STORE=f"sqlite:///{tmp_path / 't.db'}")
    with app.app_context():
        token_store(app).save(name, "u1", OAuth2Info(access_token="at-1"))
        app.extensions["social_oauth2"].extension.api(name, key="u1").get("me")
    (request,) = fault_server.requests
    assert {key: request.headers.get(key) for key in expected} == expected


def test_a_redirect_is_returned_not_followed(
    make_app: MakeApp, fault_server: FaultServer, tmp_path: Path
) -> None:
    moved = f"{fault_server.url}/api/elsewhere"
    fault_server.set("/api/me", Behaviour.respond(301, "moved", {"Location": moved}))
    app = fault_api_app(make_app, fault_server, tmp_path, apiBaseURL=f"{fault_server.url}/api")
    with app.app_context():
        answer = plain_session(app).get("me")
    assert answer.status_code == 301
    assert answer.headers["Location"] == moved
    assert fault_server.count("/api/elsewhere") == 0


def test_a_header_that_cannot_be_sent_is_refused_without_its_value(
    make_app: MakeApp, fault_server: FaultServer, tmp_path: Path
) -> None:
    app = fault_api_app(make_app, fault_server, tmp_path, apiBaseURL=f"{fault_server.url}/api")
    with app.app_context(), pytest.raises(UnexpectedResponseError) as raised:
        plain_session(app).get("me", headers={"X-Note": "secret\r\nInjected: 1"})
    assert "X-Note" in str(raised.value)
    assert "secret" not in str(raised.value)
    assert fault_server.requests == []


def test_withhold_token_sends_none(
    make_app: MakeApp, fault_server: FaultServer, tmp_path: Path
) -> None:
    fault_server.set("/api/me", Behaviour.json({}))
    app = fault_api_app(make_app, fault_server, tmp_path, apiBaseURL=f"{fault_server.url}/api")
    with app.app_context():
        plain_session(app).get("me", withhold_token=True)
    assert fault_server.requests[0].headers.get("Authorization") is None


def test_a_token_not_yet_due_is_not_refreshed(
    make_app: MakeApp, short_idp: LocalIdentityProvider, tmp_path: Path
) -> None:
    app = signed_in_sql_app(make_app, short_idp, tmp_path)
    with app.app_context():
        store = token_store(app)
        info = store.load("local", ALICE.sub)
        assert info is not None
        assert info.expires_in == 60
        # 40 s left: outside the 30 s leeway; 20 s left: inside it
        store.save("local", ALICE.sub, dataclasses.replace(info, expires_at=time.time() + 40))
        session = app.extensions["social_oauth2"].extension.api("local", key=ALICE.sub)
        assert session.get("me").status_code == 200
        assert refreshes(short_idp) == []
        store.save("local", ALICE.sub, dataclasses.replace(info, expires_at=time.time() + 20))
        assert session.get("me").status_code == 200
    assert len(refreshes(short_idp)) == 1


def test_outside_a_request_a_key_is_needed(
    make_app: MakeApp, short_idp: LocalIdentityProvider
) -> None:
    app = api_app(make_app, short_idp)
    with app.app_context(), pytest.raises(RuntimeError, match="key="):
        app.extensions["social_oauth2"].extension.api("local")


def test_with_no_token_store_api_asks_to_sign_in(
    make_app: MakeApp, short_idp: LocalIdentityProvider
) -> None:
    app = api_app(make_app, short_idp, SOCIAL_OAUTH2_TOKEN_STORE="none")
    client = app.test_client()
    assert sign_in(client).status_code == 302
    assert client.get("/me").status_code == 401
    assert short_idp.api_requests == []
