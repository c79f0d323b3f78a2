"""Microsoft Entra ID (Azure AD) and personal Microsoft accounts: Graph ``/me``."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import ProviderFacts

FACTS: Final = ProviderFacts(
    name="microsoft",
    title="Microsoft (Entra ID)",
    class_name="MicrosoftProvider",
    authorization_url="https://login.microsoftonline.com/common/oauth2/v2.0/authorize",
    token_url="https://login.microsoftonline.com/common/oauth2/v2.0/token",
    profile_url="https://graph.microsoft.com/v1.0/me",
    issuer_from_token_url=(r"(https://[^/]+/[^/]+)/oauth2/v2\.0/token", r"\1/v2.0"),
    scope=("openid", "profile", "email", "User.Read"),
    profile=ProfileFields(
        provider_key=("id", "sub"),
        username=("userPrincipalName", "preferred_username"),
        first_name=("givenName", "given_name"),
        last_name=("surname", "family_name"),
        full_name=("displayName", "name"),
        email=("mail", "email"),
    ),
    api_base="https://graph.microsoft.com/v1.0/",
    docs="""\
Register an app under *App registrations* in the [Microsoft Entra admin center](https://entra.microsoft.com/)
with a *Web* redirect URI, and add a client secret. Replace `common` with your tenant id (or
`organizations`/`consumers`) to restrict who can sign in. On `common`, `organizations` or
`consumers` the users of any organisation sign in: list the tenants that may in
`customProperties.allowedTenants` (tenant ids separated by spaces, or `*`; see
[multi-tenant issuers](openid-connect.md#multi-tenant-issuers-who-may-sign-in)); `flask social
check` warns about such a block without it. The profile is Microsoft Graph
`/v1.0/me` (`User.Read`). The same mapping reads the OpenID Connect userinfo
(`apiURL: https://graph.microsoft.com/oidc/userinfo`), but the two give different user ids
(Graph object `id` versus pairwise `sub`): choose one and keep it. `avatar_url` is `None`
(Graph serves photos only as authenticated binary data); `email` is `mail`, which is empty for
accounts without a mailbox, and is never said to be verified (`email_verified` is `None`: do
not link accounts by it); `username` is the sign-in name (`userPrincipalName`).
""",
)
