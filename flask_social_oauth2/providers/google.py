"""Google: OpenID Connect userinfo."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import OPENID_FIELDS
from .facts import ProviderFacts

FACTS: Final = ProviderFacts(
    name="google",
    title="Google",
    class_name="GoogleProvider",
    authorization_url="https://accounts.google.com/o/oauth2/v2/auth",
    token_url="https://oauth2.googleapis.com/token",
    profile_url="https://openidconnect.googleapis.com/v1/userinfo",
    issuer="https://accounts.google.com",
    extra_id_token_issuers=frozenset({"accounts.google.com"}),
    scope=("openid", "email", "profile"),
    profile=OPENID_FIELDS,
    api_base="https://www.googleapis.com/",
    revocation_url="https://oauth2.googleapis.com/revoke",
    docs="""\
Create an *OAuth client ID* of type *Web application* in the
[Google Cloud console](https://console.cloud.google.com/apis/credentials) and add the callback
under *Authorized redirect URIs*. The profile is Google's OpenID Connect userinfo, with
`email_verified`.
""",
)
