"""The session index: which browser sessions of the app signed in with which provider session,
so that a provider's logout (back-channel or front-channel) can end them, in every process
that shares the store.

Each sign-in whose ID token was verified is one row (provider, ``iss``, ``sub``, ``sid``, the ID
token's algorithm, a random local session id that the browser's Flask session carries, the
time); a logout marks the matching rows ended, and the browser's next request, in whichever
process, finds its row ended and signs out. The ``jti`` of each logout token accepted is kept
until the token expires, so that a replay to another process is refused too.

This module is the protocol and the record; ``flask_social_oauth2.tokens.sql_sessions``
keeps them in SQL tables (for :class:`~flask_social_oauth2.tokens.SQLAlchemyTokenStore`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class IndexedSession:
    """One sign-in of a browser session, as the index keeps it."""

    #: The random id the browser's Flask session carries.
    local_id: str
    #: The provider's name (its configuration block).
    provider: str
    #: The ID token's ``iss``.
    iss: str
    #: The ID token's ``sub``.
    sub: str
    #: The ID token's ``sid``, when it had one.
    sid: str | None
    #: The algorithm the ID token was signed with (a logout token must use the same).
    alg: str
    #: When the browser signed in (seconds since the epoch).
    signed_in_at: float
    #: When the row may go (the Flask session's lifetime after the sign-in).
    expires_at: float

    def __repr__(self) -> str:
        return (
            f"IndexedSession(local_id='***', provider={self.provider!r}, iss={self.iss!r},"
            f" sub={self.sub!r}, sid={'***' if self.sid else None!r}, alg={self.alg!r})"
        )


@runtime_checkable
class SessionIndex(Protocol):
    """What a token store implements to take part in back-channel and front-channel logout
    (:class:`~flask_social_oauth2.tokens.SQLAlchemyTokenStore` does). Called in an app context.
    """

    def record_session(self, session: IndexedSession) -> None:
        """Keep ``session`` (and drop expired rows)."""

    def take_ended_sessions(self, local_ids: Sequence[str]) -> list[IndexedSession]:
        """Those of ``local_ids`` whose session the provider ended, each returned once by any
        process: they leave the index."""

    def session_algorithms(
        self, provider: str, iss: str, sub: str | None, sid: str | None
    ) -> frozenset[str]:
        """The ID token algorithms of the live sessions that :meth:`end_sessions` would end."""

    def end_sessions(self, provider: str, iss: str, sub: str | None, sid: str | None) -> int:
        """Mark ended every live session of ``provider`` and ``iss`` with ``sid`` (and ``sub``
        when given too), or, with ``sub`` alone, every one of ``sub``; how many."""

    def remember_logout_token(self, iss: str, jti: str, expires_at: float) -> bool:
        """Keep ``jti`` of ``iss`` until ``expires_at``: ``False`` when it was kept already (a
        replay), by any process."""
