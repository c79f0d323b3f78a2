"""URL checks shared by configuration validation and the flow."""

from __future__ import annotations

import ipaddress
import re
from typing import Final
from urllib.parse import SplitResult, urlsplit

#: A space or control character (code points up to 0x20, and 0x7F), found by one regular
#: expression rather than a loop over the characters in Python: every address of every block
#: is checked.
_SPACE_OR_CONTROL: Final = re.compile(r"[\x00-\x20\x7f]")


def split_absolute_url(url: str) -> SplitResult | str:
    """Split ``url`` if it is an absolute ``http(s)`` URL fit for an OAuth endpoint.

    :return: The split URL, or a sentence saying what is wrong with it.
    """
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError for a port that is not a number in range
    except ValueError:
        return "is not a valid URL"
    del port
    if parts.scheme not in ("http", "https"):
        return "must be an absolute http(s) URL"
    if not parts.hostname:
        return "has no host"
    if "@" in parts.netloc:
        return "must not contain user credentials"
    if parts.fragment or url.endswith("#"):
        return "must not contain a fragment (RFC 6749 3.1)"
    if _SPACE_OR_CONTROL.search(url):
        return "must not contain spaces or control characters"
    return parts


def is_loopback_host(hostname: str) -> bool:
    """Whether ``hostname`` (as :attr:`SplitResult.hostname` gives it) is a loopback host.

    ``localhost``, ``127.0.0.0/8`` and ``::1`` are; ``127.0.0.1.attacker.test`` is not.
    """
    if hostname == "localhost":
        return True
    try:
        address = ipaddress.ip_address(hostname)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def check_endpoint_url(url: str) -> str | None:
    """Check a provider endpoint (authorization, token or profile address).

    It must be absolute https; plain http is accepted only for a loopback host.

    :return: ``None`` when acceptable, else a sentence saying what is wrong.
    """
    parts = split_absolute_url(url)
    if isinstance(parts, str):
        return parts
    if parts.scheme == "http" and not is_loopback_host(parts.hostname or ""):
        return "must use https (plain http is accepted only for loopback hosts)"
    return None


def check_redirect_url(url: str) -> str | None:
    """Check a ``redirectURL``: an absolute http(s) URL or a path starting with ``/``.

    :return: ``None`` when acceptable, else a sentence saying what is wrong.
    """
    if url.startswith("/") and not url.startswith("//") and "\\" not in url:
        if _SPACE_OR_CONTROL.search(url) or "#" in url:
            return "must not contain spaces, control characters or a fragment"
        return None
    parts = split_absolute_url(url)
    if isinstance(parts, str):
        return f"{parts}, or a path starting with '/'"
    return None
