"""Yahoo: OpenID Connect userinfo."""

from __future__ import annotations

from typing import ClassVar

from ..profile_fields import OPENID_FIELDS, ProfileFields
from ..provider import OAuth2Provider


class YahooProvider(OAuth2Provider):
    """Sign in with Yahoo.

    The profile is Yahoo's OpenID Connect userinfo (scope ``openid profile email``), read with
    the standard claim names.
    """

    __slots__ = ()

    default_api_url: ClassVar[str | None] = "https://api.login.yahoo.com/openid/v1/userinfo"
    openid_connect: ClassVar[bool] = True
    default_issuer: ClassVar[str | None] = "https://api.login.yahoo.com"
    profile_fields: ClassVar[ProfileFields] = OPENID_FIELDS
