"""X (Twitter): API v2 ``/2/users/me``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final

from ..profile_fields import ProfileFields
from ..provider import OAuth2Provider, TokenAuthMethod
from ..settings import OAuth2Info
from ._common import require_profile_url

#: The user fields asked for when ``customProperties.userFields`` is not set.
DEFAULT_USER_FIELDS: Final = "profile_image_url"


class TwitterProvider(OAuth2Provider):
    """Sign in with X (Twitter), OAuth 2.0 with PKCE.

    X requires confidential clients to authenticate at the token endpoint with HTTP Basic.
    The profile is ``GET https://api.x.com/2/users/me`` with ``user.fields`` (default
    ``profile_image_url``; ``customProperties.userFields`` overrides it); the user is under
    ``data``. X gives no e-mail address and no first/last name.
    """

    __slots__ = ()

    default_api_url: ClassVar[str | None] = "https://api.x.com/2/users/me"
    default_token_auth_method: ClassVar[TokenAuthMethod] = "client_secret_basic"  # noqa: S105
    profile_fields: ClassVar[ProfileFields] = ProfileFields(
        provider_key="data.id",
        full_name=("data.name", "data.username"),
        avatar_url="data.profile_image_url",
    )

    def fetch_profile(self, info: OAuth2Info) -> Mapping[str, Any]:
        fields = self.settings.custom_properties.get("userFields", DEFAULT_USER_FIELDS)
        raw: Mapping[str, Any] = self.request_json(
            "GET", require_profile_url(self), info, params={"user.fields": fields}
        )
        return raw
