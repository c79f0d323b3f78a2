"""A token store in a SQL database (SQLAlchemy 2 Core): one table of identities, whose
encrypted token record keeps the ID token too (RP-initiated logout sends it back as
``id_token_hint``)."""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final, Protocol

import sqlalchemy as sa
from flask import current_app
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.engine.url import URL

from ..config.settings import OAuth2Info
from ..errors import SignInRequiredError, TokenStoreUnavailableError
from .identity import Identity
from .record import scope_of, with_expiry
from .session_index import IndexedSession
from .sql_sessions import (
    LOGOUT_TOKENS_TABLE,
    SESSIONS_TABLE,
    SQLSessionIndex,
    logout_tokens_table,
    sessions_table,
)
from .store import IdentityLocks, Renew, refresh_due, seal, unseal

#: The table's default name.
TABLE_NAME: Final = "social_oauth2_identities"
#: Seconds a SQLite connection waits for another one's write lock.
SQLITE_BUSY_TIMEOUT: Final = 60


def identities_table(metadata: sa.MetaData, name: str = TABLE_NAME) -> sa.Table:
    """The table of identities, for an app that creates it with its own migrations.

    ``tokens`` is the encrypted token record; ``expires_at`` (seconds since the epoch) and
    ``scope`` are kept in clear; ``version`` counts the saves of the row.
    """
    return sa.Table(
        name,
        metadata,
        sa.Column("provider", sa.String(64), primary_key=True),
        sa.Column("provider_key", sa.String(255), primary_key=True),
        sa.Column("user_id", sa.String(255), nullable=True, index=True),
        sa.Column("tokens", sa.Text, nullable=True),
        sa.Column("expires_at", sa.Float, nullable=True),
        sa.Column("scope", sa.Text, nullable=True),
        sa.Column("version", sa.Integer, nullable=False, default=0),
        sa.Column("updated_at", sa.Float, nullable=False),
    )


class _HasEngine(Protocol):
    @property
    def engine(self) -> Engine: ...


