"""Discord: the current user (``/users/@me``)."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Final
from urllib.parse import quote

from ..profile_fields import ProfileFields, first_text
from ..provider import OAuth2Provider
from ..settings import OAuth2Info, SocialProfile

#: Discord's CDN address of a user's avatar.
AVATAR_URL: Final = "https://cdn.discordapp.com/avatars/{id}/{hash}.png"


class DiscordProvider(OAuth2Provider):
    """Sign in with Discord.

    The profile is ``GET https://discord.com/api/v10/users/@me`` (scopes ``identify email``).
    Discord sends only the avatar's hash; the picture's address is built from the user id and
    that hash (``https://cdn.discordapp.com/avatars/{id}/{hash}.png``), and is ``None`` when the
    user has no avatar. ``full_name`` is the display name (``global_name``), else the user name.
    """

    __slots__ = ()

    default_api_url: ClassVar[str | None] = "https://discord.com/api/v10/users/@me"
    profile_fields: ClassVar[ProfileFields] = ProfileFields(
        provider_key="id", full_name=("global_name", "username"), email="email"
    )

    def parse_profile(self, raw: Any, info: OAuth2Info) -> SocialProfile:
        profile = super().parse_profile(raw, info)
        avatar_hash = first_text(raw, "avatar")
        if avatar_hash is None:
            return profile
        url = AVATAR_URL.format(
            id=quote(profile.provider_key, safe=""), hash=quote(avatar_hash, safe="")
        )
        return dataclasses.replace(profile, avatar_url=url)
