"""Facebook: the Graph API ``/me`` node."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Any, ClassVar, Final

from ..errors import ConfigurationProblem
from ..profile_fields import ProfileFields
from ..provider import OAuth2Provider
from ..settings import OAuth2Info, OAuth2Settings
from ._common import choice_problem, require_profile_url

#: The Graph API version of the built-in addresses.
GRAPH_VERSION: Final = "v25.0"
#: The fields asked for when ``customProperties.fields`` is not set.
DEFAULT_FIELDS: Final = "id,name,first_name,last_name,email,picture.type(large)"


def appsecret_proof(access_token: str, client_secret: str) -> str:
    """Facebook's ``appsecret_proof``: HMAC-SHA256 of the access token keyed with the app
    secret, in hex."""
    key = client_secret.encode("utf-8")
    return hmac.new(key, access_token.encode("utf-8"), hashlib.sha256).hexdigest()


class FacebookProvider(OAuth2Provider):
    """Sign in with Facebook.

    The Graph API returns only the fields a request names, so ``/me`` is called with
    ``fields`` (``customProperties.fields`` overrides the default list). The picture is at
    ``picture.data.url``. With ``customProperties.appsecretProof: "true"`` (for apps that
    turned on *Require App Secret*) each call also carries ``appsecret_proof``, the
    HMAC-SHA256 of the access token keyed with the client secret; the proof is bound to the
    token and reveals neither.
    """

    __slots__ = ()

    default_api_url: ClassVar[str | None] = f"https://graph.facebook.com/{GRAPH_VERSION}/me"
    profile_fields: ClassVar[ProfileFields] = ProfileFields(
        provider_key="id",
        first_name="first_name",
        last_name="last_name",
        full_name="name",
        email="email",
        avatar_url="picture.data.url",
    )

    @classmethod
    def settings_problems(cls, settings: OAuth2Settings) -> list[ConfigurationProblem]:
        return super().settings_problems(settings) + choice_problem(
            settings, "appsecretProof", ("true", "false")
        )

    def fetch_profile(self, info: OAuth2Info) -> Mapping[str, Any]:
        properties = self.settings.custom_properties
        params = {"fields": properties.get("fields", DEFAULT_FIELDS)}
        if properties.get("appsecretProof") == "true":
            params["appsecret_proof"] = appsecret_proof(
                info.access_token, self.settings.client_secret
            )
        raw: Mapping[str, Any] = self.request_json(
            "GET", require_profile_url(self), info, params=params
        )
        return raw