class SQLAlchemyTokenStore:
    """Tokens encrypted in one table of a SQL database, reached by every process of the app,
    and the session index of back-channel and front-channel logout in two more
    (:class:`~flask_social_oauth2.tokens.session_index.SessionIndex`: ``social_oauth2_sessions``
    and ``social_oauth2_logout_tokens``, or ``<table_name>_sessions`` and
    ``<table_name>_logout_tokens`` beside another table name).

    One refresh at a time per identity: within a process by a lock, across processes by the
    database (``SELECT ... FOR UPDATE`` on PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite).

    :param url_or_engine: A SQLAlchemy URL (a relative ``sqlite:///name.sqlite3`` is a file in
        the app's instance folder, which is created; a bare ``postgresql://`` uses psycopg 3),
        an :class:`~sqlalchemy.engine.Engine`, or a Flask-SQLAlchemy ``db`` (its engine is
        used, from the app context).
    :param table_name: The table's name; it is created when missing.
    """

    def __init__(
        self, url_or_engine: str | URL | Engine | _HasEngine, *, table_name: str = TABLE_NAME
    ) -> None:
        self._source = url_or_engine
        metadata = sa.MetaData()
        self.table = identities_table(metadata, table_name)
        own = table_name == TABLE_NAME
        self.index = SQLSessionIndex(
            sessions_table(metadata, SESSIONS_TABLE if own else f"{table_name}_sessions"),
            logout_tokens_table(
                metadata, LOGOUT_TOKENS_TABLE if own else f"{table_name}_logout_tokens"
            ),
            self._transaction,
            self._connection,
            lambda: self.engine,
        )
        # Built once: a select built per call would compute its cache key again on every load,
        # and a load comes with every API call of a stored identity.
        self._load_query = sa.select(self.table.c.tokens).where(
            self.table.c.provider == sa.bindparam("provider"),
            self.table.c.provider_key == sa.bindparam("provider_key"),
        )
        self._engine: Engine | None = None
        self._ready = False
        self._setup_lock = threading.Lock()
        self._locks = IdentityLocks()

    def __repr__(self) -> str:
        source = self._source
        where = source if isinstance(source, Engine) else type(source).__name__
        if isinstance(source, str | URL):
            where = make_url(source).render_as_string(hide_password=True)
        return f"SQLAlchemyTokenStore({where!r}, table_name={self.table.name!r})"

    # -- the protocol ----------------------------------------------------------------------

    def load(self, provider: str, key: str) -> OAuth2Info | None:
        """See :meth:`TokenStore.load`: one query by primary key."""
        with self._connection(provider) as connection:
            sealed = connection.execute(
                self._load_query, {"provider": provider, "provider_key": key}
            ).scalar()
        return None if sealed is None else unseal(provider, key, sealed)

    def save(self, provider: str, key: str, info: OAuth2Info) -> None:
        """See :meth:`TokenStore.save`. The identity's ``user_id`` is kept."""
        info = with_expiry(info)
        with self._transaction(provider) as connection:
            self._write(connection, provider, key, info)

    def delete(self, provider: str, key: str) -> None:
        """See :meth:`TokenStore.delete`: the identity's row goes."""
        with self._transaction(provider) as connection:
            connection.execute(sa.delete(self.table).where(*self._identity(provider, key)))

    def refresh(self, provider: str, key: str, renew: Renew) -> OAuth2Info:
        """See :meth:`TokenStore.refresh`. When the provider refuses the refresh, the tokens are
        cleared and the identity (and its ``user_id``) stays."""
        with self._locks.hold(provider, key), self._transaction(provider, lock=True) as connection:
            query = sa.select(self.table.c.tokens).where(*self._identity(provider, key))
            if connection.dialect.name != "sqlite":
                query = query.with_for_update()
            sealed = connection.execute(query).scalar()
            if sealed is None:
                raise SignInRequiredError(provider, f"no token is kept for identity {key!r}")
            current = unseal(provider, key, sealed)
            if not refresh_due(current):
                return current
            try:
                renewed = with_expiry(renew(current))
            except SignInRequiredError as refused:
                self._clear_tokens(connection, provider, key)
                raise _Committed(refused) from None
            kept_id_token = current.params.get("id_token")
            if kept_id_token is not None and "id_token" not in renewed.params:
                # a refresh answer without an ID token: the sign-in's stays the hint for logout
                renewed = dataclasses.replace(
                    renewed, params={**renewed.params, "id_token": kept_id_token}
                )
            self._write(connection, provider, key, renewed)
            return renewed

    # -- identities and their users ----------------------------------------------------------

    def link(self, provider: str, key: str, user_id: str) -> Identity:
        """See :meth:`IdentityStore.link`: one statement; the tokens are kept."""
        with self._transaction(provider) as connection:
            linked = connection.execute(
                sa.update(self.table)
                .where(*self._identity(provider, key))
                .values(user_id=user_id, updated_at=time.time())
            )
            if linked.rowcount == 0:
                connection.execute(
                    sa.insert(self.table).values(
                        provider=provider,
                        provider_key=key,
                        user_id=user_id,
                        version=1,
                        updated_at=time.time(),
                    )
                )
        return Identity(provider, key, user_id)

    def identity(self, provider: str, key: str) -> Identity | None:
        """See :meth:`IdentityStore.identity`: one query by primary key."""
        with self._connection(provider) as connection:
            row = connection.execute(
                sa.select(self.table.c.user_id).where(*self._identity(provider, key))
            ).first()
        return None if row is None else Identity(provider, key, row.user_id)

    def identities(self, user_id: str) -> list[Identity]:
        """See :meth:`IdentityStore.identities`: one query on the ``user_id`` index."""
        table = self.table
        with self._connection("") as connection:
            rows = connection.execute(
                sa.select(table.c.provider, table.c.provider_key)
                .where(table.c.user_id == user_id)
                .order_by(table.c.provider, table.c.provider_key)
            ).all()
        return [Identity(row.provider, row.provider_key, user_id) for row in rows]

    # -- the session index (see SessionIndex) ------------------------------------------------

    def record_session(self, session: IndexedSession) -> None:
        """See :meth:`.SessionIndex.record_session`."""
        self.index.record_session(session)

    def take_ended_sessions(self, local_ids: Sequence[str]) -> list[IndexedSession]:
        """See :meth:`.SessionIndex.take_ended_sessions`: one query by primary key."""
        return self.index.take_ended_sessions(local_ids)

    def session_algorithms(
        self, provider: str, iss: str, sub: str | None, sid: str | None
    ) -> frozenset[str]:
        """See :meth:`.SessionIndex.session_algorithms`."""
        return self.index.session_algorithms(provider, iss, sub, sid)

    def end_sessions(self, provider: str, iss: str, sub: str | None, sid: str | None) -> int:
        """See :meth:`.SessionIndex.end_sessions`."""
        return self.index.end_sessions(provider, iss, sub, sid)

    def remember_logout_token(self, iss: str, jti: str, expires_at: float) -> bool:
        """See :meth:`.SessionIndex.remember_logout_token`."""
        return self.index.remember_logout_token(iss, jti, expires_at)

    # -- rows -------------------------------------------------------------------------------

    def _identity(self, provider: str, key: str) -> tuple[sa.ColumnElement[bool], ...]:
        return (self.table.c.provider == provider, self.table.c.provider_key == key)

    def _write(self, connection: Connection, provider: str, key: str, info: OAuth2Info) -> None:
        values = {
            "tokens": seal(info, keep_id_token=True),
            "expires_at": info.expires_at,
            "scope": scope_of(info),
            "updated_at": time.time(),
        }
        dialect = connection.dialect.name
        if dialect in ("postgresql", "sqlite"):
            # one statement, so two first sign-ins of one identity at once cannot collide
            upsert = postgresql.insert if dialect == "postgresql" else sqlite.insert
            insert = upsert(self.table).values(
                provider=provider, provider_key=key, version=1, **values
            )
            connection.execute(
                insert.on_conflict_do_update(
                    index_elements=[self.table.c.provider, self.table.c.provider_key],
                    set_={"version": self.table.c.version + 1, **values},
                )
            )
            return
        updated = connection.execute(
            sa.update(self.table)
            .where(*self._identity(provider, key))
            .values(version=self.table.c.version + 1, **values)
        )
        if updated.rowcount == 0:
            connection.execute(
                sa.insert(self.table).values(
                    provider=provider, provider_key=key, version=1, **values
                )
            )

    def _clear_tokens(self, connection: Connection, provider: str, key: str) -> None:
        connection.execute(
            sa.update(self.table)
            .where(*self._identity(provider, key))
            .values(
                tokens=None,
                expires_at=None,
                version=self.table.c.version + 1,
                updated_at=time.time(),
            )
        )

    # -- connections ------------------------------------------------------------------------

    @property
    def engine(self) -> Engine:
        """The engine, made at first use (a relative SQLite path needs the app's instance
        folder); the table is created then when missing."""
        with self._setup_lock:
            if self._engine is None:
                self._engine = _engine_of(self._source)
            if not self._ready:
                _create_tables(self._engine, self.table.metadata)
                self._ready = True
            return self._engine

    @contextmanager
    def _connection(self, provider: str) -> Iterator[Connection]:
        try:
            with self.engine.connect() as connection:
                yield connection
        except sa.exc.DBAPIError as error:
            raise _unavailable(provider, error) from None

    @contextmanager
    def _transaction(self, provider: str, *, lock: bool = False) -> Iterator[Connection]:
        """A transaction, committed when the block ends without an error. With ``lock`` on
        SQLite, it takes the database's write lock first (``BEGIN IMMEDIATE``), which is how
        SQLite serializes writers across processes."""
        try:
            with self.engine.connect() as connection:
                if lock and connection.dialect.name == "sqlite":
                    connection = connection.execution_options(isolation_level="AUTOCOMMIT")
                    connection.exec_driver_sql("BEGIN IMMEDIATE")
                    try:
                        yield connection
                    except _Committed:
                        connection.exec_driver_sql("COMMIT")
                        raise
                    except BaseException:
                        connection.exec_driver_sql("ROLLBACK")
                        raise
                    connection.exec_driver_sql("COMMIT")
                else:
                    with connection.begin() as transaction:
                        try:
                            yield connection
                        except _Committed:
                            transaction.commit()
                            raise
        except _Committed as committed:
            raise committed.error from None
        except sa.exc.DBAPIError as error:
            raise _unavailable(provider, error) from None


