"""Google: OpenID Connect userinfo."""

from __future__ import annotations

from typing import ClassVar

from ..profile_fields import OPENID_FIELDS, ProfileFields
from ..provider import OAuth2Provider


class GoogleProvider(OAuth2Provider):
    """Sign in with Google.

    The profile is Google's OpenID Connect userinfo (scope ``openid email profile``); it has
    no quirks beyond the standard claims.
    """

    __slots__ = ()

    default_api_url: ClassVar[str | None] = "https://openidconnect.googleapis.com/v1/userinfo"
    openid_connect: ClassVar[bool] = True
    default_issuer: ClassVar[str | None] = "https://accounts.google.com"
    extra_id_token_issuers: ClassVar[frozenset[str]] = frozenset({"accounts.google.com"})
    profile_fields: ClassVar[ProfileFields] = OPENID_FIELDS
