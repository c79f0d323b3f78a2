"""Reddit: the signed-in account (``/api/v1/me``)."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import Param, ProviderFacts, Quirk

FACTS: Final = ProviderFacts(
    name="reddit",
    title="Reddit",
    class_name="RedditProvider",
    authorization_url="https://www.reddit.com/api/v1/authorize",
    token_url="https://www.reddit.com/api/v1/access_token",
    profile_url="https://oauth.reddit.com/api/v1/me",
    scope=("identity",),
    client_auth="client_secret_basic",
    profile=ProfileFields(
        provider_key="id", username="name", avatar_url=("icon_img", "snoovatar_img")
    ),
    profile_params=(Param("raw_json", "1"),),
    quirks=frozenset({Quirk.DESCRIPTIVE_USER_AGENT}),
    api_base="https://oauth.reddit.com/",
    revocation_url="https://www.reddit.com/api/v1/revoke_token",
    init_authorization_params={"duration": "temporary"},
    init_custom_properties={
        "userAgent": "web:com.example.myapp:v1.0.0 (by /u/your_reddit_username)"
    },
    docs="""\
Create a *web app* on [reddit.com/prefs/apps](https://www.reddit.com/prefs/apps); the client
id is the string under the app's name. Reddit refuses or throttles generic User-Agents, so the
token request and the profile call send a descriptive one: `customProperties.userAgent`
(Reddit's format is `<platform>:<app ID>:<version> (by /u/<reddit username>)`), else
`web:<clientID>:<package version> (flask-social-oauth2)`. The token endpoint is called with
HTTP Basic client authentication; the profile call asks for `raw_json=1` so that URLs come
without HTML escaping. Reddit accounts have no e-mail address or real name: `username` is the
user name and `full_name` is `None`. Reddit's authorization request needs `duration`.
""",
)
