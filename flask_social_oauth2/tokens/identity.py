"""Identities linked to the app's users, for stores that keep them (the SQL store)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class Identity:
    """A stored identity: a user's account at a provider, and the app's user it is linked to.

    :param provider: The provider's name, e.g. ``"github"``.
    :param provider_key: The user's immutable id at the provider.
    :param user_id: The app's user id it is linked to, or ``None`` while unlinked.
    """

    provider: str
    provider_key: str
    user_id: str | None


@runtime_checkable
class IdentityStore(Protocol):
    """A token store that also links identities to the app's users
    (:class:`~flask_social_oauth2.tokens.SQLAlchemyTokenStore` is one). Its methods are called
    in an app context."""

    def link(self, provider: str, key: str, user_id: str) -> Identity:
        """Link the identity to ``user_id`` (replacing any earlier link), keeping its tokens;
        an identity not stored yet is stored without tokens."""

    def identity(self, provider: str, key: str) -> Identity | None:
        """The stored identity, or ``None``."""

    def identities(self, user_id: str) -> list[Identity]:
        """The identities linked to ``user_id``, ordered by provider and key."""
