"""OpenStreetMap: the API 0.6 user details."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import ProviderFacts

FACTS: Final = ProviderFacts(
    name="osm",
    title="OpenStreetMap",
    class_name="OpenStreetMapProvider",
    authorization_url="https://www.openstreetmap.org/oauth2/authorize",
    token_url="https://www.openstreetmap.org/oauth2/token",
    profile_url="https://api.openstreetmap.org/api/0.6/user/details.json",
    scope=("read_prefs",),
    profile=ProfileFields(
        provider_key="user.id", username="user.display_name", avatar_url="user.img.href"
    ),
    api_base="https://api.openstreetmap.org/api/0.6/",
    docs="""\
Register an OAuth 2 application under *My Settings → OAuth 2 applications* on
[openstreetmap.org](https://www.openstreetmap.org/oauth2/applications) (OAuth 1.0a is gone).
The profile is API 0.6's `GET /user/details.json` (`read_prefs`): `provider_key` is `user.id`,
`username` the `display_name` (OpenStreetMap has no separate real name, so `full_name` is
`None`), `avatar_url` `user.img.href`; the API gives no e-mail address. Tokens do not expire.
An OpenID Connect userinfo endpoint could not be confirmed from OpenStreetMap's documentation,
so the API 0.6 profile is used. The development server is
`https://master.apis.dev.openstreetmap.org` (set all three addresses).
""",
)
