"""From a PDS to its OAuth authorization server and that server's metadata, as the AT Protocol
OAuth profile requires them (https://atproto.com/specs/oauth): the PDS's protected resource
metadata (RFC 9728) names the authorization server, whose RFC 8414 metadata must name itself as
issuer and offer PAR, PKCE with S256, ES256 DPoP and ``iss`` on the callback."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from ..errors import ResolutionError
from ..urls import is_loopback_host, split_absolute_url
from .fetch import Fetcher
from .identity import check_origin

_RESOURCE_PATH: Final = "/.well-known/oauth-protected-resource"
_METADATA_PATH: Final = "/.well-known/oauth-authorization-server"


@dataclass(frozen=True)
class AuthorizationServerMetadata:
    """What sign-in needs of an AT Protocol authorization server's RFC 8414 metadata.

    :param issuer: The server's issuer (an origin).
    :param authorization_endpoint: Where the browser is sent.
    :param token_endpoint: Where codes and refresh tokens are exchanged.
    :param pushed_authorization_request_endpoint: The PAR endpoint (RFC 9126).
    :param revocation_endpoint: The revocation endpoint, when it names one.
    :param scopes_supported: The scopes it lists.
    :param token_endpoint_auth_methods_supported: The client authentication methods it takes.
    :param dpop_signing_alg_values_supported: The DPoP proof algorithms it takes.
    """

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    pushed_authorization_request_endpoint: str
    revocation_endpoint: str | None = None
    scopes_supported: tuple[str, ...] = ()
    token_endpoint_auth_methods_supported: tuple[str, ...] = ()
    dpop_signing_alg_values_supported: tuple[str, ...] = ()


def protected_resource_issuer(pds_url: str, *, fetch: Fetcher) -> str:
    """The authorization server of the PDS at ``pds_url``: the first of the
    ``authorization_servers`` its ``/.well-known/oauth-protected-resource`` names, whose
    ``resource`` must be the PDS itself.

    :raises ResolutionError: the document could not be fetched, is for another resource, or
        names no valid authorization server.
    """
    origin = check_origin(pds_url, allow_loopback=fetch.allow_loopback, what="the PDS")
    document = fetch.json(origin + _RESOURCE_PATH)
    resource = document.get("resource")
    if not isinstance(resource, str) or resource.rstrip("/") != origin:
        raise ResolutionError(
            "resource_mismatch", f"the protected resource metadata of {origin} is another's"
        )
    servers = document.get("authorization_servers")
    if not isinstance(servers, list) or not servers:
        raise ResolutionError("no_issuer", f"{origin} names no authorization server")
    return check_origin(
        servers[0], allow_loopback=fetch.allow_loopback, what=f"{origin}'s authorization server"
    )


def authorization_server_metadata(issuer: str, *, fetch: Fetcher) -> AuthorizationServerMetadata:
    """The RFC 8414 metadata of the AT Protocol authorization server ``issuer``.

    It must name ``issuer`` as its issuer, name the PAR, authorization and token endpoints
    (``https``, or ``http`` on loopback with ``allow_loopback``), and support ``S256`` PKCE,
    ``ES256`` DPoP proofs and the ``iss`` authorization response parameter.

    :raises ResolutionError: the metadata could not be fetched or falls short; the reason names
        what (``"issuer_mismatch"``, ``"bad_metadata"``).
    """
    origin = check_origin(issuer, allow_loopback=fetch.allow_loopback, what="the issuer")
    document = fetch.json(origin + _METADATA_PATH)
    if document.get("issuer") != issuer:
        raise ResolutionError("issuer_mismatch", f"the metadata of {origin} names another issuer")

    def endpoint(name: str) -> str:
        value = document.get(name)
        if not isinstance(value, str):
            raise ResolutionError("bad_metadata", f"{origin}'s metadata names no {name}")
        return _check_endpoint(value, fetch.allow_loopback, f"{origin}'s {name}")

    def listed(name: str) -> tuple[str, ...]:
        value = document.get(name, [])
        if not isinstance(value, list):
            raise ResolutionError("bad_metadata", f"{origin}'s {name} is not a list")
        return tuple(item for item in value if isinstance(item, str))

    def require(name: str, value: str) -> None:
        if value not in listed(name):
            raise ResolutionError("bad_metadata", f"{origin}'s {name} lacks {value}")

    require("code_challenge_methods_supported", "S256")
    require("dpop_signing_alg_values_supported", "ES256")
    if document.get("authorization_response_iss_parameter_supported") is not True:
        raise ResolutionError("bad_metadata", f"{origin} does not send iss on the callback")
    revocation: Any = document.get("revocation_endpoint")
    return AuthorizationServerMetadata(
        issuer=issuer,
        authorization_endpoint=endpoint("authorization_endpoint"),
        token_endpoint=endpoint("token_endpoint"),
        pushed_authorization_request_endpoint=endpoint("pushed_authorization_request_endpoint"),
        revocation_endpoint=None if revocation is None else endpoint("revocation_endpoint"),
        scopes_supported=listed("scopes_supported"),
        token_endpoint_auth_methods_supported=listed("token_endpoint_auth_methods_supported"),
        dpop_signing_alg_values_supported=listed("dpop_signing_alg_values_supported"),
    )


def _check_endpoint(url: str, allow_loopback: bool, what: str) -> str:
    parts = split_absolute_url(url)
    if isinstance(parts, str):
        raise ResolutionError("bad_metadata", f"{what} {parts}")
    if parts.scheme != "https" and not (allow_loopback and is_loopback_host(parts.hostname or "")):
        raise ResolutionError("insecure_url", f"{what} is not https")
    return url
