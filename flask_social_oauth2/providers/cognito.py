"""Amazon Cognito user pools: the pool domain's OpenID Connect userinfo."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import ProviderFacts

FACTS: Final = ProviderFacts(
    name="cognito",
    title="Amazon Cognito",
    class_name="CognitoProvider",
    authorization_url="https://${COGNITO_DOMAIN}/oauth2/authorize",
    token_url="https://${COGNITO_DOMAIN}/oauth2/token",
    profile_url_from_token_url=((r"([^:/]+://[^/]+)/oauth2/token", r"\1/oauth2/userInfo"),),
    profile_url_shown="https://<user pool domain>/oauth2/userInfo",
    api_url_hint="accessTokenURL is not a user pool domain's /oauth2/token",
    scope=("openid", "email", "profile"),
    client_auth="client_secret_basic",
    profile=ProfileFields(
        provider_key="sub",
        username=("username", "cognito:username"),
        first_name="given_name",
        last_name="family_name",
        full_name="name",
        email="email",
        email_verified="email_verified",
        avatar_url="picture",
    ),
    init_custom_properties={
        "issuer": "https://cognito-idp.${AWS_REGION}.amazonaws.com/${COGNITO_USER_POOL_ID}"
    },
    docs="""\
One block per user pool. Add an *app client* with a client secret to the pool, give the pool
a domain (`<prefix>.auth.<region>.amazoncognito.com` or your own) and add the callback to
the client's allowed callback URLs. The endpoints are on that domain; the profile is its
`/oauth2/userInfo`, derived from `accessTokenURL`. The issuer of the pool's ID tokens is not
on the domain but `https://cognito-idp.<region>.amazonaws.com/<user pool id>`, so it is set in
`customProperties.issuer` (discovery and ID token verification use it). `provider_key` is
`sub`, `username` the pool's user name; user-pool attributes are strings, so
`email_verified` may arrive as `"true"`/`"false"` and is read either way. The token endpoint
takes HTTP Basic client authentication.
""",
)
