"""The session index: each verified sign-in recorded in the SQL store, a provider-ended session
forgotten by the browser's next request within SOCIAL_OAUTH2_SESSION_CHECK_SECONDS, and
signals.provider_logged_out sent once; against the local identity provider and real databases."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask, session
from helpers import ALICE, MakeApp, discovery_block, idp_block, sign_in

from flask_social_oauth2 import signals
from flask_social_oauth2.accounts import SESSIONS_KEY
from flask_social_oauth2.errors import ConfigurationError
from flask_social_oauth2.local_idp import LocalIdentityProvider
from flask_social_oauth2.tokens import SQLAlchemyTokenStore
from flask_social_oauth2.tokens.session_index import IndexedSession, SessionIndex


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SQLAlchemyTokenStore]:
    """A SQL store on a SQLite file, and on the test run's PostgreSQL server."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'index.sqlite3'}"
    else:
        url = request.getfixturevalue("postgres_url")
    store = SQLAlchemyTokenStore(url, table_name=f"t_{uuid.uuid4().hex[:12]}")
    yield store
    if store._engine is not None:
        store.table.metadata.drop_all(store.engine)
        store.engine.dispose()


def with_sid(idp: LocalIdentityProvider, sid: str = "op-session-1") -> None:
    idp.id_token_tamper = lambda header, claims: (header, {**claims, "sid": sid})


def index_app(make_app: MakeApp, idp: LocalIdentityProvider, store: Any, **config: Any) -> Flask:
    """An app signed in through ``local`` (an OpenID Connect block) whose ``/`` says whether
    the browser is signed in; each provider_logged_out is recorded in ``config["ENDED"]``."""
    app = make_app({"local": discovery_block(idp)}, SOCIAL_OAUTH2_TOKEN_STORE=store, **config)
    ended: list[dict[str, Any]] = []
    app.config["ENDED"] = ended

    def record(sender: Flask, **seen: Any) -> None:
        assert sender is app
        ended.append(seen)

    signals.provider_logged_out.connect(record, app, weak=False)

    @app.get("/me")
    def me() -> dict[str, Any]:
        return {"identities": session.get("social_oauth2_identities") or {}}

    return app


def rows(store: SQLAlchemyTokenStore) -> list[Any]:
    with store.engine.connect() as connection:
        return list(connection.execute(sa.select(store.index.sessions)).all())


def test_a_verified_sign_in_is_recorded_with_a_random_local_id(
    make_app: MakeApp, idp: LocalIdentityProvider, store: SQLAlchemyTokenStore
) -> None:
    with_sid(idp)
    app = index_app(make_app, idp, store, PERMANENT_SESSION_LIFETIME=timedelta(hours=2))
    client = app.test_client()
    before = time.time()
    sign_in(client)
    (row,) = rows(store)
    assert (row.provider, row.iss, row.sub, row.sid, row.alg) == (
        "local",
        idp.issuer,
        ALICE.sub,
        "op-session-1",
        "RS256",
    )
    assert before <= row.signed_in_at <= time.time()
    assert row.expires_at == pytest.approx(row.signed_in_at + 7200)
    assert row.ended_at is None
    with client.session_transaction() as browser:
        checked, *local_ids = browser[SESSIONS_KEY].split(" ")
    assert local_ids == [row.local_id]
    assert len(row.local_id) >= 32
    assert abs(int(checked) - before) <= 2
    sign_in(app.test_client())
    assert len({item.local_id for item in rows(store)}) == 2


def test_a_session_the_provider_ended_is_forgotten_and_signalled_once(
    make_app: MakeApp, idp: LocalIdentityProvider, store: SQLAlchemyTokenStore
) -> None:
    with_sid(idp)
    app = index_app(make_app, idp, store, SOCIAL_OAUTH2_SESSION_CHECK_SECONDS=0)
    client = app.test_client()
    other = app.test_client()
    sign_in(client)
    with_sid(idp, "op-session-2")
    sign_in(other)
    assert client.get("/me").json == {"identities": {"local": ALICE.sub}}
    with app.app_context():
        assert store.end_sessions("local", idp.issuer, None, "op-session-1") == 1
        assert store.end_sessions("local", idp.issuer, None, "op-session-1") == 0
    assert client.get("/me").json == {"identities": {}}
    assert app.config["ENDED"] == [{"provider": "local", "sub": ALICE.sub, "sid": "op-session-1"}]
    with client.session_transaction() as browser:
        assert SESSIONS_KEY not in browser
        assert "social_profile" not in browser
    assert client.get("/me").json == {"identities": {}}
    assert len(app.config["ENDED"]) == 1
    assert other.get("/me").json == {"identities": {"local": ALICE.sub}}  # another sid


def test_a_logout_by_sub_alone_ends_every_session_of_that_user(
    make_app: MakeApp, idp: LocalIdentityProvider, store: SQLAlchemyTokenStore
) -> None:
    app = index_app(make_app, idp, store, SOCIAL_OAUTH2_SESSION_CHECK_SECONDS=0)
    browsers = [app.test_client() for _ in range(2)]
    for browser in browsers:
        sign_in(browser)
    with app.app_context():
        assert store.end_sessions("local", idp.issuer, "someone-else", None) == 0
        assert store.end_sessions("local", "https://other.example", ALICE.sub, None) == 0
        assert store.end_sessions("other", idp.issuer, ALICE.sub, None) == 0
        assert store.end_sessions("local", idp.issuer, None, None) == 0
        assert store.end_sessions("local", idp.issuer, ALICE.sub, None) == 2
    for browser in browsers:
        assert browser.get("/me").json == {"identities": {}}
    assert [seen["sid"] for seen in app.config["ENDED"]] == [None, None]


