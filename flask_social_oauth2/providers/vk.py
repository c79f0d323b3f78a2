"""VK (VKontakte): ``users.get`` plus the fields VK puts in the token response."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar, Final

from ..errors import ConfigurationProblem, ProfileRetrievalError
from ..profile_fields import ProfileFields, first_text
from ..provider import OAuth2Provider
from ..settings import OAuth2Info, OAuth2Settings, SocialProfile
from ._common import compose_full_name, require_profile_url

#: The VK API version sent when ``customProperties.apiVersion`` is not set.
DEFAULT_API_VERSION: Final = "5.199"
#: The user fields asked for when ``customProperties.fields`` is not set.
DEFAULT_FIELDS: Final = "photo_200,screen_name"
_API_VERSION: Final = re.compile(r"\d+\.\d+\Z")


class VKProvider(OAuth2Provider):
    """Sign in with VK.

    VK returns the user's id (``user_id``) and, with the ``email`` scope, the e-mail address
    in the *token response*, never in the profile; both are read from ``info.params``. The
    API wants the token as the ``access_token`` parameter together with the version ``v``
    (``customProperties.apiVersion``, default ``5.199``): both go in a ``POST`` form body to
    ``https://api.vk.com/method/users.get``, never in the URL, so the token appears in no
    address or log line. ``customProperties.fields`` sets the requested user fields (default
    ``photo_200,screen_name``). VK reports failures with HTTP 200 and an ``error`` object.
    """

    __slots__ = ()

    default_api_url: ClassVar[str | None] = "https://api.vk.com/method/users.get"
    profile_fields: ClassVar[ProfileFields] = ProfileFields(
        provider_key="response.0.id",
        first_name="response.0.first_name",
        last_name="response.0.last_name",
        avatar_url=("response.0.photo_200", "response.0.photo_100"),
    )

    @classmethod
    def settings_problems(cls, settings: OAuth2Settings) -> list[ConfigurationProblem]:
        problems = super().settings_problems(settings)
        version = settings.custom_properties.get("apiVersion")
        if version is not None and not _API_VERSION.match(version):
            problems.append(
                ConfigurationProblem(
                    None, "customProperties.apiVersion", "must be a version such as '5.199'"
                )
            )
        return problems

    def fetch_profile(self, info: OAuth2Info) -> Mapping[str, Any]:
        properties = self.settings.custom_properties
        body = {
            "access_token": info.access_token,
            "v": properties.get("apiVersion", DEFAULT_API_VERSION),
            "fields": properties.get("fields", DEFAULT_FIELDS),
        }
        # No Authorization header: VK takes the token as a body parameter.
        raw: Mapping[str, Any] = self.request_json(
            "POST", require_profile_url(self), None, data=body
        )
        return raw

    def parse_profile(self, raw: Any, info: OAuth2Info) -> SocialProfile:
        if not isinstance(raw, Mapping):
            raise ProfileRetrievalError(self.name, "profile answer is not a JSON object")
        if isinstance(raw.get("error"), Mapping):
            code = first_text(raw, "error.error_code") or "<missing>"
            raise ProfileRetrievalError(self.name, f"profile request failed: VK error {code}")
        key = first_text(info.params, "user_id") or first_text(raw, "response.0.id")
        if key is None:
            raise ProfileRetrievalError(self.name, "profile answer has no user id")
        fields = self.profile_fields
        profile = SocialProfile(
            provider_id=self.name,
            provider_key=key,
            first_name=first_text(raw, fields.first_name),
            last_name=first_text(raw, fields.last_name),
            email=first_text(info.params, "email"),
            avatar_url=first_text(raw, fields.avatar_url),
            raw=raw,
        )
        return compose_full_name(profile)
