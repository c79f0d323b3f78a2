"""The syntax of AT Protocol handles and DIDs (https://atproto.com/specs/handle,
https://atproto.com/specs/did): pure functions, no I/O."""

from __future__ import annotations

import re
from typing import Final

from ..errors import InvalidIdentifierError

#: The longest handle (a DNS name).
MAX_HANDLE_LENGTH: Final = 253
#: The longest DID taken (the spec allows 2 KiB; did:plc and did:web are far shorter).
MAX_DID_LENGTH: Final = 2048

_LABEL: Final = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
#: Top-level domains the handle spec refuses (never a real public name).
RESERVED_TLDS: Final = frozenset(
    {"alt", "arpa", "example", "internal", "invalid", "local", "localhost", "onion"}
)
#: ``.test`` is refused too, except where loopback servers are allowed (the test servers'
#: accounts are ``alice.test`` and ``bob.test``).
TEST_TLD: Final = "test"
_PLC: Final = re.compile(r"did:plc:[a-z2-7]{24}")
_WEB_PREFIX: Final = "did:web:"


def _invalid(what: str, reason: str = "invalid_handle") -> InvalidIdentifierError:
    return InvalidIdentifierError(reason, what)


def normalize_handle(text: str, *, allow_loopback: bool = False) -> str:
    """The handle ``text`` names, in its normal (lower-case) form.

    A leading ``@`` and surrounding white space are dropped, as people type them. The rest must
    be a handle: ASCII, two or more dot-separated labels of 1 to 63 characters from ``a-z``,
    ``0-9`` and ``-`` (not first or last), at most 253 characters, a last label that does not
    start with a digit, and not under a reserved top-level domain (``.local``, ``.arpa``,
    ``.invalid``, ``.localhost``, ``.internal``, ``.onion``, ``.alt``, ``.example``; ``.test``
    only with ``allow_loopback``).

    :raises InvalidIdentifierError: (400) for anything else.
    """
    if not isinstance(text, str):
        raise _invalid("a handle must be text")
    # Checked before lower(): "K" (KELVIN SIGN) lowers to an ASCII "k".
    if len(text) > MAX_HANDLE_LENGTH + 64 or not text.isascii():
        raise _invalid("a handle is at most 253 ASCII characters")
    handle = text.strip().removeprefix("@").lower()
    if len(handle) > MAX_HANDLE_LENGTH:
        raise _invalid("a handle is at most 253 characters")
    labels = handle.split(".")
    if len(labels) < 2 or not all(_LABEL.fullmatch(label) for label in labels):
        raise _invalid("a handle is a domain name of two or more labels (e.g. alice.bsky.social)")
    tld = labels[-1]
    if tld[0].isdigit():
        raise _invalid("a handle's top-level domain does not start with a digit")
    if tld in RESERVED_TLDS or (tld == TEST_TLD and not allow_loopback):
        raise _invalid(f"a handle is never under .{tld}")
    return handle


def is_did(text: str) -> bool:
    """Whether ``text`` looks like a DID (``did:`` and a method), the way to tell a DID from a
    handle in a sign-in form. :func:`normalize_did` says whether it is one this supports."""
    return isinstance(text, str) and text.strip().startswith("did:")


def normalize_did(text: str, *, allow_loopback: bool = False) -> str:
    """The DID ``text`` names, if it is one AT Protocol accounts use: ``did:plc:`` and 24
    base32 characters, or ``did:web:`` and a host name (a domain name as for a handle; a port,
    percent-encoded as ``%3A``, only on ``localhost`` with ``allow_loopback``). No path, no IP
    address.

    :raises InvalidIdentifierError: (400) for anything else.
    """
    if not isinstance(text, str) or len(text) > MAX_DID_LENGTH or not text.isascii():
        raise _invalid("not a DID", "invalid_did")
    did = text.strip()
    if _PLC.fullmatch(did):
        return did
    if not did.startswith(_WEB_PREFIX):
        raise _invalid("only did:plc and did:web identities are supported", "invalid_did")
    host = did[len(_WEB_PREFIX) :]
    if allow_loopback and _is_loopback_web_host(host):
        return did
    try:
        normal = normalize_handle(host, allow_loopback=allow_loopback)
    except InvalidIdentifierError:
        raise _invalid(
            "a did:web names a host name (e.g. did:web:example.com)", "invalid_did"
        ) from None
    if normal != host:
        raise _invalid("a did:web names a lower-case host name", "invalid_did")
    return did


def did_web_host(did: str) -> str:
    """The host (with ``:port`` for a loopback development DID) a did:web names; ``did`` is
    normalized already."""
    return did[len(_WEB_PREFIX) :].replace("%3A", ":")


def _is_loopback_web_host(host: str) -> bool:
    name, _, port = host.partition("%3A")
    return name == "localhost" and (not port or (port.isdigit() and 0 < int(port) < 65536))
