"""Mastodon: the account of the token on the configured server."""

from __future__ import annotations

from typing import ClassVar

from ..profile_fields import ProfileFields
from ..provider import OAuth2Provider
from ..settings import OAuth2Settings
from ._common import origin


class MastodonProvider(OAuth2Provider):
    """Sign in with a Mastodon server.

    Each block is one Mastodon server: without ``apiURL`` the profile address is
    ``/api/v1/accounts/verify_credentials`` on the host of ``accessTokenURL``. The account
    ``id`` is unique on that server only, which is why users are keyed by provider name and
    id. Mastodon gives no e-mail address and no first/last name; ``full_name`` is the display
    name, else the user name.
    """

    __slots__ = ()

    profile_fields: ClassVar[ProfileFields] = ProfileFields(
        provider_key="id", full_name=("display_name", "username"), avatar_url="avatar"
    )

    @classmethod
    def default_profile_url_for(cls, settings: OAuth2Settings) -> str | None:
        return f"{origin(settings.access_token_url)}/api/v1/accounts/verify_credentials"
