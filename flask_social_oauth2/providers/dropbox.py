"""Dropbox: the current account (an RPC endpoint called with POST)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ..profile_fields import ProfileFields
from ..provider import OAuth2Provider
from ..settings import OAuth2Info
from ._common import require_profile_url


class DropboxProvider(OAuth2Provider):
    """Sign in with Dropbox.

    Dropbox's ``users/get_current_account`` is an RPC endpoint: it must be called with
    ``POST``, and since it takes no argument its body is the JSON ``null`` (an empty body
    with ``Content-Type: application/json`` is refused as undecodable JSON).
    """

    __slots__ = ()

    default_api_url: ClassVar[str | None] = "https://api.dropboxapi.com/2/users/get_current_account"
    profile_fields: ClassVar[ProfileFields] = ProfileFields(
        provider_key="account_id",
        first_name="name.given_name",
        last_name="name.surname",
        full_name="name.display_name",
        email="email",
        avatar_url="profile_photo_url",
    )

    def fetch_profile(self, info: OAuth2Info) -> Mapping[str, Any]:
        raw: Mapping[str, Any] = self.request_json(
            "POST",
            require_profile_url(self),
            info,
            headers={"Content-Type": "application/json"},
            data="null",
        )
        return raw
