"""Yahoo: OpenID Connect userinfo."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import OPENID_FIELDS
from .facts import ProviderFacts

FACTS: Final = ProviderFacts(
    name="yahoo",
    title="Yahoo",
    class_name="YahooProvider",
    authorization_url="https://api.login.yahoo.com/oauth2/request_auth",
    token_url="https://api.login.yahoo.com/oauth2/get_token",
    profile_url="https://api.login.yahoo.com/openid/v1/userinfo",
    issuer="https://api.login.yahoo.com",
    scope=("openid", "profile", "email"),
    profile=OPENID_FIELDS,
    docs="""\
Create an app on [developer.yahoo.com/apps](https://developer.yahoo.com/apps/) with *OpenID
Connect Permissions* (Email, Profile). The profile is Yahoo's OpenID Connect userinfo.
""",
)
