"""HubSpot: the access token's information is the profile."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import ProviderFacts, Quirk

FACTS: Final = ProviderFacts(
    name="hubspot",
    title="HubSpot",
    class_name="HubSpotProvider",
    authorization_url="https://app.hubspot.com/oauth/authorize",
    token_url="https://api.hubapi.com/oauth/v1/token",
    profile_url="https://api.hubapi.com/oauth/v1/access-tokens",
    scope=("oauth",),
    profile=ProfileFields(provider_key="user_id", email="user"),
    quirks=frozenset({Quirk.TOKEN_IN_PROFILE_PATH}),
    api_base="https://api.hubapi.com/",
    docs="""\
Create a public app in your [HubSpot developer account](https://developers.hubspot.com/)
and add the redirect URL. HubSpot has no user profile endpoint; the profile is the access
token's metadata, `GET https://api.hubapi.com/oauth/v1/access-tokens/<token>`: the token is
in that address by HubSpot's design (sent only to `api.hubapi.com`; keep request URLs out of
your logs). `provider_key` is the installing user's `user_id`, `email` the `user`, which
HubSpot does not call verified; `hub_id`/`hub_domain` (the account) stay in `raw`. HubSpot
gives no name or picture. HubSpot deprecates v1 of its OAuth API on February 16, 2027 in
favour of v3 (`/oauth/v3/token`); set `accessTokenURL` to it when you move.
""",
)
