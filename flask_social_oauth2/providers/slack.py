"""Slack: Sign in with Slack (OpenID Connect userinfo)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ..errors import ProfileRetrievalError
from ..flow import safe_error_code
from ..profile_fields import OPENID_FIELDS, ProfileFields
from ..provider import OAuth2Provider
from ..settings import OAuth2Info, SocialProfile
from ._common import require_profile_url


class SlackProvider(OAuth2Provider):
    """Sign in with Slack.

    The profile is the Web API method ``openid.connect.userInfo``, called with ``POST`` as its
    documentation lists, the token in the ``Authorization`` header. Like every Slack Web API
    method it reports failure with HTTP 200 and ``{"ok": false, "error": "..."}``; that is a
    :class:`ProfileRetrievalError` naming the error code. The claims are OpenID Connect's.
    """

    __slots__ = ()

    default_api_url: ClassVar[str | None] = "https://slack.com/api/openid.connect.userInfo"
    openid_connect: ClassVar[bool] = True
    default_issuer: ClassVar[str | None] = "https://slack.com"
    profile_fields: ClassVar[ProfileFields] = OPENID_FIELDS

    def fetch_profile(self, info: OAuth2Info) -> Mapping[str, Any]:
        raw: Mapping[str, Any] = self.request_json("POST", require_profile_url(self), info)
        return raw

    def parse_profile(self, raw: Any, info: OAuth2Info) -> SocialProfile:
        if isinstance(raw, Mapping) and raw.get("ok") is False:
            error = raw.get("error")
            code = safe_error_code(error) if isinstance(error, str) else "<missing>"
            raise ProfileRetrievalError(self.name, f"profile request failed: error {code!r}")
        return super().parse_profile(raw, info)
