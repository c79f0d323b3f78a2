"""A provider's authorization server metadata (OpenID Connect Discovery 1.0, RFC 8414): the
record :mod:`.discovery` reads a document into, and the issuer comparisons it allows."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from ..errors import DiscoveryError
from ..urls import check_endpoint_url

_TENANT_PLACEHOLDER: Final = "{tenantid}"
_TENANT_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9.\-]{0,99}")
_ENDPOINTS: Final = (
    "authorization_endpoint",
    "token_endpoint",
    "userinfo_endpoint",
    "jwks_uri",
    "revocation_endpoint",
    "end_session_endpoint",
    "pushed_authorization_request_endpoint",
)
#: The logout metadata (Back-Channel and Front-Channel Logout 1.0), each ``true`` or not.
_LOGOUT_FLAGS: Final = (
    "backchannel_logout_supported",
    "backchannel_logout_session_supported",
    "frontchannel_logout_supported",
    "frontchannel_logout_session_supported",
)


@dataclass(frozen=True, slots=True)
class ProviderMetadata:
    """The parts of a provider's discovery document this package uses.

    :param issuer: The issuer identifier, equal to the configured one.
    :param authorization_endpoint: Fills an absent ``authorizationURL``.
    :param token_endpoint: For comparison only: ``accessTokenURL`` is always used as given.
    :param userinfo_endpoint: Fills an absent ``apiURL``.
    :param jwks_uri: The provider's public signing keys.
    :param iss_parameter_supported: RFC 9207: callbacks carry ``iss``, which is then required.
    :param signing_algorithms: ``id_token_signing_alg_values_supported``, if listed.
    :param raw: The whole document.
    :param revocation_endpoint: RFC 7009 token revocation, where the provider has it.
    :param end_session_endpoint: OpenID Connect RP-Initiated Logout, where the provider has it.
    :param pushed_authorization_request_endpoint: RFC 9126 PAR, where the provider has it.
    :param require_pushed_authorization_requests: Whether the provider takes pushed
        authorization requests only.
    :param backchannel_logout_supported: OpenID Connect Back-Channel Logout 1.0: the provider
        posts logout tokens to a client's ``backchannel_logout_uri``.
    :param backchannel_logout_session_supported: Its logout tokens carry ``sid``.
    :param frontchannel_logout_supported: OpenID Connect Front-Channel Logout 1.0: the provider
        loads a client's ``frontchannel_logout_uri`` in a hidden frame.
    :param frontchannel_logout_session_supported: It adds ``iss`` and ``sid`` to that URI.
    """

    issuer: str
    authorization_endpoint: str | None
    token_endpoint: str | None
    userinfo_endpoint: str | None
    jwks_uri: str | None
    iss_parameter_supported: bool
    signing_algorithms: frozenset[str] | None
    raw: Mapping[str, Any] = field(repr=False, compare=False)
    revocation_endpoint: str | None = None
    end_session_endpoint: str | None = None
    pushed_authorization_request_endpoint: str | None = None
    require_pushed_authorization_requests: bool = False
    backchannel_logout_supported: bool = False
    backchannel_logout_session_supported: bool = False
    frontchannel_logout_supported: bool = False
    frontchannel_logout_session_supported: bool = False

    @classmethod
    def from_document(cls, provider: str, document: Any) -> ProviderMetadata:
        """Read a discovery document.

        :raises DiscoveryError: when it is not a JSON object, has no ``issuer``, or an endpoint
            is not an https address (plain http only on loopback).
        """
        if not isinstance(document, Mapping):
            raise DiscoveryError(provider, "discovery document is not a JSON object")
        issuer = document.get("issuer")
        if not isinstance(issuer, str) or not issuer:
            raise DiscoveryError(provider, "discovery document has no issuer")
        endpoints: dict[str, str | None] = {}
        for name in _ENDPOINTS:
            value = document.get(name)
            if value is None:
                endpoints[name] = None
                continue
            if not isinstance(value, str) or check_endpoint_url(value) is not None:
                raise DiscoveryError(
                    provider, f"discovery document's {name} is not an https address"
                )
            endpoints[name] = value
        algorithms = document.get("id_token_signing_alg_values_supported")
        signing = (
            frozenset(item for item in algorithms if isinstance(item, str))
            if isinstance(algorithms, list)
            else None
        )
        flags = {name: document.get(name) is True for name in _LOGOUT_FLAGS}
        return cls(
            issuer=issuer,
            authorization_endpoint=endpoints["authorization_endpoint"],
            token_endpoint=endpoints["token_endpoint"],
            userinfo_endpoint=endpoints["userinfo_endpoint"],
            jwks_uri=endpoints["jwks_uri"],
            iss_parameter_supported=document.get("authorization_response_iss_parameter_supported")
            is True,
            signing_algorithms=signing,
            raw=MappingProxyType(dict(document)),
            revocation_endpoint=endpoints["revocation_endpoint"],
            end_session_endpoint=endpoints["end_session_endpoint"],
            pushed_authorization_request_endpoint=endpoints[
                "pushed_authorization_request_endpoint"
            ],
            require_pushed_authorization_requests=document.get(
                "require_pushed_authorization_requests"
            )
            is True,
            backchannel_logout_supported=flags["backchannel_logout_supported"],
            backchannel_logout_session_supported=flags["backchannel_logout_session_supported"],
            frontchannel_logout_supported=flags["frontchannel_logout_supported"],
            frontchannel_logout_session_supported=flags["frontchannel_logout_session_supported"],
        )


def issuer_matches(configured: str, discovered: str) -> bool:
    """Whether the discovery document's ``issuer`` is the configured one.

    They must be identical, with one exception written into the document itself: a multi-tenant
    document (Microsoft's ``common``, ``organizations`` and ``consumers``) names its issuer with
    a ``{tenantid}`` placeholder, which the configured issuer fills with the tenant it used.
    """
    if configured == discovered:
        return True
    if discovered.count(_TENANT_PLACEHOLDER) != 1:
        return False
    prefix, _, suffix = discovered.partition(_TENANT_PLACEHOLDER)
    if not (configured.startswith(prefix) and configured.endswith(suffix)):
        return False
    tenant = configured[len(prefix) : len(configured) - len(suffix)]
    return _TENANT_RE.fullmatch(tenant) is not None


def expected_token_issuer(metadata: ProviderMetadata, claims: Mapping[str, Any]) -> str | None:
    """The ``iss`` an ID token must carry: the document's issuer; for a multi-tenant document,
    its template filled with the token's ``tid`` claim."""
    issuer = metadata.issuer
    if _TENANT_PLACEHOLDER not in issuer:
        return issuer
    tenant = claims.get("tid")
    if not isinstance(tenant, str) or _TENANT_RE.fullmatch(tenant) is None:
        return None
    return issuer.replace(_TENANT_PLACEHOLDER, tenant)
