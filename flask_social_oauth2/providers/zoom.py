"""Zoom: the signed-in user (``/v2/users/me``)."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import ProviderFacts

FACTS: Final = ProviderFacts(
    name="zoom",
    title="Zoom",
    class_name="ZoomProvider",
    authorization_url="https://zoom.us/oauth/authorize",
    token_url="https://zoom.us/oauth/token",
    profile_url="https://api.zoom.us/v2/users/me",
    scope=("user:read:user",),
    client_auth="client_secret_basic",
    profile=ProfileFields(
        provider_key="id",
        first_name="first_name",
        last_name="last_name",
        full_name="display_name",
        email="email",
        email_verified="verified",
        avatar_url="pic_url",
    ),
    api_base="https://api.zoom.us/v2/",
    revocation_url="https://zoom.us/oauth/revoke",
    docs="""\
Create a *General App* (user-managed) in the [Zoom App Marketplace](https://marketplace.zoom.us/develop/create)
and add the callback as *OAuth Redirect URL* and to the allow list. Zoom's token endpoint wants
HTTP Basic client authentication, which is the default here. `email_verified` is Zoom's
`verified` (1 or 0). Apps created with classic scopes use `user:read` instead of the granular
`user:read:user`.
""",
)
