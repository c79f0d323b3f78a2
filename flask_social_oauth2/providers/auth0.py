"""Auth0: the tenant's OpenID Connect userinfo."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import OPENID_FIELDS
from .facts import ProviderFacts

FACTS: Final = ProviderFacts(
    name="auth0",
    title="Auth0",
    class_name="Auth0Provider",
    authorization_url="https://${AUTH0_DOMAIN}/authorize",
    token_url="https://${AUTH0_DOMAIN}/oauth/token",
    profile_url_from_token_url=((r"([^:/]+://[^/]+).*", r"\1/userinfo"),),
    profile_url_shown="https://<tenant host>/userinfo",
    issuer_from_token_url=(r"(https?://[^/]+)/oauth/token", r"\1/"),
    scope=("openid", "profile", "email"),
    profile=OPENID_FIELDS,
    docs="""\
Create a *Regular Web Application* in the [Auth0 dashboard](https://manage.auth0.com/) and add
the callback URL under *Allowed Callback URLs*. The profile address is derived from the host of
`accessTokenURL` (`https://<tenant>.auth0.com/userinfo`; custom domains work the same way), so
no `apiURL` is needed. Set `issuer` to `https://<tenant host>/` to check RFC 9207's `iss`.
""",
)
