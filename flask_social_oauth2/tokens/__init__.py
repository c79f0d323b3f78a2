"""Where the tokens of signed-in identities are kept, encrypted, and refreshed one at a time.

:class:`TokenStore` is the protocol (:class:`IdentityStore` for stores that link identities
to the app's users); :class:`SessionTokenStore` (the default) keeps tokens in
the Flask session, :class:`SQLAlchemyTokenStore` in a SQL database (the ``[sql]`` extra).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .cipher import InvalidToken, TokenCipher, derive_key
from .identity import Identity, IdentityStore
from .session import SessionTokenStore
from .store import Renew, TokenStore, refresh_due

if TYPE_CHECKING:
    from .sql import SQLAlchemyTokenStore

__all__ = [
    "Identity",
    "IdentityStore",
    "InvalidToken",
    "Renew",
    "SQLAlchemyTokenStore",
    "SessionTokenStore",
    "TokenCipher",
    "TokenStore",
    "derive_key",
    "refresh_due",
]


def __getattr__(name: str) -> Any:
    # SQLAlchemy is optional (the [sql] extra): imported when the SQL store is first named.
    if name == "SQLAlchemyTokenStore":
        from .sql import SQLAlchemyTokenStore

        return SQLAlchemyTokenStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
