"""Strava: the athlete, sent with the token."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import ProviderFacts

FACTS: Final = ProviderFacts(
    name="strava",
    title="Strava",
    class_name="StravaProvider",
    authorization_url="https://www.strava.com/oauth/authorize",
    token_url="https://www.strava.com/oauth/token",
    profile_url="https://www.strava.com/api/v3/athlete",
    scope=("read",),
    scope_separator=",",
    profile=ProfileFields(
        provider_key="id",
        username="username",
        first_name="firstname",
        last_name="lastname",
        avatar_url=("profile", "profile_medium"),
    ),
    profile_in_token_answer="athlete",
    api_base="https://www.strava.com/api/v3/",
    init_authorization_params={"approval_prompt": "auto"},
    docs="""\
Create an API application on [strava.com/settings/api](https://www.strava.com/settings/api);
*Authorization Callback Domain* is your host name. Strava sends the athlete with the token, so
the profile is read from the token answer (`info.params["athlete"]`) without another request;
only if it is missing is `/api/v3/athlete` called. Strava gives no e-mail address;
`full_name` is first and last name joined; a user without a photo (a relative placeholder
path) has no `avatar_url`. Strava separates scopes with commas (`read,activity:read`).
""",
)
