"""The session index in SQL tables beside the identities (see :mod:`.session_index`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine

from ..errors import TokenStoreUnavailableError
from .session_index import IndexedSession

#: The sessions table's default name.
SESSIONS_TABLE: Final = "social_oauth2_sessions"
#: The table of logout tokens seen (their ``jti``), by default.
LOGOUT_TOKENS_TABLE: Final = "social_oauth2_logout_tokens"


def sessions_table(metadata: sa.MetaData, name: str = SESSIONS_TABLE) -> sa.Table:
    """The session index's table, for an app that creates it with its own migrations."""
    return sa.Table(
        name,
        metadata,
        sa.Column("local_id", sa.String(64), primary_key=True),
        sa.Column("provider", sa.String(64), nullable=False),
        sa.Column("iss", sa.String(512), nullable=False),
        sa.Column("sub", sa.String(255), nullable=False),
        sa.Column("sid", sa.String(255), nullable=True),
        sa.Column("alg", sa.String(16), nullable=False),
        sa.Column("signed_in_at", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False),
        sa.Column("ended_at", sa.Float, nullable=True),
        sa.Index(f"ix_{name}_sid", "provider", "sid"),
        sa.Index(f"ix_{name}_sub", "provider", "sub"),
    )


def logout_tokens_table(metadata: sa.MetaData, name: str = LOGOUT_TOKENS_TABLE) -> sa.Table:
    """The table of the logout tokens accepted (``iss``, ``jti``), until they expire."""
    return sa.Table(
        name,
        metadata,
        sa.Column("iss", sa.String(512), primary_key=True),
        sa.Column("jti", sa.String(255), primary_key=True),
        sa.Column("expires_at", sa.Float, nullable=False),
    )


Transaction = Callable[[str], AbstractContextManager[Connection]]


