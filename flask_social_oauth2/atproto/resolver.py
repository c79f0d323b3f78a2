"""The whole resolution a Bluesky sign-in starts with: a handle or DID to the account's DID,
verified handle, PDS, authorization server and that server's metadata."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ResolutionError
from .dns_txt import TxtLookup
from .fetch import Fetcher, GuardedFetcher
from .identity import DEFAULT_PLC_URL, DidDocument, resolve_did, resolve_handle, verify_handle
from .oauth import (
    AuthorizationServerMetadata,
    authorization_server_metadata,
    protected_resource_issuer,
)
from .syntax import is_did, normalize_handle


@dataclass(frozen=True)
class Resolved:
    """An AT Protocol account, resolved for sign-in.

    :param did: The account's DID.
    :param handle: Its handle, verified both ways; ``None`` when the sign-in started from a DID
        whose document claims no handle that resolves back to it.
    :param pds: The origin of its PDS.
    :param issuer: The PDS's authorization server.
    :param metadata: That server's metadata.
    """

    did: str
    handle: str | None
    pds: str
    issuer: str
    metadata: AuthorizationServerMetadata


def resolve(
    handle_or_did: str,
    *,
    resolver_url: str | None = None,
    plc_url: str = DEFAULT_PLC_URL,
    allow_loopback: bool = False,
    fetch: Fetcher | None = None,
    dns: TxtLookup | None = None,
) -> Resolved:
    """Resolve what a user typed to sign in with.

    A handle resolves to a DID (:func:`~.identity.resolve_handle`), whose document must name the
    handle back; a DID's document gives the handle (the first ``alsoKnownAs`` handle that
    resolves back to the DID). Then the document's PDS, the PDS's authorization server and that
    server's metadata.

    :param handle_or_did: A handle (``alice.bsky.social``, ``@alice.bsky.social``) or a DID.
    :param resolver_url: An XRPC service answering ``com.atproto.identity.resolveHandle``;
        default: each handle's ``https://<handle>/.well-known/atproto-did``.
    :param plc_url: The PLC directory for did:plc.
    :param allow_loopback: Allow ``http`` to loopback servers (development and tests only).
    :param fetch: The fetch to use (default: a :class:`~.fetch.GuardedFetcher` with
        ``allow_loopback``).
    :param dns: The TXT lookup of the DNS method when the HTTPS method gives no DID
        (:class:`~.dns_txt.DnsTxtLookup`); ``None``: no DNS method.
    :raises InvalidIdentifierError: (400) the input is no handle or DID;
        :class:`~flask_social_oauth2.errors.AccountNotFoundError` a handle or a did:plc that
        names no account.
    :raises ResolutionError: (502, 504) any step failed or answered something invalid.
    """
    if fetch is None:
        fetch = GuardedFetcher(allow_loopback=allow_loopback)
    handle: str | None
    if is_did(handle_or_did):
        document = resolve_did(handle_or_did, fetch=fetch, plc_url=plc_url)
        handle = _verified_handle(document, fetch, resolver_url, dns)
    else:
        handle = normalize_handle(handle_or_did, allow_loopback=fetch.allow_loopback)
        did = resolve_handle(handle, fetch=fetch, resolver_url=resolver_url, dns=dns)
        document = resolve_did(did, fetch=fetch, plc_url=plc_url)
        verify_handle(handle, document)
    if document.pds is None:
        raise ResolutionError("no_pds", f"the document of {document.did!r} names no PDS")
    issuer = protected_resource_issuer(document.pds, fetch=fetch)
    metadata = authorization_server_metadata(issuer, fetch=fetch)
    return Resolved(
        did=document.did, handle=handle, pds=document.pds, issuer=issuer, metadata=metadata
    )


def _verified_handle(
    document: DidDocument, fetch: Fetcher, resolver_url: str | None, dns: TxtLookup | None
) -> str | None:
    """The document's handle (the first in ``alsoKnownAs``, as the spec says) if it resolves
    back to the document's DID; else ``None``: the spec shows such an account by its DID."""
    if not document.handles:
        return None
    try:
        did = resolve_handle(document.handles[0], fetch=fetch, resolver_url=resolver_url, dns=dns)
    except ResolutionError:
        return None
    return document.handles[0] if did == document.did else None
