"""Built-in providers: one declarative :class:`ProviderFacts` each, in one module per provider.

A configuration block whose name is a key of :data:`BUILTIN_PROVIDERS` gets that provider's
class; any other name gets the generic
:class:`~flask_social_oauth2.providers.oauth2.OAuth2Provider`.
A block of another name can use a built-in class through ``SOCIAL_OAUTH2_PROVIDER_CLASSES``
(e.g. ``{"github-enterprise": "github"}``) or ``SocialOAuth2(provider_classes=...)``.

Every built-in class is a :class:`BuiltinProvider` driven by its facts; only the providers that
truly behave differently have code of their own (:class:`AppleProvider`,
:class:`BlueskyProvider`,
:class:`FacebookProvider`, :class:`LineProvider`, :class:`LinkedInProvider`,
:class:`VKProvider`), the others' classes are generated. Adding a provider is adding a module
with its ``FACTS`` and naming it in :data:`_DEFINITIONS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from . import (
    amazon,
    atlassian,
    auth0,
    authentiq,
    azure,
    bitbucket,
    cognito,
    dexcom,
    digitalocean,
    discord,
    dropbox,
    fitbit,
    foursquare,
    github,
    gitlab,
    google,
    heroku,
    hubspot,
    instagram,
    kakao,
    keycloak,
    mastodon,
    meetup,
    microsoft,
    naver,
    notion,
    nylas,
    okta,
    orcid,
    osm,
    osu,
    patreon,
    paypal,
    reddit,
    salesforce,
    slack,
    spotify,
    strava,
    tiktok,
    twitch,
    twitter,
    yahoo,
    yandex,
    zoho,
    zoom,
)
from .apple import AppleProvider
from .base import BuiltinProvider, provider_class
from .bluesky import BlueskyProvider
from .facebook import FacebookProvider
from .facts import ProviderFacts, Quirk
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
    "Quirk",
    "VKProvider",
]

#: Each provider: its facts, or its class when it has code of its own.
_DEFINITIONS: Final[tuple[ProviderFacts | type[BuiltinProvider], ...]] = (
    amazon.FACTS,
    AppleProvider,
    atlassian.FACTS,
    auth0.FACTS,
    authentiq.FACTS,
    azure.FACTS,
    bitbucket.FACTS,
    BlueskyProvider,
    cognito.FACTS,
    dexcom.FACTS,
    digitalocean.FACTS,
    discord.FACTS,
    dropbox.FACTS,
    FacebookProvider,
    fitbit.FACTS,
    foursquare.FACTS,
    github.FACTS,
    gitlab.FACTS,
    google.FACTS,
    heroku.FACTS,
    hubspot.FACTS,
    instagram.FACTS,
    kakao.FACTS,
    keycloak.FACTS,
    LineProvider,
    LinkedInProvider,
    mastodon.FACTS,
    meetup.FACTS,
    microsoft.FACTS,
    naver.FACTS,
    notion.FACTS,
    nylas.FACTS,
    okta.FACTS,
    orcid.FACTS,
    osm.FACTS,
    osu.FACTS,
    patreon.FACTS,
    paypal.FACTS,
    reddit.FACTS,
    salesforce.FACTS,
    slack.FACTS,
    spotify.FACTS,
    strava.FACTS,
    tiktok.FACTS,
    twitch.FACTS,
    twitter.FACTS,
    VKProvider,
    yahoo.FACTS,
    yandex.FACTS,
    zoho.FACTS,
    zoom.FACTS,
)


def _class_of(definition: ProviderFacts | type[BuiltinProvider]) -> type[BuiltinProvider]:
    return provider_class(definition) if isinstance(definition, ProviderFacts) else definition


#: Provider name -> class, read-only. The names are the configuration block names that select
#: each class.
BUILTIN_PROVIDERS: Final[Mapping[str, type[BuiltinProvider]]] = MappingProxyType(
    {cls.facts.name: cls for cls in map(_class_of, _DEFINITIONS)}
)
#: Provider name -> its facts, read-only.
PROVIDER_FACTS: Final[Mapping[str, ProviderFacts]] = MappingProxyType(
    {name: cls.facts for name, cls in BUILTIN_PROVIDERS.items()}
)
