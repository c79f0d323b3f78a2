"""Patreon: the API v2 identity of the signed-in user."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final

from ..profile_fields import ProfileFields
from ..provider import OAuth2Provider
from ..settings import OAuth2Info
from ._common import require_profile_url

#: The user attributes asked for when ``customProperties.userFields`` is not set.
DEFAULT_USER_FIELDS: Final = "email,first_name,last_name,full_name,image_url"


class PatreonProvider(OAuth2Provider):
    """Sign in with Patreon.

    API v2 returns only the attributes a request names, so the identity call sends
    ``fields[user]`` (``customProperties.userFields`` overrides the list). The answer is a
    JSON:API document: the user is under ``data``, its fields under ``data.attributes``.
    """

    __slots__ = ()

    default_api_url: ClassVar[str | None] = "https://www.patreon.com/api/oauth2/v2/identity"
    profile_fields: ClassVar[ProfileFields] = ProfileFields(
        provider_key="data.id",
        first_name="data.attributes.first_name",
        last_name="data.attributes.last_name",
        full_name="data.attributes.full_name",
        email="data.attributes.email",
        avatar_url=("data.attributes.image_url", "data.attributes.thumb_url"),
    )

    def fetch_profile(self, info: OAuth2Info) -> Mapping[str, Any]:
        url = require_profile_url(self)
        fields = self.settings.custom_properties.get("userFields", DEFAULT_USER_FIELDS)
        raw: Mapping[str, Any] = self.request_json(
            "GET", url, info, params={"fields[user]": fields}
        )
        return raw
