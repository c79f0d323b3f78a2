"""Twitch: Helix ``Get Users`` for the token's user."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ..profile_fields import ProfileFields
from ..provider import OAuth2Provider
from ..settings import OAuth2Info
from ._common import require_profile_url


class TwitchProvider(OAuth2Provider):
    """Sign in with Twitch.

    Every Helix API call must name the application in a ``Client-Id`` header (the block's
    ``clientID``) beside the bearer token. ``GET https://api.twitch.tv/helix/users`` without
    parameters answers ``{"data": [<the token's user>]}``; the e-mail address needs the
    ``user:read:email`` scope.
    """

    __slots__ = ()

    default_api_url: ClassVar[str | None] = "https://api.twitch.tv/helix/users"
    profile_fields: ClassVar[ProfileFields] = ProfileFields(
        provider_key="data.0.id",
        full_name=("data.0.display_name", "data.0.login"),
        email="data.0.email",
        avatar_url="data.0.profile_image_url",
    )

    def fetch_profile(self, info: OAuth2Info) -> Mapping[str, Any]:
        raw: Mapping[str, Any] = self.request_json(
            "GET",
            require_profile_url(self),
            info,
            headers={"Client-Id": self.settings.client_id},
        )
        return raw
