"""The account page's contents: the signed-in user, the identities linked to them (with what
each can do: call its provider's API, be unlinked) and the providers they can still link.

Every action on an identity first checks that the signed-in user owns it (:func:`owns`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from flask import Flask, current_app, flash, g, get_flashed_messages, session
from flask_login import current_user, logout_user

from flask_social_oauth2 import OAuth2Info
from flask_social_oauth2.errors import AuthenticationError
from flask_social_oauth2.tokens import refresh_due

from . import bluesky
from .providers import ProviderChoice, label, social

__all__ = [
    "API_CALLS",
    "PROFILE_FIELDS",
    "PROFILE_KEY",
    "ApiAnswer",
    "LinkedIdentity",
    "account",
    "ended_at_provider",
    "note_refresh",
    "owns",
    "shown_handle",
    "shows_identity",
    "token_status",
]

#: Where the example's success handler keeps the profile of the last sign-in in the session.
PROFILE_KEY: Final = "social_profile"
#: What the account page's "Call the API" button asks each provider: a URL relative to the
#: block's API base (``customProperties.apiBaseURL`` or the built-in one), or an absolute one.
API_CALLS: Final[Mapping[str, str]] = {
    "local": "me",
    "local-two": "me",
    "github": "user",
    "google": "https://openidconnect.googleapis.com/v1/userinfo",
    "bluesky": "xrpc/com.atproto.server.getSession",  # on the account's own PDS
}
#: The profile's fields the account page lists, with their labels.
PROFILE_FIELDS: Final = (
    ("provider_id", "Provider"),
    ("provider_key", "Provider key (user id)"),
    ("username", "Username"),
    ("full_name", "Full name"),
    ("first_name", "First name"),
    ("last_name", "Last name"),
    ("email", "E-mail"),
    ("avatar_url", "Avatar URL"),
)


@dataclass(frozen=True)
class ApiAnswer:
    """What the account page shows of an API call."""

    provider: str
    status: int
    body: Any
    refreshed: bool


@dataclass(frozen=True)
class LinkedIdentity:
    """An identity of the signed-in user, as the account page shows it."""

    provider: str
    key: str
    label: str
    can_call: bool
    token_status: str | None


def account() -> dict[str, Any] | None:
    """The signed-in user, their identities and the providers they can still link."""
    if not current_user.is_authenticated:
        return None
    extension = social()
    store = current_app.extensions["social_oauth2"].token_store
    identities = []
    for found in extension.identities(current_user.id):
        try:
            token = store.load(found.provider, found.provider_key)
        except AuthenticationError:
            token = None
        identities.append(
            LinkedIdentity(
                provider=found.provider,
                key=found.provider_key,
                label=label(found.provider)[0],
                can_call=token is not None and found.provider in API_CALLS,
                token_status=token_status(token, time.time()),
            )
        )
    linked = {identity.provider for identity in identities}
    can_link = [
        ProviderChoice(name, *label(name))
        for name, provider in extension.providers.items()
        if name not in linked
        and name != bluesky.PROVIDER  # a form, not a link
        and provider.settings.authorization_url is not None
    ]
    return {
        "name": current_user.name,
        "identities": identities,
        "can_link": can_link,
        "can_link_bluesky": bluesky.PROVIDER in extension.providers
        and bluesky.PROVIDER not in linked,
        "notices": get_flashed_messages(),
    }


def token_status(token: OAuth2Info | None, now: float) -> str | None:
    """What the account page says of an identity's access token at ``now``: how long it stays
    valid, or that it has expired, and whether the next API call renews it first (it has a
    refresh token and is within the refresh leeway). ``None`` when its lifetime is unknown."""
    if token is None or token.expires_at is None:
        return None
    renews = token.refresh_token is not None and refresh_due(token, now)
    if token.expires_at <= now:
        if renews:
            return "access token expired, will refresh on the next call"
        return "access token expired: sign in with it again to call the API"
    left = f"access token valid for {math.ceil(token.expires_at - now)} s"
    return f"{left}, will refresh on the next call" if renews else left


def shows_identity(provider: str, key: str) -> bool:
    """Whether the account page's header shows the identity ``key`` of ``provider``: the
    profile of the last sign-in, kept in the session."""
    data = session.get(PROFILE_KEY)
    return (
        isinstance(data, dict)
        and data.get("provider_id") == provider
        and data.get("provider_key") == key
    )


def shown_handle(data: Mapping[str, Any], name: str) -> str | None:
    """``@username`` under the name, for a profile without an e-mail address (a Bluesky
    handle), unless it is the name shown already."""
    username = data.get("username")
    if not username or data.get("email") or username == name:
        return None
    return f"@{username}"


def owns(provider: str, key: str) -> bool:
    """Whether the signed-in user has the identity ``key`` of ``provider``: another user's
    identity is never reached, whatever the URL says."""
    if not current_user.is_authenticated:
        return False
    found = social().identity(provider, key)
    return found is not None and found.user_id == current_user.id


def note_refresh(app: Flask, **changes: Any) -> None:
    """Receive :data:`~flask_social_oauth2.signals.token_updated`: the API call of this request
    refreshed its token first, and the account page says so."""
    g.example_refreshed = True


def ended_at_provider(app: Flask, provider: str, sub: str, sid: str | None) -> None:
    """Receive :data:`~flask_social_oauth2.signals.provider_logged_out`: the provider ended
    this browser's session there (a back-channel logout, possibly received by another
    process), and the extension has forgotten its identities; end the app's own login too."""
    logout_user()
    flash("Your session at the provider ended: you are signed out.")