def test_the_check_waits_the_configured_seconds(
    make_app: MakeApp, idp: LocalIdentityProvider, store: SQLAlchemyTokenStore
) -> None:
    app = index_app(make_app, idp, store)  # the default: every 10 seconds
    client = app.test_client()
    sign_in(client)
    with app.app_context():
        store.end_sessions("local", idp.issuer, ALICE.sub, None)
    assert client.get("/me").json == {"identities": {"local": ALICE.sub}}
    with client.session_transaction() as browser:
        checked, local_ids = browser[SESSIONS_KEY].split(" ", 1)
        browser[SESSIONS_KEY] = f"{int(checked) - 11} {local_ids}"
    assert client.get("/me").json == {"identities": {}}
    assert len(app.config["ENDED"]) == 1


def test_a_session_of_an_earlier_build_is_still_checked(
    make_app: MakeApp, idp: LocalIdentityProvider, store: SQLAlchemyTokenStore
) -> None:
    # Earlier builds kept [last check, [local id, ...]] in the session.
    app = index_app(make_app, idp, store)
    client = app.test_client()
    sign_in(client)
    with client.session_transaction() as browser:
        checked, *local_ids = browser[SESSIONS_KEY].split(" ")
        browser[SESSIONS_KEY] = [int(checked), local_ids]
    assert client.get("/me").json == {"identities": {"local": ALICE.sub}}  # not due yet
    with app.app_context():
        store.end_sessions("local", idp.issuer, ALICE.sub, None)
    with client.session_transaction() as browser:
        browser[SESSIONS_KEY] = [int(checked) - 11, local_ids]
    assert client.get("/me").json == {"identities": {}}
    assert len(app.config["ENDED"]) == 1


@pytest.mark.parametrize("value", ["", "soon abc", "\xb2 abc", "12", 12, [1], [1, "abc"], {"a": 1}])
def test_an_unreadable_session_entry_serves_the_page_and_checks_nothing(
    make_app: MakeApp, idp: LocalIdentityProvider, store: SQLAlchemyTokenStore, value: Any
) -> None:
    app = index_app(make_app, idp, store)
    client = app.test_client()
    sign_in(client)
    with client.session_transaction() as browser:
        browser[SESSIONS_KEY] = value
    with app.app_context():
        store.end_sessions("local", idp.issuer, ALICE.sub, None)
    assert client.get("/me").json == {"identities": {"local": ALICE.sub}}
    assert app.config["ENDED"] == []


def test_a_failing_index_serves_the_page_and_checks_again_later(
    make_app: MakeApp,
    idp: LocalIdentityProvider,
    store: SQLAlchemyTokenStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = index_app(make_app, idp, store, SOCIAL_OAUTH2_SESSION_CHECK_SECONDS=0)
    client = app.test_client()
    sign_in(client)
    store.index.sessions.drop(store.engine)
    assert client.get("/me").json == {"identities": {"local": ALICE.sub}}
    assert "the session index could not be read" in caplog.text
    assert app.config["ENDED"] == []


def test_the_session_store_keeps_no_index(make_app: MakeApp, idp: LocalIdentityProvider) -> None:
    app = index_app(make_app, idp, "session", SOCIAL_OAUTH2_SESSION_CHECK_SECONDS=0)
    assert app.extensions["social_oauth2"].session_index is None
    client = app.test_client()
    sign_in(client)
    with client.session_transaction() as browser:
        assert SESSIONS_KEY not in browser


def test_a_sign_in_without_an_id_token_is_not_indexed(
    make_app: MakeApp, idp: LocalIdentityProvider, store: SQLAlchemyTokenStore
) -> None:
    app = make_app({"local": idp_block(idp)}, SOCIAL_OAUTH2_TOKEN_STORE=store)
    client = app.test_client()
    sign_in(client)
    assert rows(store) == []
    with client.session_transaction() as browser:
        assert SESSIONS_KEY not in browser


def test_rows_expire_and_logout_tokens_are_kept_until_theirs(
    store: SQLAlchemyTokenStore,
) -> None:
    assert isinstance(store, SessionIndex)
    app = Flask("index")
    now = time.time()
    old = IndexedSession("old", "local", "https://op", "u", None, "RS256", now - 20, now - 10)
    new = IndexedSession("new", "local", "https://op", "u", "s", "ES256", now, now + 60)
    with app.app_context():
        store.record_session(old)
        store.record_session(new)
        assert [row.local_id for row in rows(store)] == ["new"]
        assert store.session_algorithms("local", "https://op", "u", None) == {"ES256"}
        assert store.session_algorithms("local", "https://op", None, "other") == frozenset()
        assert store.take_ended_sessions(["new", "old"]) == []
        assert store.remember_logout_token("https://op", "jti-1", now + 60)
        assert not store.remember_logout_token("https://op", "jti-1", now + 60)
        assert store.remember_logout_token("https://other", "jti-1", now + 60)
        assert store.remember_logout_token("https://op", "jti-2", now - 1)
        assert store.remember_logout_token("https://op", "jti-2", now + 60)  # the old one went
    assert "local_id='***'" in repr(new)
    assert "'s'" not in repr(new)


@pytest.mark.parametrize("value", [-1, "10", None, float("nan"), True])
def test_session_check_seconds_is_checked(make_app: MakeApp, value: Any) -> None:
    with pytest.raises(ConfigurationError, match="SOCIAL_OAUTH2_SESSION_CHECK_SECONDS"):
        make_app(SOCIAL_OAUTH2_SESSION_CHECK_SECONDS=value)
