"""Built-in providers: one small module each, registered by name in :data:`BUILTIN_PROVIDERS`.

A configuration block whose name is a key of :data:`BUILTIN_PROVIDERS` gets that class; any
other name gets the generic :class:`~flask_social_oauth2.provider.OAuth2Provider`. A block of
another name can use a built-in class through ``SOCIAL_OAUTH2_PROVIDER_CLASSES`` (e.g.
``{"github-enterprise": "github"}``) or ``SocialOAuth2(provider_classes=...)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ..provider import OAuth2Provider
from .amazon import AmazonProvider
from .auth0 import Auth0Provider
from .bitbucket import BitbucketProvider
from .discord import DiscordProvider
from .dropbox import DropboxProvider
from .facebook import FacebookProvider
from .github import GitHubProvider
from .gitlab import GitLabProvider
from .google import GoogleProvider
from .keycloak import KeycloakProvider
from .linkedin import LinkedInProvider
from .mastodon import MastodonProvider
from .microsoft import MicrosoftProvider
from .okta import OktaProvider
from .patreon import PatreonProvider
from .reddit import RedditProvider
from .slack import SlackProvider
from .spotify import SpotifyProvider
from .strava import StravaProvider
from .twitch import TwitchProvider
from .twitter import TwitterProvider
from .vk import VKProvider
from .yahoo import YahooProvider
from .zoom import ZoomProvider

__all__ = [
    "BUILTIN_PROVIDERS",
    "AmazonProvider",
    "Auth0Provider",
    "BitbucketProvider",
    "DiscordProvider",
    "DropboxProvider",
    "FacebookProvider",
    "GitHubProvider",
    "GitLabProvider",
    "GoogleProvider",
    "KeycloakProvider",
    "LinkedInProvider",
    "MastodonProvider",
    "MicrosoftProvider",
    "OktaProvider",
    "PatreonProvider",
    "RedditProvider",
    "SlackProvider",
    "SpotifyProvider",
    "StravaProvider",
    "TwitchProvider",
    "TwitterProvider",
    "VKProvider",
    "YahooProvider",
    "ZoomProvider",
]

#: Provider name -> class, read-only. The names are the configuration block names that select
#: each class.
BUILTIN_PROVIDERS: Mapping[str, type[OAuth2Provider]] = MappingProxyType(
    {
        "amazon": AmazonProvider,
        "auth0": Auth0Provider,
        "bitbucket": BitbucketProvider,
        "discord": DiscordProvider,
        "dropbox": DropboxProvider,
        "facebook": FacebookProvider,
        "github": GitHubProvider,
        "gitlab": GitLabProvider,
        "google": GoogleProvider,
        "keycloak": KeycloakProvider,
        "linkedin": LinkedInProvider,
        "mastodon": MastodonProvider,
        "microsoft": MicrosoftProvider,
        "okta": OktaProvider,
        "patreon": PatreonProvider,
        "reddit": RedditProvider,
        "slack": SlackProvider,
        "spotify": SpotifyProvider,
        "strava": StravaProvider,
        "twitch": TwitchProvider,
        "twitter": TwitterProvider,
        "vk": VKProvider,
        "yahoo": YahooProvider,
        "zoom": ZoomProvider,
    }
)
