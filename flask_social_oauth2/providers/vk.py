"""VK (VKontakte): ``users.get``, or VK ID's ``user_info``, with the token in a form body."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlsplit

from ..errors import ProfileRetrievalError
from ..flow import safe_error_code
from ..profile_fields import ProfileFields, first_text
from ..settings import OAuth2Info, SocialProfile
from .base import BuiltinProvider
from .facts import Param, PropertyRule, ProviderFacts, Quirk

#: The VK API version sent when ``customProperties.apiVersion`` is not set.
DEFAULT_API_VERSION: Final = "5.199"
#: The user fields asked for when ``customProperties.fields`` is not set.
DEFAULT_FIELDS: Final = "photo_200,screen_name"
#: The path of VK ID's profile method (``https://id.vk.com/oauth2/user_info``).
VK_ID_USER_INFO: Final = "/oauth2/user_info"

FACTS: Final = ProviderFacts(
    name="vk",
    title="VK",
    class_name="VKProvider",
    code=True,
    code_quirks=("VK ID `user_info` answers", "profile id checked against the token answer"),
    authorization_url="https://oauth.vk.com/authorize",
    token_url="https://oauth.vk.com/access_token",
    profile_url="https://api.vk.com/method/users.get",
    scope=("email",),
    scope_separator=",",
    profile=ProfileFields(
        provider_key=("response.0.id", "user.user_id"),
        username="response.0.screen_name",
        first_name=("response.0.first_name", "user.first_name"),
        last_name=("response.0.last_name", "user.last_name"),
        email=("token:email", "user.email"),
        avatar_url=("response.0.photo_200", "response.0.photo_100", "user.avatar"),
    ),
    profile_method="POST",
    profile_form=(
        Param("v", DEFAULT_API_VERSION, "apiVersion"),
        Param("fields", DEFAULT_FIELDS, "fields"),
    ),
    quirks=frozenset({Quirk.TOKEN_IN_FORM_BODY, Quirk.ERROR_OBJECT_IS_ERROR}),
    property_rules=(PropertyRule("apiVersion", "pattern", (r"\d+\.\d+", DEFAULT_API_VERSION)),),
    api_base="https://api.vk.com/method/",
    init_custom_properties={"apiVersion": DEFAULT_API_VERSION},
    docs=f"""\
Create a *Website* app in [VK's developer area](https://dev.vk.com/) (its *App ID* is the
client id, its *Secure key* the client secret). VK puts the user's id (`user_id`) and, with
the `email` scope, the e-mail address in the token answer, not in the profile. The API takes
the token as a parameter together with the API version: both are sent in a `POST` form body to
`users.get`, never in a URL, so the token appears in no address or log. The profile's id must
be the token answer's `user_id`. `customProperties`:

* `apiVersion`: the `v` parameter (default `{DEFAULT_API_VERSION}`).
* `fields`: the user fields requested (default `{DEFAULT_FIELDS}`; the avatar is
  `photo_200`, `username` the `screen_name`).

VK ID (the OAuth 2.1 service VK moved sign-in to in 2024): with
`apiURL: https://id.vk.com/oauth2/user_info` the profile call sends `client_id` and the token
in the form body and reads its `{{"user": {{"user_id": ...}}}}` answer. VK ID's own
authorization and token endpoints also want the `device_id` of the callback in the token
request, which this library does not forward yet. VK says nothing about whether an address is
verified. VK scopes are separated by commas.
""",
)


class VKProvider(BuiltinProvider):
    """Sign in with VK: ``users.get`` (legacy API) or VK ID's ``user_info``; the token goes in
    the form body, and the profile must be the user the token answer names."""

    __slots__ = ()

    facts = FACTS

    def profile_form(self, info: OAuth2Info) -> dict[str, str]:
        url = self.profile_url or ""
        if urlsplit(url).path.rstrip("/").endswith(VK_ID_USER_INFO):
            return {"client_id": self.settings.client_id, "access_token": info.access_token}
        return super().profile_form(info)

    def parse_profile(self, raw: Any, info: OAuth2Info) -> SocialProfile:
        if isinstance(raw, Mapping) and isinstance(raw.get("error"), str):  # VK ID's errors
            code = safe_error_code(raw["error"])
            raise ProfileRetrievalError(self.name, f"profile request failed: VK error {code!r}")
        profile = super().parse_profile(raw, info)
        expected = first_text(info.params, "user_id")
        if expected is not None and expected != profile.provider_key:
            raise ProfileRetrievalError(self.name, "profile's id is not the token's user_id")
        return profile
