"""Atlassian (Jira, Confluence, ...) 3LO apps: the User Identity API's ``/me``."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import ProviderFacts, Quirk

FACTS: Final = ProviderFacts(
    name="atlassian",
    title="Atlassian",
    class_name="AtlassianProvider",
    authorization_url="https://auth.atlassian.com/authorize",
    token_url="https://auth.atlassian.com/oauth/token",
    profile_url="https://api.atlassian.com/me",
    scope=("read:me", "offline_access"),
    profile=ProfileFields(
        provider_key="account_id",
        username="nickname",
        full_name="name",
        email="email",
        email_verified="email_verified",
        avatar_url="picture",
    ),
    quirks=frozenset({Quirk.JSON_TOKEN_REQUEST}),
    api_base="https://api.atlassian.com/",
    authorization_params={"audience": "api.atlassian.com", "prompt": "consent"},
    docs="""\
Create an OAuth 2.0 (3LO) integration in the [Atlassian developer console](https://developer.atlassian.com/console/myapps/),
add the *User identity API* (`read:me`) and set the callback URL. The authorization request
needs `audience=api.atlassian.com` and Atlassian's examples send `prompt=consent`: both are
sent unless the block's `authorizationParams` sets them. The token request is sent as JSON,
as Atlassian documents it. The profile is `GET https://api.atlassian.com/me`:
`provider_key` is the `account_id`, `username` the `nickname`, `email_verified` what `/me`
says (`None` when it says nothing). With `offline_access` Atlassian issues *rotating* refresh
tokens: each refresh answers a new one and invalidates the old, so store the one `refresh()`
returns. Product APIs need a *cloud id*: list
the sites the user granted with `GET https://api.atlassian.com/oauth/token/accessible-resources`
(not ordered) and call `https://api.atlassian.com/ex/<product>/<cloudid>/...`.
""",
)
