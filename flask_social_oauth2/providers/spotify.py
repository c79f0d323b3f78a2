"""Spotify: the current user's profile."""

from __future__ import annotations

from typing import ClassVar

from ..profile_fields import ProfileFields
from ..provider import OAuth2Provider


class SpotifyProvider(OAuth2Provider):
    """Sign in with Spotify.

    The profile is ``GET https://api.spotify.com/v1/me``; the e-mail address needs the
    ``user-read-email`` scope, the avatar is the first of ``images``.
    """

    __slots__ = ()

    default_api_url: ClassVar[str | None] = "https://api.spotify.com/v1/me"
    profile_fields: ClassVar[ProfileFields] = ProfileFields(
        provider_key="id", full_name="display_name", email="email", avatar_url="images.0.url"
    )