class _Committed(Exception):
    """Leave the transaction committed, then raise ``error``."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error


def _unavailable(provider: str, error: sa.exc.DBAPIError) -> TokenStoreUnavailableError:
    # The driver's message may quote statement parameters (sealed tokens): only its class.
    return TokenStoreUnavailableError(
        provider, f"the token store's database failed ({type(error.orig).__name__})"
    )


def _create_tables(engine: Engine, metadata: sa.MetaData, attempts: int = 3) -> None:
    """Create the store's tables that are missing. Another process may be creating them at
    the same moment: a CREATE that fails is tried again (each try skips the tables there by
    then), and the last failure counts only when a table is still missing."""
    for attempt in range(attempts):
        try:
            metadata.create_all(engine, checkfirst=True)
            return
        except sa.exc.DBAPIError:
            inspector = sa.inspect(engine)
            if all(inspector.has_table(name) for name in metadata.tables):
                return
            if attempt == attempts - 1:
                raise


def _engine_of(source: str | URL | Engine | _HasEngine) -> Engine:
    if isinstance(source, Engine):
        return source
    if not isinstance(source, str | URL):
        return source.engine
    url = make_url(source)
    options: dict[str, Any] = {}
    if url.drivername == "postgresql":
        url = url.set(drivername="postgresql+psycopg")
    if url.get_backend_name() == "sqlite":
        options["connect_args"] = {"timeout": SQLITE_BUSY_TIMEOUT}
        database = url.database or ""
        in_memory = database in ("", ":memory:") or database.startswith("file:")
        if not in_memory and not os.path.isabs(database):
            os.makedirs(current_app.instance_path, exist_ok=True)
            url = url.set(database=os.path.join(current_app.instance_path, database))
    return sa.create_engine(url, **options)
