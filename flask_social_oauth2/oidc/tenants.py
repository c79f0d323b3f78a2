"""Tenant allow-lists for multi-tenant issuers (``customProperties.allowedTenants``).

A multi-tenant discovery document (Microsoft Entra's ``common``, ``organizations`` and
``consumers``) names its issuer with a ``{tenantid}`` placeholder: any organisation's users can
sign in through it, each ID token's ``iss`` filled with its own ``tid``. ``allowedTenants``
(tenant ids separated by spaces, or ``*`` for any tenant) says which of them may: the ``tid`` of
a verified ID token outside the list is an :class:`~flask_social_oauth2.errors.AccessDeniedError`
(403). The value is read with the block's other ``customProperties``, into
:attr:`~flask_social_oauth2.config.provider_options.ProviderOptions.allowed_tenants`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlsplit

from ..config.provider_options import ANY_TENANT as ANY_TENANT
from ..config.provider_options import ProviderOptions
from ..errors import AccessDeniedError, ConfigurationProblem
from ..oauth.metadata import ProviderMetadata

#: The ``customProperties`` key of the allow-list.
ALLOWED_TENANTS_KEY: Final = "allowedTenants"
#: The tenant segments of Microsoft's multi-tenant endpoints, whose issuer holds ``{tenantid}``.
MICROSOFT_MULTI_TENANT: Final = frozenset({"common", "organizations", "consumers"})
#: The host of Microsoft's sign-in endpoints.
MICROSOFT_HOST: Final = "login.microsoftonline.com"
#: Built-in provider names whose blocks ``flask social check`` looks at for a missing list.
MICROSOFT_NAMES: Final = frozenset({"microsoft", "azure"})

#: What a multi-tenant discovery document's issuer holds where each token's ``tid`` goes.
TENANT_PLACEHOLDER: Final = "{tenantid}"


def settings_problems(options: ProviderOptions, *, verifies: bool) -> list[ConfigurationProblem]:
    """The problem of an ``allowedTenants`` list (its values are checked where the record is
    read, :func:`~flask_social_oauth2.config.provider_options.read_provider_options`) on a
    block that verifies no ID tokens: there is no ``tid`` to check, and the list would let
    anyone in. The provider name is filled in by the caller.

    :param verifies: Whether this block verifies ID tokens (an issuer, ``openid`` in the scope).
    """
    if options.allowed_tenants is None or verifies:
        return []
    message = (
        "needs verified ID tokens to read the tenant from: an OpenID Connect issuer and"
        " 'openid' in the scope"
    )
    return [ConfigurationProblem(None, f"customProperties.{ALLOWED_TENANTS_KEY}", message)]


def check_tenant(provider: str, allowed: frozenset[str] | None, claims: Mapping[str, Any]) -> None:
    """Refuse a verified ID token whose ``tid`` the block's ``allowedTenants`` (``allowed``,
    :attr:`~flask_social_oauth2.config.provider_options.ProviderOptions.allowed_tenants`)
    does not list.

    Call it once the token's signature and claims were checked. Without ``allowedTenants`` any
    tenant passes; with ``*`` any token passes.

    :raises AccessDeniedError: (403) when the list is set, is not ``*``, and the token has no
        ``tid`` or one outside it. The message never shows the ``tid``.
    """
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
