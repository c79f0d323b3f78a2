"""Discord: the current user (``/users/@me``)."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import ProviderFacts

FACTS: Final = ProviderFacts(
    name="discord",
    title="Discord",
    class_name="DiscordProvider",
    authorization_url="https://discord.com/oauth2/authorize",
    token_url="https://discord.com/api/oauth2/token",
    profile_url="https://discord.com/api/v10/users/@me",
    scope=("identify", "email"),
    profile=ProfileFields(
        provider_key="id",
        username="username",
        full_name="global_name",
        email="email",
        email_verified="verified",
        avatar_url="avatar",
        avatar_url_template="https://cdn.discordapp.com/avatars/{key}/{value}.png",
    ),
    api_base="https://discord.com/api/v10/",
    revocation_url="https://discord.com/api/oauth2/token/revoke",
    docs="""\
Create an application in the [Discord Developer Portal](https://discord.com/developers/applications)
(OAuth2 → Redirects). Discord sends only the avatar's hash; the picture URL is
`https://cdn.discordapp.com/avatars/{id}/{hash}.png`, or `None` when the user has no avatar.
`full_name` is the display name (`global_name`), `username` the user name; `email_verified` is
Discord's `verified`.
""",
)
