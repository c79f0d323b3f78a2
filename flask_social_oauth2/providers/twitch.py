"""Twitch: Helix ``Get Users`` for the token's user."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import ProviderFacts, Quirk

FACTS: Final = ProviderFacts(
    name="twitch",
    title="Twitch",
    class_name="TwitchProvider",
    authorization_url="https://id.twitch.tv/oauth2/authorize",
    token_url="https://id.twitch.tv/oauth2/token",
    profile_url="https://api.twitch.tv/helix/users",
    scope=("user:read:email",),
    profile=ProfileFields(
        provider_key="data.0.id",
        username="data.0.login",
        full_name="data.0.display_name",
        email="data.0.email",
        # Twitch's documentation: "The user's verified email address".
        email_verified=True,
        avatar_url="data.0.profile_image_url",
    ),
    quirks=frozenset({Quirk.CLIENT_ID_HEADER}),
    api_base="https://api.twitch.tv/helix/",
    revocation_url="https://id.twitch.tv/oauth2/revoke",
    docs="""\
Register an application in the [Twitch developer console](https://dev.twitch.tv/console/apps)
(category *Website Integration*, client type *Confidential*). Every Helix call carries a
`Client-Id` header with the block's `clientID` beside the bearer token. The e-mail address
needs `user:read:email`; Twitch gives only a verified one. `username` is the `login`.
""",
)
