"""Built-in providers: one declarative :class:`ProviderFacts` each, in one module per provider.

A configuration block whose name is a key of :data:`BUILTIN_PROVIDERS` gets that provider's
class; any other name gets the generic
:class:`~flask_social_oauth2.providers.oauth2.OAuth2Provider`.
A block of another name can use a built-in class through ``SOCIAL_OAUTH2_PROVIDER_CLASSES``
(e.g. ``{"github-enterprise": "github"}``) or ``SocialOAuth2(provider_classes=...)``.

Every built-in class is a :class:`BuiltinProvider` bound to its facts, made by
:func:`~.base.provider_class` and holding no code; the providers that truly behave differently
add one hooks object (:mod:`~flask_social_oauth2.providers.hooks`): Apple, Bluesky, Facebook,
LINE, LinkedIn and VK, each in its own module. Adding a provider is adding a module with its
``FACTS`` (and hooks, if it needs any) and naming it in :data:`_DEFINITIONS`.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final

from .base import BuiltinProvider, provider_class
from .facts import ProviderFacts, Quirk
from .hooks import ProviderHooks

if TYPE_CHECKING:
    from .apple import AppleProvider
    from .bluesky import BlueskyProvider
    from .facebook import FacebookProvider
    from .line import LineProvider
    from .linkedin import LinkedInProvider
    from .vk import VKProvider

__all__ = [
    "BUILTIN_PROVIDERS",
    "PROVIDER_FACTS",
    "AppleProvider",
    "BlueskyProvider",
    "BuiltinProvider",
    "FacebookProvider",
    "LineProvider",
    "LinkedInProvider",
    "ProviderFacts",
    "ProviderHooks",
    "Quirk",
    "VKProvider",
]

#: Each built-in provider's name, which is also its module's: the module holds its ``FACTS``
#: (and, for a provider with hooks, its class). A module is imported when its provider is
#: first named (a block of that name, a ``SOCIAL_OAUTH2_PROVIDER_CLASSES`` entry, a lookup),
#: so an app with one block does not load fifty.
_DEFINITIONS: Final[tuple[str, ...]] = (
    *("amazon", "apple", "atlassian", "auth0", "authentiq", "azure", "bitbucket", "bluesky"),
    *("cognito", "dexcom", "digitalocean", "discord", "dropbox", "facebook", "fitbit"),
    *("foursquare", "github", "gitlab", "google", "heroku", "hubspot", "instagram", "kakao"),
    *("keycloak", "line", "linkedin", "mastodon", "meetup", "microsoft", "naver", "notion"),
    *("nylas", "okta", "orcid", "osm", "osu", "patreon", "paypal", "reddit", "salesforce"),
    *("slack", "spotify", "strava", "tiktok", "twitch", "twitter", "vk", "yahoo", "yandex"),
    *("zoho", "zoom"),
)
#: The classes with hooks, by the name the package exports them under.
_HOOKED: Final[Mapping[str, str]] = {
    "AppleProvider": "apple",
    "BlueskyProvider": "bluesky",
    "FacebookProvider": "facebook",
    "LineProvider": "line",
    "LinkedInProvider": "linkedin",
    "VKProvider": "vk",
}


class _Names:
    """The keys of the two read-only mappings below: the built-in providers' names."""

    __slots__ = ()

    def __contains__(self, name: object) -> bool:
        return name in _DEFINITIONS

    def __iter__(self) -> Iterator[str]:
        return iter(_DEFINITIONS)

    def __len__(self) -> int:
        return len(_DEFINITIONS)


class _Registry(_Names, Mapping[str, type[BuiltinProvider]]):
    """Provider name -> class, read-only; a provider's module is imported at its first use."""

    __slots__ = ("_classes", "_lock")

    def __init__(self) -> None:
        self._classes: dict[str, type[BuiltinProvider]] = {}
        self._lock = threading.Lock()

    def __getitem__(self, name: str) -> type[BuiltinProvider]:
        found = self._classes.get(name)
        if found is not None:
            return found
        if name not in _DEFINITIONS:
            raise KeyError(name)
        with self._lock:  # one class per provider, whichever thread asks first
            if name not in self._classes:
                module = importlib.import_module(f"{__name__}.{name}")
                facts: ProviderFacts = module.FACTS
                own = getattr(module, facts.class_name, None)
                self._classes[name] = own if own is not None else provider_class(facts)
            return self._classes[name]

    def __repr__(self) -> str:
        return f"<built-in providers: {', '.join(_DEFINITIONS)}>"


class _Facts(_Names, Mapping[str, ProviderFacts]):
    """Provider name -> its facts, read-only (loaded as :data:`BUILTIN_PROVIDERS` loads)."""

    __slots__ = ()

    def __getitem__(self, name: str) -> ProviderFacts:
        return BUILTIN_PROVIDERS[name].facts


#: Provider name -> class, read-only. The names are the configuration block names that select
#: each class.
BUILTIN_PROVIDERS: Final[Mapping[str, type[BuiltinProvider]]] = _Registry()
#: Provider name -> its facts, read-only.
PROVIDER_FACTS: Final[Mapping[str, ProviderFacts]] = _Facts()


def __getattr__(name: str) -> Any:
    """The classes with hooks (``AppleProvider``, ...), imported at first use."""
    if name in _HOOKED:
        return BUILTIN_PROVIDERS[_HOOKED[name]]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
