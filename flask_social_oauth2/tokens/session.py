"""The default token store: tokens encrypted in the Flask session of the browser that signed in."""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from typing import Any, Final

from flask import current_app, has_request_context, request, session
from flask.json.provider import DefaultJSONProvider
from flask.sessions import SecureCookieSessionInterface

from ..config.settings import OAuth2Info
from ..errors import SignInRequiredError, SocialOAuth2Error
from .record import COMPACT_JSON, with_expiry
from .store import IdentityLocks, Renew, refresh_due, seal, unseal

logger = logging.getLogger("flask_social_oauth2")

#: Browsers drop a cookie, or the whole header, past about 4 KB.
MAX_COOKIE_HEADER: Final = 4093
#: Seconds a renewed token is remembered for another request of the same browser that still
#: holds the token it replaced.
SUCCESSOR_TTL: Final = 60.0
_MAX_SUCCESSORS: Final = 1024
#: Characters of itsdangerous's base64 timestamp, at most (8 bytes of seconds).
_TIMESTAMP_CHARS: Final = 11


class SessionTokenStore:
    """Tokens encrypted in the Flask session (the zero-configuration default).

    Only a request of the browser that signed in reaches its identities. The session's whole
    ``Cookie`` header is kept under 4,093 bytes: when one more identity
    would not fit, the oldest identities' tokens are dropped, with a warning. Refreshes are
    one at a time per identity within a process; when several processes serve the app, use
    :class:`~flask_social_oauth2.tokens.SQLAlchemyTokenStore`.

    :param session_key: The session key under which the encrypted tokens are kept.
    """

    def __init__(self, *, session_key: str = "social_oauth2_tokens") -> None:
        self.session_key = session_key
        self._locks = IdentityLocks()
        self._successors: OrderedDict[bytes, tuple[float, str]] = OrderedDict()
        self._successors_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SessionTokenStore(session_key={self.session_key!r})"

    def load(self, provider: str, key: str) -> OAuth2Info | None:
        """See :meth:`TokenStore.load`; ``None`` outside a request."""
        sealed = self._sealed(provider, key)
        return None if sealed is None else unseal(provider, key, sealed)

    def save(self, provider: str, key: str, info: OAuth2Info) -> None:
        """See :meth:`TokenStore.save`.

        :raises SocialOAuth2Error: outside a request.
        """
        self._save_sealed(provider, key, seal(info))  # expires_at reckoned as it is sealed

    def delete(self, provider: str, key: str) -> None:
        """See :meth:`TokenStore.delete`."""
        if not has_request_context():
            return
        entries = self._entries()
        kept = [entry for entry in entries if entry[:2] != [provider, key]]
        if len(kept) != len(entries):
            session[self.session_key] = kept

    def refresh(self, provider: str, key: str, renew: Renew) -> OAuth2Info:
        """See :meth:`TokenStore.refresh`. Another request of the same browser that arrives
        with the replaced token while a renewal runs in this process gets the renewed one."""
        with self._locks.hold(provider, key):
            current = self.load(provider, key)
            if current is None:
                raise SignInRequiredError(provider, f"no token is kept for identity {key!r}")
            if not refresh_due(current):
                return current
            successor = self._successor(provider, key, current)
            if successor is not None:
                self._save_sealed(provider, key, successor)
                return unseal(provider, key, successor)
            try:
                renewed = with_expiry(renew(current))
            except SignInRequiredError:
                self.delete(provider, key)
                raise
            sealed = seal(renewed)
            self._save_sealed(provider, key, sealed)
            self._remember_successor(provider, key, current, sealed)
            return renewed

    # -- the session's list: [[provider, key, sealed token], ...], oldest first ---------------

    def _entries(self, current: Any = None) -> list[list[str]]:
        """The session's entries that have the expected shape; ``current`` is the session
        object when the caller has resolved it already (a proxy lookup less)."""
        entries = (session if current is None else current).get(self.session_key)
        if not isinstance(entries, list):
            return []
        return [
            entry
            for entry in entries
            if isinstance(entry, list)
            and len(entry) == 3
            and all(isinstance(v, str) for v in entry)
        ]

    def _sealed(self, provider: str, key: str) -> str | None:
        if not has_request_context():
            return None
        for entry in self._entries():
            if entry[:2] == [provider, key]:
                return entry[2]
        return None

    def _save_sealed(self, provider: str, key: str, sealed: str) -> None:
        if not has_request_context():
            raise SocialOAuth2Error(
                f"provider {provider!r}: the session token store keeps tokens only in a request"
            )
        current = session._get_current_object()  # type: ignore[attr-defined]
        entries = [entry for entry in self._entries(current) if entry[:2] != [provider, key]]
        entries.append([provider, key, sealed])
        current[self.session_key] = entries
        while _cookie_header_size(current) > MAX_COOKIE_HEADER and entries:
            dropped = entries.pop(0)
            logger.warning(
                "the session cookie would pass %d bytes: dropped the kept token of provider %r"
                " (identity %r), the oldest in this browser; keep tokens in a SQL store to"
                " keep them all",
                MAX_COOKIE_HEADER,
                dropped[0],
                dropped[1],
            )
            current[self.session_key] = entries

    # -- renewed tokens, for the other requests of the same browser ---------------------------

    @staticmethod
    def _fingerprint(provider: str, key: str, info: OAuth2Info) -> bytes:
        replaced = "\0".join((provider, key, info.access_token, info.refresh_token or ""))
        return hashlib.sha256(replaced.encode()).digest()

    def _successor(self, provider: str, key: str, current: OAuth2Info) -> str | None:
        with self._successors_lock:
            found = self._successors.get(self._fingerprint(provider, key, current))
        if found is None or found[0] < time.monotonic():
            return None
        return found[1]

    def _remember_successor(
        self, provider: str, key: str, replaced: OAuth2Info, sealed: str
    ) -> None:
        now = time.monotonic()
        with self._successors_lock:
            self._successors[self._fingerprint(provider, key, replaced)] = (
                now + SUCCESSOR_TTL,
                sealed,
            )
            while self._successors and (
                len(self._successors) > _MAX_SUCCESSORS
                or next(iter(self._successors.values()))[0] < now
            ):
                self._successors.popitem(last=False)


