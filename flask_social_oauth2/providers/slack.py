"""Slack: Sign in with Slack (OpenID Connect userinfo)."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import OPENID_FIELDS
from .facts import ProviderFacts, Quirk

FACTS: Final = ProviderFacts(
    name="slack",
    title="Slack",
    class_name="SlackProvider",
    authorization_url="https://slack.com/openid/connect/authorize",
    token_url="https://slack.com/api/openid.connect.token",
    profile_url="https://slack.com/api/openid.connect.userInfo",
    issuer="https://slack.com",
    scope=("openid", "profile", "email"),
    profile=OPENID_FIELDS,
    profile_method="POST",
    quirks=frozenset({Quirk.OK_FALSE_IS_ERROR}),
    api_base="https://slack.com/api/",
    docs="""\
Create an app at [api.slack.com/apps](https://api.slack.com/apps), add the callback under
*OAuth & Permissions → Redirect URLs*. This is *Sign in with Slack* (OpenID Connect): the
profile is the Web API method `openid.connect.userInfo`, called with `POST`. Slack reports
failures with HTTP 200 and `{"ok": false, "error": ...}`; that is a profile error naming the
code.
""",
)
