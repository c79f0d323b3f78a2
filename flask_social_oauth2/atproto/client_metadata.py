"""The client metadata document of a published (confidential) AT Protocol OAuth client: the
JSON its ``client_id`` URL serves, which an authorization server fetches to learn the client's
redirect URIs, scope and keys (https://atproto.com/specs/oauth, "Client ID Metadata
Document"). Plain data: the values come resolved from the caller."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urljoin, urlsplit

from ..errors import ConfigurationProblem

#: The ``customProperties`` keys that add optional, displayed fields to the document, and the
#: fields they fill.
DISPLAY_FIELDS: Final[Mapping[str, str]] = {
    "clientName": "client_name",
    "clientURI": "client_uri",
    "logoURI": "logo_uri",
    "tosURI": "tos_uri",
    "policyURI": "policy_uri",
}
#: The name the document is served under, next to the JWK set (``jwks.json``).
DOCUMENT_NAME: Final = "client-metadata.json"
JWKS_NAME: Final = "jwks.json"


def jwks_uri_for(client_id: str) -> str:
    """The ``jwks_uri`` of the document at ``client_id``: ``jwks.json`` next to it (the
    extension serves both under ``<url rule>/``)."""
    return urljoin(client_id, JWKS_NAME)


def client_metadata(
    *,
    client_id: str,
    redirect_uri: str,
    scope: str,
    signing_alg: str,
    display: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The client metadata document of a web client that authenticates with
    ``private_key_jwt`` and asks for DPoP-bound tokens.

    :param client_id: The document's own URL (the authorization server checks that they are
        the same).
    :param redirect_uri: The one redirect URI of the client.
    :param scope: The scope the client may ask for (it must contain ``atproto``).
    :param signing_alg: The algorithm of its client assertions (``ES256`` or ``RS256``).
    :param display: ``customProperties`` of the block; the keys of :data:`DISPLAY_FIELDS`
        that it has are added (``client_name``, ``client_uri``, ...).
    """
    document: dict[str, Any] = {
        "client_id": client_id,
        "application_type": "web",
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "redirect_uris": [redirect_uri],
        "scope": scope,
        "dpop_bound_access_tokens": True,
        "token_endpoint_auth_method": "private_key_jwt",
        "token_endpoint_auth_signing_alg": signing_alg,
        "jwks_uri": jwks_uri_for(client_id),
    }
    for key, name in DISPLAY_FIELDS.items():
        value = (display or {}).get(key)
        if value:
            document[name] = value
    return document


def client_id_problems(client_id: str, client_uri: str | None) -> list[ConfigurationProblem]:
    """What is wrong with a published client's ``clientID`` (the document's URL, or a path
    of the app) and its ``customProperties.clientURI``, which the AT Protocol wants on the
    same origin as the client ID and a parent of its path (checked when the ``clientID`` is
    absolute)."""
    if client_id.startswith("/"):
        return []
    parts = urlsplit(client_id)
    if parts.scheme not in ("https", "http") or not parts.netloc:
        return [
            ConfigurationProblem(
                None,
                "clientID",
                "must be http://localhost (the loopback development client) or the URL or path"
                f" of the client metadata document (e.g. /authenticate/bluesky/{DOCUMENT_NAME})",
            )
        ]
    if client_uri is not None and not _is_parent(client_uri, client_id):
        return [
            ConfigurationProblem(
                None,
                "customProperties.clientURI",
                "must be on the clientID's origin and a parent of its path (AT Protocol)",
            )
        ]
    return []


def _is_parent(parent: str, url: str) -> bool:
    above, below = urlsplit(parent), urlsplit(url)
    if (above.scheme, above.netloc) != (below.scheme, below.netloc):
        return False
    path = above.path or "/"
    return below.path == path or below.path.startswith(path.rstrip("/") + "/")
