"""Sign in with OAuth 2.0 providers in Flask."""

from __future__ import annotations

from .extension import SocialOAuth2
from .provider import OAuth2Provider, SocialProvider
from .settings import OAuth2Info, OAuth2Settings, SocialProfile

__all__ = [
    "OAuth2Info",
    "OAuth2Provider",
    "OAuth2Settings",
    "SocialOAuth2",
    "SocialProfile",
    "SocialProvider",
]
