"""Auth0: the tenant's OpenID Connect userinfo."""

from __future__ import annotations

from typing import ClassVar

from ..profile_fields import OPENID_FIELDS, ProfileFields
from ..provider import OAuth2Provider
from ..settings import OAuth2Settings
from ._common import origin


class Auth0Provider(OAuth2Provider):
    """Sign in with Auth0.

    Auth0 is per tenant, so there is no fixed profile address: without ``apiURL`` it is
    ``/userinfo`` on the host of ``accessTokenURL`` (``https://<tenant>.auth0.com/oauth/token``
    gives ``https://<tenant>.auth0.com/userinfo``; a custom domain works the same way).
    """

    __slots__ = ()

    profile_fields: ClassVar[ProfileFields] = OPENID_FIELDS
    openid_connect: ClassVar[bool] = True
    issuer_from_token_url = (r"(https?://[^/]+)/oauth/token", r"\1/")

    @classmethod
    def default_profile_url_for(cls, settings: OAuth2Settings) -> str | None:
        return f"{origin(settings.access_token_url)}/userinfo"
