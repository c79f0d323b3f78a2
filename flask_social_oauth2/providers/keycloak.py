"""Keycloak: the realm's OpenID Connect userinfo."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import OPENID_FIELDS
from .facts import ProviderFacts

FACTS: Final = ProviderFacts(
    name="keycloak",
    title="Keycloak",
    class_name="KeycloakProvider",
    authorization_url=(
        "https://${KEYCLOAK_HOST}/realms/${KEYCLOAK_REALM}/protocol/openid-connect/auth"
    ),
    token_url="https://${KEYCLOAK_HOST}/realms/${KEYCLOAK_REALM}/protocol/openid-connect/token",
    profile_url_from_token_url=(
        (
            r"([^:/]+://[^/]+(?:/[^/]+)*?/realms/[^/]+)(?:/.*)?",
            r"\1/protocol/openid-connect/userinfo",
        ),
    ),
    profile_url_shown="https://<host>/realms/<realm>/protocol/openid-connect/userinfo",
    api_url_hint="accessTokenURL has no /realms/<realm>/ path to derive the userinfo address from",
    issuer_from_token_url=(r"(https?://.+?/realms/[^/]+)/protocol/openid-connect/token", r"\1"),
    scope=("openid", "profile", "email"),
    profile=OPENID_FIELDS,
    docs="""\
Create an OpenID Connect client with *Client authentication* on in your realm's admin console
and add the callback to *Valid redirect URIs*. The profile address is the realm's userinfo,
derived from `accessTokenURL` (`/realms/<realm>/protocol/openid-connect/userinfo`, keeping a
path prefix such as the `/auth` of Keycloak before 17). A token URL without `/realms/<realm>/`
needs `apiURL`. `username` is `preferred_username`.
""",
)
