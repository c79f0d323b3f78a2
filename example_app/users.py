"""The example's own users: a table in the app's SQLite file, and Flask-Login's user class.

A real app has its users already; what the example shows is how an identity at a provider
(``provider`` + ``provider_key``) is linked to one of them with ``social.link``.
"""

from __future__ import annotations

import threading
from typing import Final

import sqlalchemy as sa
from flask import current_app
from flask_login import UserMixin

from flask_social_oauth2.tokens.sql import SQLAlchemyTokenStore

TABLE: Final = sa.Table(
    "example_users",
    sa.MetaData(),
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(200), nullable=False),
)


class User(UserMixin):  # type: ignore[misc]  # Flask-Login is untyped
    """A user of the example app.

    :param user_id: The user's id, as the str Flask-Login and ``social.link`` keep.
    :param name: The name shown on the account page.
    """

    def __init__(self, user_id: str, name: str) -> None:
        self.id = user_id
        self.name = name


class Users:
    """The users table, in the database of the app's SQL token store (one SQLite file)."""

    def __init__(self) -> None:
        self._ready: set[int] = set()
        self._lock = threading.Lock()

    def _engine(self) -> sa.Engine:
        store = current_app.extensions["social_oauth2"].token_store
        assert isinstance(store, SQLAlchemyTokenStore), "the example keeps tokens in SQL"
        engine = store.engine
        with self._lock:
            if id(engine) not in self._ready:
                TABLE.metadata.create_all(engine, checkfirst=True)
                self._ready.add(id(engine))
        return engine

    def get(self, user_id: str) -> User | None:
        """The user ``user_id``, or ``None``."""
        if not user_id.isdigit():
            return None
        with self._engine().connect() as connection:
            row = connection.execute(
                sa.select(TABLE.c.name).where(TABLE.c.id == int(user_id))
            ).first()
        return None if row is None else User(user_id, row.name)

    def create(self, name: str) -> User:
        """A new user named ``name``."""
        with self._engine().begin() as connection:
            result = connection.execute(sa.insert(TABLE).values(name=name[:200]))
            (user_id,) = result.inserted_primary_key or (None,)
        return User(str(user_id), name)
