"""X (Twitter): API v2 ``/2/users/me``."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import Param, ProviderFacts

FACTS: Final = ProviderFacts(
    name="twitter",
    title="X (Twitter)",
    class_name="TwitterProvider",
    authorization_url="https://x.com/i/oauth2/authorize",
    token_url="https://api.x.com/2/oauth2/token",
    profile_url="https://api.x.com/2/users/me",
    scope=("users.read", "tweet.read"),
    client_auth="client_secret_basic",
    profile=ProfileFields(
        provider_key="data.id",
        username="data.username",
        full_name="data.name",
        avatar_url="data.profile_image_url",
    ),
    profile_params=(Param("user.fields", "profile_image_url", "userFields"),),
    api_base="https://api.x.com/2/",
    revocation_url="https://api.x.com/2/oauth2/revoke",
    docs="""\
In the [X developer portal](https://developer.x.com/en/portal/dashboard) set up *User
authentication* for your app with type *Web App* (a confidential client) and the callback URI.
This is OAuth 2.0 with PKCE (always sent); the token endpoint is called with HTTP Basic client
authentication as X requires for confidential clients. The profile is `/2/users/me` with
`user.fields=profile_image_url` (`customProperties.userFields` overrides it). X gives no
e-mail address and no first/last name; `username` is the handle.
""",
)
