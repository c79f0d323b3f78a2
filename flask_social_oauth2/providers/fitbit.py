"""Fitbit (legacy Web API): the user's profile."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import ProviderFacts

FACTS: Final = ProviderFacts(
    name="fitbit",
    title="Fitbit (legacy)",
    class_name="FitbitProvider",
    authorization_url="https://www.fitbit.com/oauth2/authorize",
    token_url="https://api.fitbit.com/oauth2/token",
    profile_url="https://api.fitbit.com/1/user/-/profile.json",
    scope=("profile",),
    client_auth="client_secret_basic",
    profile=ProfileFields(
        provider_key=("user.encodedId", "token:user_id"),
        first_name="user.firstName",
        last_name="user.lastName",
        full_name=("user.fullName", "user.displayName"),
        avatar_url=("user.avatar640", "user.avatar150", "user.avatar"),
    ),
    api_base="https://api.fitbit.com/",
    revocation_url="https://api.fitbit.com/oauth2/revoke",
    docs="""\
**Legacy.** Google announced that the legacy Fitbit Web API is turned off on October 30, 2026
(support ended September 30, 2026) in favour of the Google Health API; these settings are
kept for applications still registered at [dev.fitbit.com](https://dev.fitbit.com/apps) and
have not been checked against a live service since. The token endpoint takes HTTP Basic client
authentication; refresh tokens are single-use (each refresh answers a new pair: store the one
`refresh()` returns). The profile is `GET /1/user/-/profile.json`: `provider_key` is the
`encodedId` (also the token answer's `user_id`), `full_name` the `fullName`, else the
`displayName`. Fitbit's profile has no e-mail address.
""",
)
