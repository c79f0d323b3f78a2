"""AT Protocol (Bluesky) identity resolution for sign-in, with no Flask in it: a handle or DID
to the account's DID document, PDS and OAuth authorization server, every fetch SSRF-guarded.

- :mod:`.addresses`: which IP addresses a fetch may reach;
- :mod:`.fetch`: the guarded GET (:class:`GuardedFetcher`);
- :mod:`.syntax`: handle and DID syntax;
- :mod:`.dns_txt`: the DNS method of handle resolution (:class:`DnsTxtLookup`);
- :mod:`.identity`: handle -> DID -> DID document, checked both ways;
- :mod:`.oauth`: PDS -> authorization server -> its metadata;
- :mod:`.resolver`: the whole chain (:func:`resolve`);
- :mod:`.client_metadata`: the client metadata document of a published client.
"""

from .client_metadata import client_id_problems, client_metadata, jwks_uri_for
from .dns_txt import DnsTxtLookup, TxtLookup
from .fetch import DEFAULT_MAX_BYTES, DEFAULT_TIMEOUT, Fetcher, GuardedFetcher
from .identity import (
    DEFAULT_PLC_URL,
    DidDocument,
    parse_did_document,
    resolve_did,
    resolve_handle,
    verify_handle,
)
from .oauth import (
    AuthorizationServerMetadata,
    authorization_server_metadata,
    protected_resource_issuer,
)
from .resolver import Resolved, resolve
from .syntax import is_did, normalize_did, normalize_handle

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_PLC_URL",
    "DEFAULT_TIMEOUT",
    "AuthorizationServerMetadata",
    "DidDocument",
    "DnsTxtLookup",
    "Fetcher",
    "GuardedFetcher",
    "Resolved",
    "TxtLookup",
    "authorization_server_metadata",
    "client_id_problems",
    "client_metadata",
    "is_did",
    "jwks_uri_for",
    "normalize_did",
    "normalize_handle",
    "parse_did_document",
    "protected_resource_issuer",
    "resolve",
    "resolve_did",
    "resolve_handle",
    "verify_handle",
]
