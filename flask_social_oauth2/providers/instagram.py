"""Instagram API with Instagram Login (professional accounts): ``/me``."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import Param, ProviderFacts, Quirk

#: The fields asked for when ``customProperties.fields`` is not set.
DEFAULT_FIELDS: Final = "user_id,username,name,profile_picture_url"

FACTS: Final = ProviderFacts(
    name="instagram",
    title="Instagram",
    class_name="InstagramProvider",
    authorization_url="https://api.instagram.com/oauth/authorize",
    token_url="https://api.instagram.com/oauth/access_token",
    profile_url="https://graph.instagram.com/me",
    scope=("instagram_business_basic",),
    scope_separator=",",
    profile=ProfileFields(
        provider_key=("user_id", "id", "token:user_id"),
        username="username",
        full_name="name",
        avatar_url="profile_picture_url",
    ),
    profile_params=(Param("fields", DEFAULT_FIELDS, "fields"),),
    quirks=frozenset({Quirk.TOKEN_ANSWER_IN_DATA_LIST}),
    api_base="https://graph.instagram.com/",
    docs=f"""\
This is the *Instagram API with Instagram Login* (Business Login for Instagram): it signs in
Instagram **professional** (business or creator) accounts. The Basic Display API that other
libraries use for personal accounts is gone since December 4, 2024. Set the app up under
*Instagram → API setup with Instagram login* in [Meta for Developers](https://developers.facebook.com/apps/).
The token answer may come wrapped as `{{"data": [{{"access_token": ..., "user_id": ...}}]}}`
(as Meta documents it) or flat; both are read. The token is short-lived (one hour): exchange
it for a 60-day one with `ig_exchange_token` if you call the API later. The profile is
`GET https://graph.instagram.com/me` with `fields` (`customProperties.fields`, default
`{DEFAULT_FIELDS}`): `provider_key` is `user_id`, `username` the handle. Instagram gives no
e-mail address. Scopes are separated by commas.
""",
)
