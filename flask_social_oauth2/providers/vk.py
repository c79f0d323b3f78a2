"""VK (VKontakte): ``users.get``, or VK ID's ``user_info``, with the token in a form body."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, TypeAlias
from urllib.parse import urlsplit

from flask import has_request_context, request

from ..config.profile_fields import ProfileFields, first_text
from ..config.settings import OAuth2Info, SocialProfile
from ..errors import InvalidCallbackError, ProfileRetrievalError
from ..oauth.flow import safe_error_code
from .base import BuiltinProvider, provider_class
from .facts import Param, PropertyRule, ProviderFacts, Quirk
from .hooks import HookedProvider, ProviderHooks

#: The VK API version sent when ``customProperties.apiVersion`` is not set.
DEFAULT_API_VERSION: Final = "5.199"
#: The user fields asked for when ``customProperties.fields`` is not set.
DEFAULT_FIELDS: Final = "photo_200,screen_name"
#: The path of VK ID's profile method (``https://id.vk.com/oauth2/user_info``).
VK_ID_USER_INFO: Final = "/oauth2/user_info"
#: The callback parameter (and token request field) naming VK ID's device.
DEVICE_ID: Final = "device_id"
#: What a ``device_id`` may look like: URL-safe characters, at most 256 of them.
_DEVICE_ID: Final = re.compile(r"[A-Za-z0-9._~-]{1,256}")
FACTS: Final = ProviderFacts(
    name="vk",
    title="VK",
    class_name="VKProvider",
    code=True,
    code_quirks=(
        "VK ID `user_info` answers",
        "VK ID `device_id` forwarded",
        "profile id checked against the token answer",
    ),
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
in the form body and reads its `{{"user": {{"user_id": ...}}}}` answer. Point
`authorizationURL` at `https://id.vk.com/authorize` and `accessTokenURL` at
`https://id.vk.com/oauth2/auth` (VK ID requires PKCE, which every sign-in here sends). VK ID's
callback carries a `device_id`: it is forwarded, with the `state`, in the token request, kept
in `info.params["device_id"]` and sent again with a refresh (`provider.refresh(info)`); a
malformed one is refused (400) before anything is sent. VK ID's scopes are separated by
spaces (`vkid.personal_info email`). VK says nothing about whether an address is verified.
The legacy API's scopes are separated by commas.
""",
)


def callback_device_id(provider: str) -> str | None:
    """The ``device_id`` of VK ID's callback, or ``None`` (the legacy API sends none).

    :raises InvalidCallbackError: for a malformed one (400), before anything is sent.
    """
    if not has_request_context():
        return None
    named = request.args.get(DEVICE_ID) or request.form.get(DEVICE_ID)
    if not named:
        return None
    if not _DEVICE_ID.fullmatch(named):
        raise InvalidCallbackError(provider, f"callback's {DEVICE_ID!r} is malformed")
    return named


def _kept_device(info: OAuth2Info) -> str | None:
    device = info.params.get(DEVICE_ID)
    return device if isinstance(device, str) and _DEVICE_ID.fullmatch(device) else None


class VKHooks(ProviderHooks):
    """``users.get`` (legacy API) or VK ID's ``user_info``; the token goes in the form body,
    and the profile must be the user the token answer names. VK ID's callback names a device,
    which the code exchange and every refresh send."""

    __slots__ = ()

    def profile_form(
        self, provider: HookedProvider, info: OAuth2Info, form: dict[str, str]
    ) -> dict[str, str]:
        url = provider.profile_url or ""
        if urlsplit(url).path.rstrip("/").endswith(VK_ID_USER_INFO):
            return {"client_id": provider.settings.client_id, "access_token": info.access_token}
        return form

    def exchange_fields(self, provider: HookedProvider) -> tuple[tuple[str, str], ...]:
        device = callback_device_id(provider.name)
        if device is None:
            return ()
        # VK ID: its token request names the device and the state
        state = request.args.get("state") or request.form.get("state")
        return ((DEVICE_ID, device), *((("state", state),) if state else ()))

    def received_token(self, provider: HookedProvider, info: OAuth2Info) -> OAuth2Info:
        device = callback_device_id(provider.name)
        if device is None:
            return info
        return dataclasses.replace(info, params={**info.params, DEVICE_ID: device})

    def refresh_fields(self, info: OAuth2Info) -> tuple[tuple[str, str], ...]:
        device = _kept_device(info)
        return () if device is None else ((DEVICE_ID, device),)

    def refreshed(
        self, provider: HookedProvider, info: OAuth2Info, renewed: OAuth2Info
    ) -> OAuth2Info:
        device = _kept_device(info)
        if device is None:
            return renewed
        return dataclasses.replace(renewed, params={**renewed.params, DEVICE_ID: device})

    def check_profile_answer(self, provider: HookedProvider, raw: Any) -> None:
        if isinstance(raw, Mapping) and isinstance(raw.get("error"), str):  # VK ID's errors
            code = safe_error_code(raw["error"])
            raise ProfileRetrievalError(provider.name, f"profile request failed: VK error {code!r}")

    def read_profile(
        self, provider: HookedProvider, raw: Any, info: OAuth2Info, profile: SocialProfile
    ) -> SocialProfile:
        expected = first_text(info.params, "user_id")
        if expected is not None and expected != profile.provider_key:
            raise ProfileRetrievalError(provider.name, "profile's id is not the token's user_id")
        return profile


if TYPE_CHECKING:  # for type checkers, the class is what it is: a BuiltinProvider
    VKProvider: TypeAlias = BuiltinProvider
else:
    VKProvider = provider_class(
        FACTS,
        VKHooks(),
        module=__name__,
        doc="Sign in with VK: ``users.get`` or VK ID's ``user_info``, the token in the form body.",
    )
