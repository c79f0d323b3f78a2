"""Microsoft Entra ID (Azure AD) and personal Microsoft accounts: Graph ``/me``."""

from __future__ import annotations

from typing import ClassVar

from ..profile_fields import ProfileFields
from ..provider import OAuth2Provider


class MicrosoftProvider(OAuth2Provider):
    """Sign in with Microsoft (Entra ID).

    The profile is Microsoft Graph ``GET https://graph.microsoft.com/v1.0/me`` (scope
    ``User.Read``). The mapping also reads the OpenID Connect claims, so
    ``apiURL: https://graph.microsoft.com/oidc/userinfo`` works too; note that the two give
    different user ids (the Graph object ``id`` versus the pairwise ``sub``), so pick one and
    keep it. Graph serves the photo only as authenticated binary data, so ``avatar_url`` is
    ``None``; ``email`` is ``mail``, which is empty for accounts without a mailbox
    (``userPrincipalName`` is a sign-in name, not a verified address, and is not used).
    """

    __slots__ = ()

    default_api_url: ClassVar[str | None] = "https://graph.microsoft.com/v1.0/me"
    openid_connect: ClassVar[bool] = True
    issuer_from_token_url = (r"(https://[^/]+/[^/]+)/oauth2/v2\.0/token", r"\1/v2.0")
    profile_fields: ClassVar[ProfileFields] = ProfileFields(
        provider_key=("id", "sub"),
        first_name=("givenName", "given_name"),
        last_name=("surname", "family_name"),
        full_name=("displayName", "name"),
        email=("mail", "email"),
    )
