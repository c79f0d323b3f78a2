"""Zoom: the signed-in user (``/v2/users/me``)."""

from __future__ import annotations

from typing import ClassVar

from ..profile_fields import ProfileFields
from ..provider import OAuth2Provider, TokenAuthMethod


class ZoomProvider(OAuth2Provider):
    """Sign in with Zoom.

    Zoom's token endpoint wants the client credentials in an HTTP Basic ``Authorization``
    header, so that is the default here. The profile is ``GET https://api.zoom.us/v2/users/me``.
    """

    __slots__ = ()

    default_api_url: ClassVar[str | None] = "https://api.zoom.us/v2/users/me"
    default_token_auth_method: ClassVar[TokenAuthMethod] = "client_secret_basic"  # noqa: S105
    profile_fields: ClassVar[ProfileFields] = ProfileFields(
        provider_key="id",
        first_name="first_name",
        last_name="last_name",
        full_name="display_name",
        email="email",
        avatar_url="pic_url",
    )