class SQLSessionIndex:
    """The session index in two tables beside the identities, reached through the store's
    transactions (``transaction(provider)``, which maps database errors to
    :class:`~flask_social_oauth2.errors.TokenStoreUnavailableError`).

    :param sessions: The sessions table.
    :param seen: The table of logout tokens seen.
    :param transaction: The store's transaction maker.
    :param connection: The store's connection maker, for reads.
    :param engine: The store's engine (made at first use).
    """

    def __init__(
        self,
        sessions: sa.Table,
        seen: sa.Table,
        transaction: Transaction,
        connection: Transaction,
        engine: Callable[[], Engine],
    ) -> None:
        self.sessions = sessions
        self.seen = seen
        self._transaction = transaction
        self._connection = connection
        self._engine = engine
        self._compiled: tuple[Any, str, Any] | None = None
        columns = sessions.c
        # Built once (a request of a signed-in browser may run it): one session, the usual
        # case, by primary key; several with IN.
        self._ended_one = sa.select(sessions).where(
            columns.local_id == sa.bindparam("id"), columns.ended_at.is_not(None)
        )
        self._ended_exists = sa.select(columns.local_id).where(
            columns.local_id == sa.bindparam("id"), columns.ended_at.is_not(None)
        )
        self._ended_query = sa.select(sessions).where(
            columns.local_id.in_(sa.bindparam("ids", expanding=True)),
            columns.ended_at.is_not(None),
        )

    def record_session(self, session: IndexedSession) -> None:
        now = time.time()
        with self._transaction(session.provider) as connection:
            connection.execute(sa.delete(self.sessions).where(self.sessions.c.expires_at < now))
            connection.execute(
                sa.insert(self.sessions).values(
                    local_id=session.local_id,
                    provider=session.provider,
                    iss=session.iss,
                    sub=session.sub,
                    sid=session.sid,
                    alg=session.alg,
                    signed_in_at=session.signed_in_at,
                    expires_at=session.expires_at,
                )
            )

    def _one_ended(self, local_id: str) -> bool:
        """Whether the session ``local_id`` was ended, asked through the driver itself: this
        runs on every request of a signed-in browser when the check interval is 0, where the
        statement layer of SQLAlchemy would cost more than the query.

        :raises TokenStoreUnavailableError: when the database fails.
        """
        engine = self._engine()
        compiled = self._compiled
        if compiled is None or compiled[0] is not engine.dialect:
            found = self._ended_exists.compile(dialect=engine.dialect)
            compiled = (engine.dialect, str(found), found.positiontup)
            self._compiled = compiled
        _, statement, positions = compiled
        params: Any = [local_id] if positions else {"id": local_id}
        try:
            raw = engine.raw_connection()
            try:
                cursor = raw.cursor()
                cursor.execute(statement, params)
                ended = cursor.fetchone() is not None
                cursor.close()
            finally:
                raw.close()
        except engine.dialect.loaded_dbapi.Error as error:
            raise TokenStoreUnavailableError(
                "", f"the token store's database failed ({type(error).__name__})"
            ) from None
        return ended

    def take_ended_sessions(self, local_ids: Sequence[str]) -> list[IndexedSession]:
        if not local_ids or (len(local_ids) == 1 and not self._one_ended(local_ids[0])):
            return []
        with self._connection("") as connection:
            if len(local_ids) == 1:
                rows = connection.execute(self._ended_one, {"id": local_ids[0]}).all()
            else:
                rows = connection.execute(self._ended_query, {"ids": list(local_ids)}).all()
        taken = []
        for row in rows:
            with self._transaction(row.provider) as connection:
                gone = connection.execute(
                    sa.delete(self.sessions).where(self.sessions.c.local_id == row.local_id)
                )
            if gone.rowcount == 1:  # another process that found it too deleted nothing
                taken.append(
                    IndexedSession(
                        row.local_id,
                        row.provider,
                        row.iss,
                        row.sub,
                        row.sid,
                        row.alg,
                        row.signed_in_at,
                        row.expires_at,
                    )
                )
        return taken

    def _matching(
        self, provider: str, iss: str, sub: str | None, sid: str | None
    ) -> list[sa.ColumnElement[bool]]:
        columns = self.sessions.c
        where = [
            columns.provider == provider,
            columns.iss == iss,
            columns.ended_at.is_(None),
            columns.expires_at >= time.time(),
        ]
        if sid is not None:
            where.append(columns.sid == sid)
        if sub is not None:
            where.append(columns.sub == sub)
        if sid is None and sub is None:
            where.append(sa.false())
        return where

    def session_algorithms(
        self, provider: str, iss: str, sub: str | None, sid: str | None
    ) -> frozenset[str]:
        with self._transaction(provider) as connection:
            found = connection.execute(
                sa.select(self.sessions.c.alg)
                .distinct()
                .where(*self._matching(provider, iss, sub, sid))
            ).scalars()
            return frozenset(found)

    def end_sessions(self, provider: str, iss: str, sub: str | None, sid: str | None) -> int:
        with self._transaction(provider) as connection:
            ended = connection.execute(
                sa.update(self.sessions)
                .where(*self._matching(provider, iss, sub, sid))
                .values(ended_at=time.time())
            )
            return int(ended.rowcount or 0)

    def remember_logout_token(self, iss: str, jti: str, expires_at: float) -> bool:
        table = self.seen
        with self._transaction("") as connection:
            connection.execute(sa.delete(table).where(table.c.expires_at < time.time()))
            dialect = connection.dialect.name
            values = {"iss": iss, "jti": jti, "expires_at": expires_at}
            if dialect in ("postgresql", "sqlite"):
                insert = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(table)
                added = connection.execute(
                    insert.values(**values).on_conflict_do_nothing().returning(table.c.jti)
                ).first()
                return added is not None
            seen = connection.execute(
                sa.select(table.c.jti).where(table.c.iss == iss, table.c.jti == jti)
            ).first()
            if seen is not None:
                return False
            connection.execute(sa.insert(table).values(**values))
            return True
