"""Authentiq: OpenID Connect (service status unconfirmed)."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import OPENID_FIELDS
from .facts import ProviderFacts

FACTS: Final = ProviderFacts(
    name="authentiq",
    title="Authentiq",
    class_name="AuthentiqProvider",
    authorization_url="https://connect.authentiq.io/authorize",
    token_url="https://connect.authentiq.io/token",
    issuer="https://connect.authentiq.io",
    scope=("openid", "profile", "email"),
    profile=OPENID_FIELDS,
    docs="""\
**Status unconfirmed.** Authentiq's current documentation could not be found; these are the
settings Flask-Dance ships (`connect.authentiq.io`). The provider is plain OpenID Connect: the
profile is the userinfo endpoint of its discovery document (or the verified ID token), read
with the standard claim names. If the service answers no longer, or for a self-hosted
instance, prefer a generic OpenID Connect block with your instance's `issuer`.
""",
)
