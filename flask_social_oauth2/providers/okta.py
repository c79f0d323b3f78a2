"""Okta: the authorization server's OpenID Connect userinfo."""

from __future__ import annotations

from typing import ClassVar

from ..profile_fields import OPENID_FIELDS, ProfileFields
from ..provider import OAuth2Provider
from ..settings import OAuth2Settings
from ._common import origin, token_url_path


class OktaProvider(OAuth2Provider):
    """Sign in with Okta.

    Okta is per organization, so without ``apiURL`` the profile address comes from
    ``accessTokenURL``: a token endpoint ``https://<org>.okta.com/oauth2/<server>/v1/token``
    (a custom authorization server such as ``default``) or ``.../oauth2/v1/token`` (the org
    server) gives the ``/v1/userinfo`` beside it; any other path gives
    ``https://<host>/oauth2/v1/userinfo``.
    """

    __slots__ = ()

    profile_fields: ClassVar[ProfileFields] = OPENID_FIELDS
    openid_connect: ClassVar[bool] = True
    issuer_from_token_url = (
        r"(https?://[^/]+)(?:/oauth2(?=/v1/)|(/oauth2/[^/]+))/v1/token",
        r"\1\2",
    )

    @classmethod
    def default_profile_url_for(cls, settings: OAuth2Settings) -> str | None:
        path = token_url_path(settings)
        if path.endswith("/v1/token"):
            return f"{origin(settings.access_token_url)}{path[: -len('token')]}userinfo"
        return f"{origin(settings.access_token_url)}/oauth2/v1/userinfo"
