"""Sign in with OAuth 2.0 providers in Flask.

The public names are imported on first use (PEP 562), so that importing a submodule, such
as the pytest plugin that every test run of a project loads, costs nothing else.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config.settings import OAuth2Info, OAuth2Settings, SocialProfile
    from .extension import SocialOAuth2
    from .providers.oauth2 import OAuth2Provider, SocialProvider

__all__ = [
    "OAuth2Info",
    "OAuth2Provider",
    "OAuth2Settings",
    "SocialOAuth2",
    "SocialProfile",
    "SocialProvider",
]

_HOMES = {
    "OAuth2Info": "config.settings",
    "OAuth2Provider": "providers.oauth2",
    "OAuth2Settings": "config.settings",
    "SocialOAuth2": "extension",
    "SocialProfile": "config.settings",
    "SocialProvider": "providers.oauth2",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
