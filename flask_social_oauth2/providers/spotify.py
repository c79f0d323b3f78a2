"""Spotify: the current user's profile."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import ProviderFacts

FACTS: Final = ProviderFacts(
    name="spotify",
    title="Spotify",
    class_name="SpotifyProvider",
    authorization_url="https://accounts.spotify.com/authorize",
    token_url="https://accounts.spotify.com/api/token",
    profile_url="https://api.spotify.com/v1/me",
    scope=("user-read-email", "user-read-private"),
    profile=ProfileFields(
        provider_key="id",
        full_name="display_name",
        email="email",
        # Spotify's documentation: "This email address is unverified".
        email_verified=False,
        avatar_url="images.0.url",
    ),
    api_base="https://api.spotify.com/v1/",
    docs="""\
Create an app in the [Spotify developer dashboard](https://developer.spotify.com/dashboard) and
add the callback under *Redirect URIs*. The e-mail address needs `user-read-email`; Spotify
documents it as unverified, so `email_verified` is `False`. The avatar is the first of
`images`.
""",
)
