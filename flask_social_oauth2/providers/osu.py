"""osu!: the API v2 ``/me``."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import ProviderFacts

FACTS: Final = ProviderFacts(
    name="osu",
    title="osu!",
    class_name="OsuProvider",
    authorization_url="https://osu.ppy.sh/oauth/authorize",
    token_url="https://osu.ppy.sh/oauth/token",
    profile_url="https://osu.ppy.sh/api/v2/me",
    scope=("identify",),
    profile=ProfileFields(provider_key="id", username="username", avatar_url="avatar_url"),
    api_base="https://osu.ppy.sh/api/v2/",
    docs="""\
Register an OAuth application under *OAuth* in your [osu! account settings](https://osu.ppy.sh/home/account/edit#oauth).
The profile is `GET /api/v2/me` (`identify`, always granted): `provider_key` is the numeric
`id` as a string, `username` the user name. osu! has no separate display name (`full_name` is
`None`) and no e-mail address anywhere in its API.
""",
)
