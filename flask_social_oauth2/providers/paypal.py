"""PayPal (Log in with PayPal): the Identity API's OpenID Connect userinfo."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import Param, ProviderFacts

FACTS: Final = ProviderFacts(
    name="paypal",
    title="PayPal",
    class_name="PayPalProvider",
    authorization_url="https://www.paypal.com/signin/authorize",
    token_url="https://api-m.paypal.com/v1/oauth2/token",
    profile_url="https://api-m.paypal.com/v1/identity/openidconnect/userinfo",
    scope=("openid", "profile", "email"),
    client_auth="client_secret_basic",
    profile=ProfileFields(
        provider_key=("user_id", "sub"),
        first_name="given_name",
        last_name="family_name",
        full_name="name",
        email="email",
        email_verified="email_verified",
        avatar_url="picture",
    ),
    profile_params=(Param("schema", "openid"),),
    api_base="https://api-m.paypal.com/",
    docs="""\
Create an app under *Apps & Credentials* in the [PayPal developer dashboard](https://developer.paypal.com/dashboard/applications)
and enable *Log in with PayPal* with the information you need. The token endpoint takes HTTP
Basic client authentication. The profile is
`GET /v1/identity/openidconnect/userinfo?schema=openid`: `provider_key` is `user_id`,
`email_verified` what PayPal says (read as a boolean or a string). The `openid` scope is not
used for ID token verification here (PayPal's userinfo is the profile). **Sandbox**:
`https://www.sandbox.paypal.com/signin/authorize`, `https://api-m.sandbox.paypal.com/v1/oauth2/token`
and the same path on `api-m.sandbox.paypal.com` as `apiURL`.
""",
)