def _cookie_header_size(current: Any = None) -> int:
    """The length of the ``Cookie`` header the browser will send with this session (its other
    cookies as they came, and the session cookie as it would be written now), or an upper bound
    of it that fits. 0 when the app's sessions are not kept in a cookie.

    It is an upper bound first, from the length of the session's JSON alone: the signed value
    is that JSON in base64 (or shorter, compressed), a timestamp and a signature. Only when the
    bound does not fit is the cookie built as Flask will (a second zlib, HMAC and serializer per
    sign-in).

    :param current: The request's session object, when the caller has it (not the proxy).
    """
    app: Any = current_app._get_current_object()  # type: ignore[attr-defined]
    interface = app.session_interface
    if not isinstance(interface, SecureCookieSessionInterface) or not app.secret_key:
        return 0
    name = interface.get_cookie_name(app)
    cookies = request.cookies
    fixed = len(name) + 1  # "session="
    for other, value in cookies.items():
        if other != name:
            fixed += len(other) + len(value) + 3  # "other=value; "
    if current is None:
        current = session._get_current_object()  # type: ignore[attr-defined]
    data = dict(current)  # the object, not the proxy: no proxy lookup per key
    json_bytes = _plain_json_length(app, data)
    if json_bytes is None:
        json_bytes = len(interface.serializer.dumps(data).encode())
    digest_size: int = interface.digest_method(b"").digest_size
    signature = -(-digest_size * 4 // 3)
    bound: int = -(-json_bytes * 4 // 3) + 1 + _TIMESTAMP_CHARS + 1 + signature
    if fixed + bound <= MAX_COOKIE_HEADER:
        return fixed + bound
    serializer = interface.get_signing_serializer(app)
    if serializer is None:
        return 0
    return fixed + len(serializer.dumps(data))


def _plain_json_length(app: Any, data: dict[str, Any]) -> int | None:
    """The length of the session serializer's JSON for ``data``, from the C encoder alone, when
    ``data`` holds only what that serializer writes as plain JSON (dicts of str keys, lists,
    exact str, int, float, bool, None; no one-key dict with a tag-like key) and the app uses
    Flask's default JSON provider (ASCII, compact); ``None`` otherwise: the tagged serializer
    tells it then. A sign-in's session is plain, and this skips the serializer's Python walk
    of every value."""
    if type(app.json) is not DefaultJSONProvider or not app.json.ensure_ascii:
        return None
    if not _plain(data):
        return None
    return len(COMPACT_JSON.encode(data))


def _plain(value: Any) -> bool:
    kind = type(value)
    if kind is str or kind is int or kind is bool or kind is float or value is None:
        return True
    # loops rather than all() over generators, and a str item not walked into: a session is
    # mostly strings
    if kind is list:
        for item in value:  # noqa: SIM110 - all() would run a generator frame per item
            if type(item) is not str and not _plain(item):
                return False
        return True
    if kind is dict:
        if len(value) == 1 and str(next(iter(value))).startswith(" "):
            return False  # TaggedJSONSerializer wraps it (" di")
        for key, item in value.items():
            if type(key) is not str or (type(item) is not str and not _plain(item)):
                return False
        return True
    return False
