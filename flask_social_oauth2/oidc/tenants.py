"""Tenant allow-lists for multi-tenant issuers (``customProperties.allowedTenants``).

A multi-tenant discovery document (Microsoft Entra's ``common``, ``organizations`` and
``consumers``) names its issuer with a ``{tenantid}`` placeholder: any organisation's users can
sign in through it, each ID token's ``iss`` filled with its own ``tid``. ``allowedTenants``
(tenant ids separated by spaces, or ``*`` for any tenant) says which of them may: the ``tid`` of
a verified ID token outside the list is an :class:`~flask_social_oauth2.errors.AccessDeniedError`
(403). The value is read here and nowhere else, by :func:`allowed_tenants`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlsplit

from ..config.settings import OAuth2Settings
from ..errors import AccessDeniedError, ConfigurationProblem
from ..oauth.metadata import ProviderMetadata

#: The ``customProperties`` key of the allow-list.
ALLOWED_TENANTS_KEY: Final = "allowedTenants"
#: The allow-list's value that lets any tenant sign in.
ANY_TENANT: Final = "*"
#: The tenant segments of Microsoft's multi-tenant endpoints, whose issuer holds ``{tenantid}``.
MICROSOFT_MULTI_TENANT: Final = frozenset({"common", "organizations", "consumers"})
#: The host of Microsoft's sign-in endpoints.
MICROSOFT_HOST: Final = "login.microsoftonline.com"
#: Built-in provider names whose blocks ``flask social check`` looks at for a missing list.
MICROSOFT_NAMES: Final = frozenset({"microsoft", "azure"})

#: What a multi-tenant discovery document's issuer holds where each token's ``tid`` goes.
TENANT_PLACEHOLDER: Final = "{tenantid}"

# A tenant id as the issuer template takes it (the rule of oauth.metadata's placeholder).
_TENANT_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9.\-]{0,99}")


def allowed_tenants(settings: OAuth2Settings) -> frozenset[str] | None:
    """The tenant ids ``customProperties.allowedTenants`` lists, lower-cased (Entra's tenant
    ids are GUIDs, the same whatever their case); ``frozenset({"*"})`` for any tenant; ``None``
    when the block sets no list (then any tenant signs in, as without this feature)."""
    value = settings.custom_properties.get(ALLOWED_TENANTS_KEY)
    if value is None:
        return None
    return frozenset(item.lower() for item in value.split())


def settings_problems(settings: OAuth2Settings, *, verifies: bool) -> list[ConfigurationProblem]:
    """Problems of ``customProperties.allowedTenants``; the provider name is filled in by the
    caller.

    :param verifies: Whether this block verifies ID tokens (an issuer, ``openid`` in the
        scope): without them there is no ``tid`` to check, and a list would let anyone in.
    """
    value = settings.custom_properties.get(ALLOWED_TENANTS_KEY)
    if value is None:
        return []
    items = value.split()
    message = None
    if not verifies:
        message = (
            "needs verified ID tokens to read the tenant from: an OpenID Connect issuer and"
            " 'openid' in the scope"
        )
    elif not items:
        message = "must list tenant ids separated by spaces, or be '*' for any tenant"
    elif ANY_TENANT in items and len(items) > 1:
        message = "is '*' (any tenant) or a list of tenant ids, not both"
    elif ANY_TENANT not in items:
        bad = [item for item in items if _TENANT_RE.fullmatch(item) is None]
        if bad:
            message = (
                "must list tenant ids (letters, digits, '.' and '-'), separated by spaces;"
                f" not {', '.join(repr(item[:40]) for item in bad[:3])}"
            )
    if message is None:
        return []
    return [ConfigurationProblem(None, f"customProperties.{ALLOWED_TENANTS_KEY}", message)]


def check_tenant(provider: str, settings: OAuth2Settings, claims: Mapping[str, Any]) -> None:
    """Refuse a verified ID token whose ``tid`` the block's ``allowedTenants`` does not list.

    Call it once the token's signature and claims were checked. Without ``allowedTenants`` any
    tenant passes; with ``*`` any token passes.

    :raises AccessDeniedError: (403) when the list is set, is not ``*``, and the token has no
        ``tid`` or one outside it. The message never shows the ``tid``.
    """
    allowed = allowed_tenants(settings)
    if allowed is None or ANY_TENANT in allowed:
        return
    tenant = claims.get("tid")
    if isinstance(tenant, str) and tenant.lower() in allowed:
        return
    what = "has no tid" if not isinstance(tenant, str) else "has a tid allowedTenants does not list"
    error = AccessDeniedError(provider, f"id_token {what}: this tenant may not sign in")
    error.public_message = "Accounts of your organisation cannot sign in here."
    raise error


def is_multi_tenant(metadata: ProviderMetadata) -> bool:
    """Whether a discovery document is a multi-tenant one (its issuer holds ``{tenantid}``)."""
    return TENANT_PLACEHOLDER in metadata.issuer


def multi_tenant_segment(address: str) -> str | None:
    """The tenant segment of one of Microsoft's multi-tenant addresses (an issuer such as
    ``https://login.microsoftonline.com/common/v2.0`` or a token endpoint under it):
    ``common``, ``organizations`` or ``consumers``; ``None`` for a tenant of its own. Read from
    the address alone, so that ``flask social check`` fetches nothing."""
    segment = urlsplit(address).path.strip("/").split("/")[0].lower()
    return segment if segment in MICROSOFT_MULTI_TENANT else None
