"""Addresses that depend on the current request: the redirect_uri and the ``next`` target."""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import urlsplit

from flask import request

MAX_NEXT_LENGTH: Final = 512
_NOT_PRINTABLE_ASCII: Final = re.compile(r"[^\x21-\x7e]")


def resolve_redirect_uri(redirect_url: str) -> str:
    """The absolute redirect_uri for ``redirect_url``.

    An absolute URL is used as it is. A path is a path of the app, like the routes: it is
    resolved against the scheme, host and script root (the prefix the app is mounted under,
    usually none) of the current request as Flask sees them, so ``TRUSTED_HOSTS`` (a foreign
    host is a 400) and a ``ProxyFix`` installed by the app apply; nothing else of the request
    is trusted.
    """
    if not redirect_url.startswith("/"):
        return redirect_url
    req = request._get_current_object()  # type: ignore[attr-defined]  # once, not thrice
    return f"{req.scheme}://{req.host}{req.script_root}{redirect_url}"


def safe_next_path(value: str | None) -> str | None:
    """``value`` if it is a same-origin path, else ``None``.

    Refuses absolute and scheme-relative URLs (``https://evil``, ``//evil``, ``////evil``),
    backslash tricks (``/\\evil``, ``\\\\evil``), ``https:evil``, ``javascript:``, and any
    white space, control or non-ASCII character (``/%09/evil`` arrives as a tab; a
    non-ASCII path must come percent-encoded, as ``url_for`` writes it).
    """
    if not value or len(value) > MAX_NEXT_LENGTH:
        return None
    if not value.startswith("/") or value.startswith("//") or "\\" in value:
        return None
    if _NOT_PRINTABLE_ASCII.search(value):
        return None
    try:
        parts = urlsplit(value)
    except ValueError:
        return None
    if parts.scheme or parts.netloc:
        return None
    return value
