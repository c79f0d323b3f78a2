"""The browser-bound store of started sign-in flows: a signed cookie of the extension's own.

Each flow started in a browser is recorded in that browser's cookie: the random state, the
provider, the exact redirect_uri, the PKCE verifier, the ``next`` target, the OpenID nonce and the
time. A callback is accepted only with a state found in the same browser's cookie, and the entry is
removed as it is used. Nothing is kept on the server, so any process that shares ``SECRET_KEY``
serves any step.

A captured cookie together with its callback URL could be replayed until the state expires; the
provider's single-use code is the second line of defence.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import time
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from hashlib import sha1
from types import MappingProxyType
from typing import Any, Final

from flask import Flask, after_this_request, current_app, g, request
from itsdangerous import BadData, TimestampSigner
from itsdangerous.encoding import base64_decode, base64_encode, want_bytes
from werkzeug.datastructures import Headers
from werkzeug.http import dump_cookie

from ..errors import SocialOAuth2Error

#: Abandoned flows are dropped, oldest first, past this many...
MAX_PENDING_FLOWS: Final = 8
#: ...or past this many characters of cookie value, well under browsers' 4,096 byte limit.
MAX_COOKIE_VALUE: Final = 3500
_SALT: Final = "flask-social-oauth2.state"
_MAX_INFLATED: Final = 64 * 1024


@dataclass(frozen=True, slots=True)
class PendingFlow:
    """One sign-in started in this browser and not yet finished."""

    state: str
    provider: str
    redirect_uri: str
    verifier: str | None
    next_url: str | None
    created: int
    nonce: str | None = None
    #: What the flow is bound to: a digest of the settings that started it (see
    #: :func:`flask_social_oauth2.web.callback.flow_binding`).
    binding: str = ""
    #: The flow's DPoP private key, encrypted with the app's token keys (never in clear in the
    #: cookie, which is signed, not encrypted); ``None`` without DPoP.
    dpop_key: str | None = None
    #: What the provider bound the flow to when it started, as ``(name, value)`` pairs (the
    #: AT Protocol account's DID, handle, PDS and authorization server): signed with the
    #: cookie, not secret, read back by the provider at the callback; ``()`` for most providers.
    context: tuple[tuple[str, str], ...] = ()

    def bound(self, name: str) -> str | None:
        """The value the flow bound under ``name`` (see :attr:`context`), or ``None``."""
        for key, value in self.context:
            if key == name:
                return value
        return None

    def __repr__(self) -> str:
        # state, verifier, nonce and key are secrets of the flow: shown as present or absent.
        shown = {
            "state": "***",
            "verifier": self.verifier,
            "nonce": self.nonce,
            "dpop_key": self.dpop_key,
        }
        masked = {name: None if value is None else "***" for name, value in shown.items()}
        return (
            f"PendingFlow(provider={self.provider!r}, redirect_uri={self.redirect_uri!r}, "
            f"next_url={self.next_url!r}, created={self.created!r}, "
            + ", ".join(f"{name}={value!r}" for name, value in masked.items())
            + f", context={[key for key, _ in self.context]!r})"
        )

    __str__ = __repr__

    def to_list(self) -> list[Any]:
        """The compact form kept in the cookie."""
        return [
            self.state,
            self.provider,
            self.redirect_uri,
            self.verifier,
            self.next_url,
            self.created,
            self.nonce,
            self.binding,
            *([] if self.dpop_key is None and not self.context else [self.dpop_key]),
            *([dict(self.context)] if self.context else []),
        ]

    @classmethod
    def from_list(cls, item: Any) -> PendingFlow | None:
        """Read an entry, or ``None`` if it is not of the expected shape."""
        if not isinstance(item, list) or len(item) not in (8, 9, 10):
            return None
        state, provider, redirect_uri, verifier, next_url, created, nonce, binding = item[:8]
        dpop_key = item[8] if len(item) >= 9 else None
        bound = item[9] if len(item) == 10 else {}
        if not isinstance(bound, dict):
            return None
        for key, value in bound.items():
            if not (isinstance(key, str) and isinstance(value, str)):
                return None
        # each check written out, not a generator per check: every callback reads the cookie
        if not (
            isinstance(state, str)
            and isinstance(provider, str)
            and isinstance(redirect_uri, str)
            and isinstance(binding, str)
            and isinstance(created, int)
            and not isinstance(created, bool)
            and (verifier is None or isinstance(verifier, str))
            and (next_url is None or isinstance(next_url, str))
            and (nonce is None or isinstance(nonce, str))
            and (dpop_key is None or isinstance(dpop_key, str))
        ):
            return None
        return cls(
            state,
            provider,
            redirect_uri,
            verifier,
            next_url,
            created,
            nonce,
            binding,
            dpop_key,
            tuple(bound.items()),
        )


class _Base64JSON:
    """The payload format of :class:`~itsdangerous.URLSafeTimedSerializer` (compact JSON in
    URL-safe base64), without the zlib attempt: random state and verifier hardly compress, so
    trying would only slow every write. Compressed values (a leading ``.``) are still read, to a
    bounded size."""

    @staticmethod
    def dumps(obj: Any) -> str:
        text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
        return base64_encode(text.encode("utf-8")).decode("ascii")

    @staticmethod
    def loads(payload: str) -> Any:
        if payload.startswith("."):
            inflate = zlib.decompressobj()
            data = inflate.decompress(base64_decode(payload[1:]), _MAX_INFLATED)
            if inflate.unconsumed_tail:
                raise ValueError("compressed state cookie is too large")
            return json.loads(data)
        return json.loads(base64_decode(payload))


class StateSerializer:
    """The state cookie's value: what :class:`~itsdangerous.URLSafeTimedSerializer` writes and
    reads (its payload, signed with its :class:`~itsdangerous.TimestampSigner`, same salt, key
    derivation and HMAC-SHA1), made with one signer built once per key set, through its public
    ``sign`` and ``unsign``. The serializer classes would make new signers on every ``dumps``
    and ``loads``, one per key; the signer is given ``hashlib.sha1`` itself, whose HMAC runs in
    C (itsdangerous' default is a Python wrapper of it, which ``hmac`` runs in Python).

    :param secret_keys: The key, or the keys oldest first: the last signs, all verify.
    """

    __slots__ = ("_signer", "salt")

    def __init__(
        self, secret_keys: str | bytes | Sequence[str | bytes], salt: str | bytes = _SALT
    ) -> None:
        self.salt = want_bytes(salt)
        keys: list[Any] = [secret_keys] if isinstance(secret_keys, str | bytes) else [*secret_keys]
        self._signer = TimestampSigner(keys, salt=self.salt, digest_method=sha1)

    def dumps(self, obj: Any) -> str:
        """``obj`` as a signed, timestamped value."""
        return self._signer.sign(_Base64JSON.dumps(obj)).decode("ascii")

    def loads(self, value: str, max_age: int) -> Any:
        """What ``value`` holds, if it was signed with one of the keys at most ``max_age``
        seconds ago.

        :raises itsdangerous.BadData: for a bad signature or an expired value.
        :raises ValueError: for a payload that is not (bounded) JSON.
        """
        payload = self._signer.unsign(value, max_age=max_age)
        return _Base64JSON.loads(payload.decode("utf-8"))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} salt={self.salt!r}>"


def app_scope(*parts: str) -> str:
    """A short digest of what tells an app apart from others on the same host (its import name
    and route), for the default cookie name and the signing salt."""
    digest = hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()
    return digest[:8]


def make_serializer(
    secret_key: str | bytes, fallbacks: Sequence[str | bytes] = (), salt: str = _SALT
) -> StateSerializer:
    """The signer for the state cookie: signs with ``secret_key``, also accepts ``fallbacks``
    (Flask's ``SECRET_KEY_FALLBACKS``) so that keys can be rotated. Built once per key set
    (see :meth:`StateCookieStore.serializer`)."""
    keys: list[Any] = [*fallbacks, secret_key]
    return StateSerializer(keys, salt=salt)


def decode(serializer: StateSerializer, value: str | None, ttl: int, now: int) -> list[PendingFlow]:
    """Read the flows of a cookie value; a bad, foreign or expired cookie reads as no flows."""
    if not value or len(value) > MAX_COOKIE_VALUE * 2:
        return []
    try:
        items = serializer.loads(value, max_age=ttl)
    except (BadData, ValueError, TypeError, RecursionError):
        return []
    if not isinstance(items, list):
        return []
    flows = []
    for item in items[:MAX_PENDING_FLOWS]:
        flow = PendingFlow.from_list(item)
        if flow is not None and now - ttl <= flow.created <= now + 60:
            flows.append(flow)
    return flows


def encode(serializer: StateSerializer, flows: Sequence[PendingFlow]) -> str | None:
    """The cookie value for ``flows`` (``None`` when there are none), dropping the oldest flows
    until it fits :data:`MAX_PENDING_FLOWS` and :data:`MAX_COOKIE_VALUE`."""
    kept = sorted(flows, key=lambda flow: flow.created)[-MAX_PENDING_FLOWS:]
    while kept:
        value = serializer.dumps([flow.to_list() for flow in kept])
        if len(value) <= MAX_COOKIE_VALUE:
            return value
        kept = kept[1:]
    return None


def find(flows: Iterable[PendingFlow], state: str) -> PendingFlow | None:
    """The flow whose state equals ``state``, compared in constant time."""
    found = None
    candidate = state.encode()
    for flow in flows:
        if hmac.compare_digest(flow.state.encode(), candidate):
            found = flow
    return found


def now() -> int:
    """The time as the cookie records it."""
    return int(time.time())


#: Headers of every response that starts or ends a flow (RFC 9700 4.2.4: no code or state in a
#: Referer, nothing of the flow in a cache).
FLOW_PAGE_HEADERS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
        "X-Content-Type-Options": "nosniff",
    }
)

_G_FLOWS: Final = "_social_oauth2_flows"
_G_DIRTY: Final = "_social_oauth2_flows_dirty"


class StateCookieStore:
    """The pending flows of the current browser, kept in a signed cookie of the extension's own.

    One store per app, made in ``init_app``; it keeps only app-wide values (the cookie's name,
    path and lifetime, and the signer of the app's current ``SECRET_KEY``). A request's flows
    live in :data:`flask.g` and are written to its response.

    On https the cookie is named ``__Host-<name>`` with ``Path=/`` and ``Secure``, as that prefix
    requires (RFC 6265bis 4.1.3.2): a sibling subdomain cannot plant one, and a cookie without
    the prefix is not read there. ``path`` narrows the cookie on plain http only.

    :param name: The cookie's name (without the ``__Host-`` prefix).
    :param path: The cookie's path on plain http.
    :param ttl: Seconds a started flow stays valid.
    :param scope: Mixed into the signing salt, so that another app on the same host with the same
        ``SECRET_KEY`` (another scope) cannot read or plant this app's flows.
    """

    __slots__ = ("_secure_name", "_serializers", "name", "path", "salt", "ttl")

    def __init__(self, *, name: str, path: str = "/", ttl: int = 600, scope: str = "") -> None:
        self.name = name
        self._secure_name = f"__Host-{name}"
        self.path = path
        self.ttl = ttl
        self.salt = f"{_SALT}/{scope}/{name}" if scope else _SALT
        #: suffix -> (the key set it was built for, the signer)
        self._serializers: dict[str, tuple[Any, StateSerializer]] = {}

    def cookie_name(self, secure: bool) -> str:
        """The cookie's name on https (``secure``) or plain http."""
        return self._secure_name if secure else self.name

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"

    def serializer(self, app: Flask, suffix: str = "") -> StateSerializer:
        """The cookie's signer for ``app``'s current ``SECRET_KEY`` (and fallbacks), built once
        per key set.

        :param suffix: Added to the salt, for a companion cookie of this one (the ID-token
            sign-in's nonces), which no other cookie's value then passes for.
        :raises SocialOAuth2Error: when the app has no ``SECRET_KEY``.
        """
        secret_key = app.secret_key
        if not secret_key:
            raise SocialOAuth2Error(
                "flask-social-oauth2 needs the app's SECRET_KEY to sign the sign-in state cookie"
            )
        fallbacks = tuple(app.config.get("SECRET_KEY_FALLBACKS") or ())
        key = (secret_key, fallbacks)
        cached = self._serializers.get(suffix)
        if cached is None or cached[0] != key:
            cached = (key, make_serializer(secret_key, fallbacks, self.salt + suffix))
            self._serializers[suffix] = cached
        return cached[1]

    def load(self) -> list[PendingFlow]:
        """The current browser's pending flows, read once per request (kept in :data:`flask.g`)."""
        request_g = g._get_current_object()
        flows: list[PendingFlow] | None = request_g.get(_G_FLOWS)  # no AttributeError raised
        if flows is None:
            req = request._get_current_object()  # type: ignore[attr-defined]
            cookies = req.cookies
            name = self._secure_name if req.is_secure else self.name
            # looked for first: a missing cookie's get raises and catches an HTTP exception
            value = cookies.get(name) if name in cookies else None
            if value:
                app = current_app._get_current_object()  # type: ignore[attr-defined]
                flows = decode(self.serializer(app), value, self.ttl, now())
            else:
                flows = []  # a browser's first sign-in: nothing to verify
            setattr(request_g, _G_FLOWS, flows)
        return list(flows)

    def arrived(self) -> bool:
        """Whether the current request carries this store's cookie at all (valid or not)."""
        req = request._get_current_object()  # type: ignore[attr-defined]
        return (self._secure_name if req.is_secure else self.name) in req.cookies

    def save(self, flows: list[PendingFlow]) -> None:
        """Replace the current browser's pending flows; the cookie is written on the response."""
        request_g = g._get_current_object()
        first_save = request_g.get(_G_DIRTY) is None
        setattr(request_g, _G_FLOWS, list(flows))
        setattr(request_g, _G_DIRTY, True)
        if first_save:
            after_this_request(self._write_cookie)

    def _write_cookie(self, response: Any) -> Any:
        app = current_app._get_current_object()  # type: ignore[attr-defined]
        flows = g._get_current_object().get(_G_FLOWS)
        value = encode(self.serializer(app), flows) if flows else None
        cookie = self._set_cookie_value(
            value or "", request.is_secure, app.config["MAX_COOKIE_SIZE"]
        )
        response.headers.add("Set-Cookie", cookie)
        mark_browser_bound(response.headers, FLOW_PAGE_HEADERS)
        return response

    def _set_cookie_value(self, value: str, secure: bool, max_size: int = 4093) -> str:
        """The ``Set-Cookie`` value of the cookie holding ``value`` (``""`` deletes it), with
        ``Max-Age`` alone (RFC 6265 5.2.2; what every current browser reads; an ``Expires``
        beside it cost a date formatted here and parsed again by every client), ``HttpOnly``
        and ``SameSite=Lax``."""
        name = self._secure_name if secure else self.name
        return flow_cookie(
            name, value, ttl=self.ttl, path=self.path, secure=secure, max_size=max_size
        )


def flow_cookie(
    name: str, value: str, *, ttl: int, path: str, secure: bool, max_size: int = 4093
) -> str:
    """The ``Set-Cookie`` value of a flow cookie ``name`` holding ``value`` (``""`` deletes it):
    ``Max-Age`` alone, ``HttpOnly``, ``SameSite=Lax``, and on https (``secure``) ``Secure``
    with ``Path=/`` (``name`` then has the ``__Host-`` prefix), else ``path``."""
    if not value:  # the same few deletions on every finished sign-in: made once each
        return _deletion(name, path=path, secure=secure)
    return dump_cookie(
        name,
        value,
        max_age=ttl,
        path="/" if secure else path,
        secure=secure,
        httponly=True,
        samesite="Lax",
        sync_expires=False,
        max_size=max_size,
    )


@functools.lru_cache(maxsize=64)
def _deletion(name: str, *, path: str, secure: bool) -> str:
    return dump_cookie(
        name,
        "",
        max_age=0,
        path="/" if secure else path,
        secure=secure,
        httponly=True,
        samesite="Lax",
        sync_expires=False,
    )


def mark_browser_bound(headers: Headers, defaults: Mapping[str, str]) -> None:
    """Mark an answer that reads or writes a browser's cookie: ``Cookie`` in its ``Vary``
    header, and each of ``defaults`` the answer does not set itself. Each header is looked for
    once (a :class:`~werkzeug.datastructures.Headers` lookup that misses raises and catches an
    HTTP exception inside werkzeug), and ``Vary`` is not parsed into a ``HeaderSet`` and
    written back."""
    present = {name.lower() for name, _ in headers}
    current = headers["Vary"].strip() if "vary" in present else ""
    if not current:
        headers["Vary"] = "Cookie"
    elif "cookie" not in (item.strip().lower() for item in current.split(",")):
        headers["Vary"] = f"{current}, Cookie"
    for header, default in defaults.items():
        if header.lower() not in present:
            headers.add(header, default)
