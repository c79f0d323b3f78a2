"""Okta: the authorization server's OpenID Connect userinfo."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import OPENID_FIELDS
from .facts import ProviderFacts

FACTS: Final = ProviderFacts(
    name="okta",
    title="Okta",
    class_name="OktaProvider",
    authorization_url="https://${OKTA_DOMAIN}/oauth2/default/v1/authorize",
    token_url="https://${OKTA_DOMAIN}/oauth2/default/v1/token",
    profile_url_from_token_url=(
        (r"([^:/]+://[^/]+)(.*)/v1/token", r"\1\2/v1/userinfo"),
        (r"([^:/]+://[^/]+).*", r"\1/oauth2/v1/userinfo"),
    ),
    profile_url_shown="https://<org>/oauth2/<server>/v1/userinfo",
    issuer_from_token_url=(
        r"(https?://[^/]+)(?:/oauth2(?=/v1/)|(/oauth2/[^/]+))/v1/token",
        r"\1\2",
    ),
    scope=("openid", "profile", "email"),
    profile=OPENID_FIELDS,
    docs="""\
Create an *OIDC - Web Application* app integration in your Okta admin console and add the
callback as *Sign-in redirect URI*. The profile address is derived from `accessTokenURL`:
`.../oauth2/<server>/v1/token` (custom authorization server, e.g. `default`) or
`.../oauth2/v1/token` (org server) gives the `/v1/userinfo` beside it.
""",
)
