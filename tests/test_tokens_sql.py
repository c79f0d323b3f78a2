"""The SQL token store on a SQLite file and on a real PostgreSQL server."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from cryptography.fernet import Fernet
from flask import Flask
from helpers import (
    ALICE,
    MakeApp,
    RotatingRenewer,
    assert_not_logged,
    free_port,
    idp_block,
    kept,
    make_token,
    sign_in,
    token_strings,
)

from flask_social_oauth2.config.settings import OAuth2Info
from flask_social_oauth2.errors import SignInRequiredError, TokenStoreUnavailableError
from flask_social_oauth2.local_idp import LocalIdentityProvider
from flask_social_oauth2.tokens import SQLAlchemyTokenStore
from flask_social_oauth2.tokens.store import current_cipher

TESTS = Path(__file__).parent


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A SQLite file in tmp_path, and the test run's PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'tokens.sqlite3'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def app() -> Iterator[Flask]:
    app = Flask("tokens_app")
    app.config["SECRET_KEY"] = "test-secret-key"
    with app.app_context():
        yield app


@pytest.fixture
def store(database_url: str, app: Flask) -> Iterator[SQLAlchemyTokenStore]:
    """A store on a table of its own (one server serves every test)."""
    store = SQLAlchemyTokenStore(database_url, table_name=f"t_{uuid.uuid4().hex[:12]}")
    yield store
    store.table.drop(store.engine)
    store.engine.dispose()


def _rows(store: SQLAlchemyTokenStore) -> list[Any]:
    with store.engine.connect() as connection:
        return list(connection.execute(sa.select(store.table).order_by("provider_key")))


def test_save_load_delete_and_what_the_row_holds(
    store: SQLAlchemyTokenStore, captured_logs: list[logging.LogRecord]
) -> None:
    token = make_token(scope="read")
    assert store.load("local", "alice") is None
    store.save("local", "alice", token)
    loaded = store.load("local", "alice")
    assert loaded is not None
    assert (loaded.access_token, loaded.refresh_token) == (token.access_token, token.refresh_token)
    assert loaded.expires_at == token.expires_at
    (row,) = _rows(store)
    assert (row.provider, row.provider_key, row.user_id, row.scope) == (
        "local",
        "alice",
        None,
        "read",
    )
    assert row.expires_at == token.expires_at
    assert row.version == 1
    stored = " ".join(str(value) for value in row)
    for secret in (token.access_token, token.refresh_token, token.params["id_token"]):
        assert isinstance(secret, str)
        assert secret not in stored
    store.save("local", "alice", make_token())
    assert _rows(store)[0].version == 2
    assert_not_logged(captured_logs, token_strings([token]))
    store.delete("local", "alice")
    assert _rows(store) == []
    store.delete("local", "alice")


def test_rotation_old_key_decrypts_new_key_encrypts(
    store: SQLAlchemyTokenStore, app: Flask
) -> None:
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    app.config["SOCIAL_OAUTH2_TOKEN_KEYS"] = [old]
    first = make_token()
    store.save("local", "alice", first)
    app.config["SOCIAL_OAUTH2_TOKEN_KEYS"] = [new, old]
    assert kept(store.load("local", "alice")) == kept(first)
    second = make_token()
    store.save("local", "bob", second)
    app.config["SOCIAL_OAUTH2_TOKEN_KEYS"] = [new]
    assert kept(store.load("local", "bob")) == kept(second)
    with pytest.raises(SignInRequiredError):
        store.load("local", "alice")


def test_wrong_key_or_corrupt_row_is_an_error_for_that_identity_only(
    store: SQLAlchemyTokenStore, app: Flask
) -> None:
    tokens = {key: make_token(expired=True) for key in ("alice", "bob", "carol")}
    for key, token in tokens.items():
        store.save("local", key, token)
    with store.engine.begin() as connection:
        connection.execute(
            sa.update(store.table)
            .where(store.table.c.provider_key == "alice")
            .values(tokens="garbage")
        )
    before = _rows(store)
    renewer = RotatingRenewer(tokens["alice"].refresh_token or "")
    with pytest.raises(SignInRequiredError) as raised:
        store.load("local", "alice")
    assert raised.value.status_code == 401
    assert "'alice'" in str(raised.value)
    with pytest.raises(SignInRequiredError, match=r"'alice'.*no key opens it"):
        store.refresh("local", "alice", renewer)
    assert renewer.calls == 0
    assert kept(store.load("local", "bob")) == kept(tokens["bob"])
    with store.engine.begin() as connection:  # opens with the key, but is no token record
        connection.execute(
            sa.update(store.table)
            .where(store.table.c.provider_key == "bob")
            .values(tokens=current_cipher().encrypt(b'{"v": 1}'))
        )
    with pytest.raises(SignInRequiredError, match=r"'bob'.*damaged"):
        store.load("local", "bob")
    before = _rows(store)
    app.config["SOCIAL_OAUTH2_TOKEN_KEYS"] = [Fernet.generate_key().decode()]
    with pytest.raises(SignInRequiredError, match="no key opens it"):
        store.load("local", "carol")
    assert _rows(store) == before  # nothing deleted or rewritten


def test_refresh_renews_once_for_20_threads(store: SQLAlchemyTokenStore, app: Flask) -> None:
    token = make_token(expired=True)
    store.save("local", "alice", token)
    renewer = RotatingRenewer(token.refresh_token or "")
    got: list[str] = []
    failures: list[BaseException] = []
    barrier = threading.Barrier(20)

    def refresh() -> None:
        with app.app_context():
            barrier.wait()
            try:
                got.append(store.refresh("local", "alice", renewer).access_token)
            except BaseException as error:
                failures.append(error)

    threads = [threading.Thread(target=refresh) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert renewer.calls == 1
    newest = renewer.issued[-1]
    assert got == [newest.access_token] * 20
    assert kept(store.load("local", "alice")) == kept(newest)
    assert _rows(store)[0].version == 2


def test_first_saves_of_one_identity_at_once_do_not_collide(
    store: SQLAlchemyTokenStore, app: Flask
) -> None:
    store.load("local", "alice")  # the table exists before the races
    failures: list[BaseException] = []
    for round_ in range(5):  # a race: several rounds, so that a collision would show
        key = f"user{round_}"
        tokens = [make_token() for _ in range(10)]
        barrier = threading.Barrier(len(tokens))

        def save(token: OAuth2Info, key: str = key, barrier: threading.Barrier = barrier) -> None:
            with app.app_context(), store.engine.connect() as warm:
                warm.close()  # this thread's connection is open before the race
                barrier.wait()
                try:
                    store.save("local", key, token)
                except BaseException as error:
                    failures.append(error)

        threads = [threading.Thread(target=save, args=(token,)) for token in tokens]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert kept(store.load("local", key)) in [kept(token) for token in tokens]
    assert failures == []
    assert [row.version for row in _rows(store)] == [10] * 5


def test_refresh_not_due_returns_the_token_and_refused_refresh_clears_it(
    store: SQLAlchemyTokenStore,
) -> None:
    fresh = make_token()
    store.save("local", "alice", fresh)
    renewer = RotatingRenewer("another refresh token")
    assert kept(store.refresh("local", "alice", renewer)) == kept(fresh)
    assert renewer.calls == 0
    store.save("local", "alice", make_token(expired=True))
    with store.engine.begin() as connection:
        connection.execute(sa.update(store.table).values(user_id="user-1"))
    with pytest.raises(SignInRequiredError):
        store.refresh("local", "alice", renewer)
    assert renewer.calls == 1
    assert store.load("local", "alice") is None
    (row,) = _rows(store)
    assert (row.user_id, row.tokens) == ("user-1", None)  # the identity and its link stay
    with pytest.raises(SignInRequiredError, match="no token"):
        store.refresh("local", "alice", renewer)
    with pytest.raises(SignInRequiredError, match="no token"):
        store.refresh("local", "nobody", renewer)


def test_a_provider_fault_during_refresh_keeps_the_old_token(store: SQLAlchemyTokenStore) -> None:
    from flask_social_oauth2.errors import UnexpectedResponseError

    token = make_token(expired=True)
    store.save("local", "alice", token)

    def failing(info: OAuth2Info) -> OAuth2Info:
        raise UnexpectedResponseError("local", "refresh answered 500")

    with pytest.raises(UnexpectedResponseError):
        store.refresh("local", "alice", failing)
    assert kept(store.load("local", "alice")) == kept(token)
    assert _rows(store)[0].version == 1


def test_relative_sqlite_url_is_in_the_instance_folder(tmp_path: Path) -> None:
    app = Flask("instance_app", instance_path=str(tmp_path / "instance"))
    app.config.update(SECRET_KEY="k", SOCIAL_OAUTH2_TOKEN_STORE="sqlite:///social.sqlite3")
    from flask_social_oauth2 import SocialOAuth2
    from flask_social_oauth2.runtime import current_runtime

    SocialOAuth2(app)
    with app.app_context():
        store = current_runtime().token_store
        assert isinstance(store, SQLAlchemyTokenStore)
        store.save("local", "alice", make_token())
        store.engine.dispose()
    assert (tmp_path / "instance" / "social.sqlite3").is_file()


def test_flask_sqlalchemy_db_engine(tmp_path: Path) -> None:
    from flask_sqlalchemy import SQLAlchemy

    app = Flask("fsa_app")
    app.config.update(
        SECRET_KEY="k", SQLALCHEMY_DATABASE_URI=f"sqlite:///{tmp_path / 'app.sqlite3'}"
    )
    db = SQLAlchemy(app)
    store = SQLAlchemyTokenStore(db)
    token = make_token()
    with app.app_context():
        store.save("local", "alice", token)
        assert kept(store.load("local", "alice")) == kept(token)
        assert sa.inspect(db.engine).has_table("social_oauth2_identities")
        db.engine.dispose()


def test_postgresql_url_means_psycopg_3(postgres_url: str, app: Flask) -> None:
    bare = postgres_url.replace("postgresql+psycopg://", "postgresql://")
    store = SQLAlchemyTokenStore(bare, table_name="t_bare_url")
    assert store.engine.dialect.driver == "psycopg"
    store.table.drop(store.engine)
    store.engine.dispose()


def test_two_processes_renew_once(database_url: str, app: Flask, tmp_path: Path) -> None:
    table = f"t_{uuid.uuid4().hex[:12]}"
    store = SQLAlchemyTokenStore(database_url, table_name=table)
    store.save("local", "alice", make_token(expired=True))
    counter = tmp_path / "renewals"
    counter.touch()
    start_at = str(time.time() + 3)
    children = [
        subprocess.Popen(
            [
                sys.executable,
                str(TESTS / "token_refresh_child.py"),
                database_url,
                table,
                str(counter),
                start_at,
            ],
            cwd=TESTS,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [child.communicate(timeout=60) for child in children]
    assert [child.returncode for child in children] == [0, 0], [err for _, err in outputs]
    renewals = counter.read_text().splitlines()
    assert len(renewals) == 1
    newest = store.load("local", "alice")
    assert newest is not None
    got = [line for out, _ in outputs for line in out.splitlines()]
    assert got == [newest.access_token] * 10
    store.table.drop(store.engine)
    store.engine.dispose()


def test_database_gone_mid_refresh_is_a_typed_error_and_nothing_half_written(
    postgres_url: str, app: Flask
) -> None:
    store = SQLAlchemyTokenStore(postgres_url, table_name=f"t_{uuid.uuid4().hex[:12]}")
    token = make_token(expired=True)
    store.save("local", "alice", token)
    killer = sa.create_engine(postgres_url)

    def renew_while_the_database_goes(info: OAuth2Info) -> OAuth2Info:
        with killer.connect() as connection:
            connection.execute(
                sa.text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE pid <> pg_backend_pid() AND state = 'idle in transaction'"
                )
            )
        return make_token()

    with pytest.raises(TokenStoreUnavailableError) as raised:
        store.refresh("local", "alice", renew_while_the_database_goes)
    assert raised.value.status_code == 503
    assert token.access_token not in str(raised.value)
    assert kept(store.load("local", "alice")) == kept(token)
    assert _rows(store)[0].version == 1
    store.table.drop(store.engine)
    store.engine.dispose()
    killer.dispose()


def test_sign_in_keeps_the_token_in_the_sql_store(
    make_app: MakeApp, idp: LocalIdentityProvider, database_url: str
) -> None:
    store = SQLAlchemyTokenStore(database_url, table_name=f"t_{uuid.uuid4().hex[:12]}")
    app = make_app({"local": idp_block(idp)}, SOCIAL_OAUTH2_TOKEN_STORE=store)
    client = app.test_client()
    assert sign_in(client).status_code == 302
    with app.app_context():
        (row,) = _rows(store)
        assert row.provider == "local"
        token = store.load("local", row.provider_key)
        assert token is not None
        assert token.refresh_token is not None
        store.table.drop(store.engine)
        store.engine.dispose()


def test_database_down_at_sign_in_is_a_503_page(
    make_app: MakeApp, idp: LocalIdentityProvider, captured_logs: list[logging.LogRecord]
) -> None:
    down = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"
    app = make_app({"local": idp_block(idp)}, SOCIAL_OAUTH2_TOKEN_STORE=down)
    answer = sign_in(app.test_client())
    assert answer.status_code == 503
    assert "try again later" in answer.text
    failures = [r.getMessage() for r in captured_logs if "sign-in failed" in r.getMessage()]
    assert any("token store's database failed (OperationalError)" in text for text in failures)


def test_an_api_call_on_a_warm_pool_costs_one_indexed_query(
    make_app: MakeApp, idp: LocalIdentityProvider, database_url: str
) -> None:
    """The store's part of ``social.api(...).get()`` when the token is not due: one SELECT by
    the table's primary key (provider, provider_key), nothing else."""
    store = SQLAlchemyTokenStore(database_url, table_name=f"t_{uuid.uuid4().hex[:12]}")
    block = idp_block(idp, customProperties={"apiBaseURL": idp.api_base_url})
    app = make_app({"local": block}, SOCIAL_OAUTH2_TOKEN_STORE=store)
    social = app.extensions["social_oauth2"].extension
    assert sign_in(app.test_client()).status_code == 302
    statements: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    with app.app_context():
        assert social.api("local", key=ALICE.sub).get("me").status_code == 200  # pool warm
        sa.event.listen(store.engine, "before_cursor_execute", seen)
        try:
            for _ in range(5):
                assert social.api("local", key=ALICE.sub).get("me").status_code == 200
        finally:
            sa.event.remove(store.engine, "before_cursor_execute", seen)
        with store.engine.connect() as connection:
            indexes = sa.inspect(connection).get_pk_constraint(store.table.name)
        store.table.drop(store.engine)
        store.engine.dispose()
    assert len(statements) == 5, statements
    assert all(text.lstrip().upper().startswith("SELECT") for text in statements)
    assert all("provider_key" in text.split("WHERE", 1)[1] for text in statements)
    assert set(indexes["constrained_columns"]) == {"provider", "provider_key"}
