"""AT Protocol identity: a handle to its DID, a DID to its document, and the check that the two
name each other (https://atproto.com/specs/handle, https://atproto.com/specs/did).

Handles resolve through an XRPC resolver service when one is configured
(``com.atproto.identity.resolveHandle``), else through ``https://<handle>/.well-known/atproto-did``
and, when that gives no DID, the spec's other method: the DNS TXT record ``_atproto.<handle>``
(:mod:`.dns_txt`; custom-domain handles often have only that).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

from ..errors import AccountNotFoundError, InvalidIdentifierError, ResolutionError
from ..urls import is_loopback_host, split_absolute_url
from .dns_txt import TxtLookup, did_from_txt
from .fetch import Fetcher
from .syntax import did_web_host, normalize_did, normalize_handle

#: The default PLC directory, where did:plc documents live.
DEFAULT_PLC_URL: Final = "https://plc.directory"
_PDS_SERVICE: Final = "#atproto_pds"
_PDS_TYPE: Final = "AtprotoPersonalDataServer"
_AT_PREFIX: Final = "at://"


@dataclass(frozen=True)
class DidDocument:
    """What sign-in needs of a DID document.

    :param did: The DID (the document's ``id``).
    :param handles: The valid handles its ``alsoKnownAs`` claims (``at://`` entries), in order.
    :param pds: The origin of its personal data server (the ``#atproto_pds`` service of type
        ``AtprotoPersonalDataServer``), or ``None`` when it names none.
    """

    did: str
    handles: tuple[str, ...]
    pds: str | None


def resolve_handle(
    handle: str,
    *,
    fetch: Fetcher,
    resolver_url: str | None = None,
    dns: TxtLookup | None = None,
) -> str:
    """The DID ``handle`` claims to be, through ``resolver_url``'s
    ``com.atproto.identity.resolveHandle``, else ``https://<handle>/.well-known/atproto-did``,
    and when that fails, the ``did=`` TXT record of ``_atproto.<handle>`` through ``dns``
    (no DNS method without it).

    The answer is only the handle's claim: :func:`verify_handle` checks that the DID's
    document claims the handle back.

    :raises InvalidIdentifierError: (400) a malformed handle; :class:`AccountNotFoundError` for
        one that neither the resolver nor the DNS method knows.
    :raises ResolutionError: the resolver failed or answered something that is not a DID.
    """
    handle = normalize_handle(handle, allow_loopback=fetch.allow_loopback)
    if resolver_url is not None:
        url = (
            f"{resolver_url.rstrip('/')}/xrpc/com.atproto.identity.resolveHandle"
            f"?handle={quote(handle, safe='')}"
        )
        try:
            answer = fetch.json(url)
        except ResolutionError as failure:
            if failure.http_status in (400, 404):
                raise AccountNotFoundError(
                    "handle_not_found", f"the resolver does not know {handle!r}"
                ) from None
            raise
        did: Any = answer.get("did")
    else:
        try:
            did = fetch.text(f"https://{handle}/.well-known/atproto-did").strip()
        except ResolutionError as failure:
            did = _did_from_dns(handle, dns, failure)
    if not isinstance(did, str):
        raise ResolutionError("bad_did", f"the handle {handle!r} resolved to no DID")
    try:
        return normalize_did(did, allow_loopback=fetch.allow_loopback)
    except InvalidIdentifierError:
        raise ResolutionError(
            "bad_did", f"the handle {handle!r} resolved to something that is not a DID"
        ) from None


def _did_from_dns(handle: str, dns: TxtLookup | None, failure: ResolutionError) -> str:
    """The DID of ``handle``'s TXT record, after the HTTPS method failed with ``failure``.

    :raises AccountNotFoundError: neither method knows the handle.
    :raises ResolutionError: ``failure`` (chained to a DNS failure if there was one), or
        ``"ambiguous_dns"``.
    """
    claim: str | None = None
    if dns is not None:
        try:
            claim = did_from_txt(handle, dns(f"_atproto.{handle}"))
        except ResolutionError as dns_failure:
            if dns_failure.reason == "ambiguous_dns":
                raise
            raise failure from dns_failure
    if claim is not None:
        return claim
    # no DID by either method where the handle's host has no web server: a handle that does
    # not exist, the user's input at fault
    if failure.http_status == 404 or (dns is not None and failure.reason == "dns"):
        raise AccountNotFoundError("handle_not_found", f"{handle!r} names no DID") from None
    raise failure


def resolve_did(did: str, *, fetch: Fetcher, plc_url: str = DEFAULT_PLC_URL) -> DidDocument:
    """The document of ``did``: did:plc from the PLC directory ``plc_url``, did:web from
    ``https://<host>/.well-known/did.json``.

    :raises InvalidIdentifierError: (400) ``did`` is not a did:plc or did:web;
        :class:`AccountNotFoundError` (``"did_not_found"``) a did:plc the PLC directory does not
        know (404) or no longer serves (410, a deleted account): the DID someone typed, or the
        one their handle names, is no account.
    :raises ResolutionError: (502, 504) the document could not be fetched or is not valid (see
        :func:`parse_did_document`); a did:web whose host has no document is ``"did_not_found"``
        too, but a 502: that host's fault, not the person's.
    """
    did = normalize_did(did, allow_loopback=fetch.allow_loopback)
    if did.startswith("did:plc:"):
        url = f"{plc_url.rstrip('/')}/{did}"
    else:
        host = did_web_host(did)
        scheme = "http" if is_loopback_host(host.partition(":")[0]) else "https"
        url = f"{scheme}://{host}/.well-known/did.json"
    try:
        data = fetch.json(url)
    except ResolutionError as failure:
        if failure.http_status in (404, 410):
            unknown = AccountNotFoundError if did.startswith("did:plc:") else ResolutionError
            raise unknown(
                "did_not_found", f"no document for {did!r}", http_status=failure.http_status
            ) from None
        raise
    return parse_did_document(data, did, allow_loopback=fetch.allow_loopback)


def parse_did_document(
    data: dict[str, Any], did: str, *, allow_loopback: bool = False
) -> DidDocument:
    """Read a DID document fetched for ``did``.

    Its ``id`` must be ``did``; ``alsoKnownAs`` entries that are not valid ``at://`` handles are
    left out; the PDS must be an ``https`` origin (``http`` only on a loopback host with
    ``allow_loopback``).

    :raises ResolutionError: the document is for another DID, or malformed, or names an unsafe
        PDS.
    """
    if data.get("id") != did:
        raise ResolutionError("did_mismatch", f"the document fetched for {did!r} is another's")
    aliases = data.get("alsoKnownAs", [])
    services = data.get("service", [])
    if not isinstance(aliases, list) or not isinstance(services, list):
        raise ResolutionError("bad_document", f"the document of {did!r} is malformed")
    handles: list[str] = []
    for alias in aliases:
        if isinstance(alias, str) and alias.startswith(_AT_PREFIX):
            try:
                handle = normalize_handle(alias[len(_AT_PREFIX) :], allow_loopback=allow_loopback)
            except InvalidIdentifierError:
                continue
            if handle not in handles:
                handles.append(handle)
    pds = None
    for service in services:
        if (
            isinstance(service, dict)
            and service.get("id") in (_PDS_SERVICE, f"{did}{_PDS_SERVICE}")
            and service.get("type") == _PDS_TYPE
        ):
            endpoint = service.get("serviceEndpoint")
            pds = check_origin(endpoint, allow_loopback=allow_loopback, what=f"{did!r}'s PDS")
            break
    return DidDocument(did=did, handles=tuple(handles), pds=pds)


def verify_handle(handle: str, document: DidDocument) -> None:
    """Check that ``document`` claims ``handle`` back (its ``alsoKnownAs``): with
    :func:`resolve_handle` the bidirectional check, so that nobody can pass off an account
    as theirs by pointing a handle at its DID.

    :raises ResolutionError: ``"handle_mismatch"``.
    """
    if handle.lower() not in document.handles:
        raise ResolutionError(
            "handle_mismatch", f"the document of {document.did!r} does not name {handle!r}"
        )


def check_origin(url: object, *, allow_loopback: bool, what: str) -> str:
    """``url`` as an origin (``scheme://host[:port]``, no trailing slash): an ``https`` URL with
    no credentials, query or fragment and at most ``/`` as path; ``http`` only on a loopback
    host with ``allow_loopback``.

    :raises ResolutionError: ``"bad_url"`` or ``"insecure_url"``, naming ``what``.
    """
    if not isinstance(url, str) or not url.isascii():
        raise ResolutionError("bad_url", f"{what} is not a URL")
    parts = split_absolute_url(url)
    if isinstance(parts, str) or parts.path not in ("", "/") or parts.query or "?" in url:
        raise ResolutionError("bad_url", f"{what} is not an origin URL")
    if parts.scheme != "https" and not (allow_loopback and is_loopback_host(parts.hostname or "")):
        raise ResolutionError("insecure_url", f"{what} is not https")
    return f"{parts.scheme}://{parts.netloc.lower()}"
