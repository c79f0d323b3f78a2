"""DPoP (RFC 9449): the key of a sign-in, the proofs it signs, and the servers' nonces.

A sender-constrained token is bound to a key pair made for one sign-in (:class:`DPoPKey`, EC
P-256, ES256). Every request that uses or obtains such a token carries a fresh proof
(:func:`proof`), a JWT signed by that key over the request's method and address. A server may
demand that proofs repeat a nonce it chose: it answers ``use_dpop_nonce``
(:func:`nonce_requested`) with the nonce in a ``DPoP-Nonce`` header (:func:`new_nonce`), and the
client remembers the last one of each server (:class:`NonceStore`, :data:`nonces`). A key
kept with its tokens is read back with :meth:`DPoPKey.load`, once per process and key
(:class:`KeyCache`, :data:`loaded_keys`), not once per request.

joserfc does all the JOSE work; it is imported when first needed, so that importing this module
costs nothing until DPoP is used. Nothing here knows of Flask or of HTTP clients: callers hand in
the status, headers and body of an answer.

Example::

    key = DPoPKey.generate()
    headers = {"DPoP": proof(key, "POST", token_url, nonce=nonces.get(token_url))}
    # ... send; then, with the answer:
    nonces.remember(token_url, new_nonce(answer.headers))
    if nonce_requested(answer.status, answer.headers, answer.body):
        ...  # retry once with a fresh proof and nonce=nonces.get(token_url)
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import re
import secrets
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, NoReturn, TypeVar
from urllib.parse import SplitResult, urlsplit

from .. import caches
from .recently_used import RecentlyUsed
from .www_authenticate import challenges

if TYPE_CHECKING:
    from joserfc.jwk import ECKey
    from joserfc.jws import JWSRegistry

__all__ = [
    "ALGORITHM",
    "DPoPKey",
    "KeyCache",
    "NonceStore",
    "authorization",
    "loaded_keys",
    "new_nonce",
    "nonce_requested",
    "nonces",
    "proof",
    "send_with_nonce",
]

#: The signing algorithm of every proof (the one the AT Protocol and FAPI 2.0 require).
ALGORITHM: Final = "ES256"
#: The ``typ`` header of a proof (RFC 9449 4.2).
PROOF_TYPE: Final = "dpop+jwt"
#: The error code of an answer that asks for a nonce (RFC 9449 8 and 9).
USE_DPOP_NONCE: Final = "use_dpop_nonce"
#: The longest nonce remembered: RFC 9449 sets no limit; real ones are some dozens of characters.
MAX_NONCE_LENGTH: Final = 512
#: Bytes of randomness in a proof's ``jti`` (RFC 9449 11.1 asks for at least 96 bits).
JTI_BYTES: Final = 16
#: The longest exported key :meth:`DPoPKey.load` reads (an exported P-256 key is ~180 bytes).
_MAX_EXPORT_LENGTH: Final = 4096
#: The largest error body and ``WWW-Authenticate`` value read for ``use_dpop_nonce``.
_MAX_ERROR_BODY: Final = 16 * 1024
_MAX_CHALLENGE_LENGTH: Final = 16 * 1024

#: A nonce: 1*NQCHAR (RFC 9449 4.2; NQCHAR = %x21 / %x23-5B / %x5D-7E, no quote or backslash).
_NONCE: Final = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


class DPoPKey:
    """The EC P-256 private key of one sign-in, which signs its DPoP proofs.

    Immutable. Its ``repr`` and ``str`` name only the thumbprint; it refuses to be pickled
    (store :meth:`export`, encrypted, instead).
    """

    __slots__ = ("_header", "_jkt", "_key", "_public")

    _key: ECKey
    _jkt: str
    _public: dict[str, str]
    _header: dict[str, Any]

    def __init__(self, key: ECKey) -> None:
        """Wrap a joserfc private key; prefer :meth:`generate` and :meth:`load`.

        :raises ValueError: when ``key`` is not an EC P-256 private key.
        """
        from joserfc.jwk import ECKey

        if not isinstance(key, ECKey) or key.curve_name != "P-256" or not key.is_private:
            raise ValueError("a DPoP key must be an EC P-256 private key")
        self._key = key
        self._public = {name: str(value) for name, value in key.as_dict(private=False).items()}
        self._jkt = key.thumbprint()
        # the protected header of every proof this key signs (RFC 9449 4.2), made once
        self._header = {"typ": PROOF_TYPE, "alg": ALGORITHM, "jwk": dict(self._public)}

    @classmethod
    def generate(cls) -> DPoPKey:
        """A fresh key pair (EC P-256)."""
        from joserfc.jwk import ECKey

        return cls(ECKey.generate_key("P-256"))

    @classmethod
    def load(cls, text: str) -> DPoPKey:
        """The key that :meth:`export` wrote: the one this process loaded from the same text
        lately (:data:`loaded_keys`), else read from ``text``.

        :raises ValueError: when ``text`` is not the JSON of an EC P-256 private JWK (the
            message never repeats ``text``).
        """
        return loaded_keys.load(text)

    @classmethod
    def _read(cls, text: str) -> DPoPKey:
        """:meth:`load` without the cache: ``text`` parsed and checked, the key built."""
        if not isinstance(text, str) or len(text) > _MAX_EXPORT_LENGTH:
            raise ValueError("is not an exported DPoP key")
        try:
            jwk = json.loads(text)
        except (ValueError, RecursionError):
            raise ValueError("is not an exported DPoP key (not JSON)") from None
        if not isinstance(jwk, dict) or jwk.get("kty") != "EC" or jwk.get("crv") != "P-256":
            raise ValueError("is not an EC P-256 JWK")
        if not all(isinstance(jwk.get(name), str) for name in ("x", "y", "d")):
            raise ValueError("is not an EC P-256 private JWK")
        from joserfc.errors import JoseError
        from joserfc.jwk import ECKey

        try:
            key = ECKey.import_key(jwk)
        except (JoseError, ValueError, TypeError) as error:
            # the JWK holds d; name the failure, never the value
            raise ValueError(f"is not a valid EC P-256 key ({type(error).__name__})") from None
        return cls(key)

    @property
    def thumbprint(self) -> str:
        """The RFC 7638 JWK SHA-256 thumbprint, base64url: the ``dpop_jkt`` of an authorization
        request and the ``cnf.jkt`` of a bound token."""
        return self._jkt

    def public_jwk(self) -> dict[str, str]:
        """The public JWK (``kty``, ``crv``, ``x``, ``y``), a new dict each call."""
        return dict(self._public)

    def export(self) -> str:
        """The private JWK as compact JSON, for the caller to encrypt and store; never log it."""
        jwk = self._key.as_dict(private=True)
        return json.dumps(jwk, separators=(",", ":"), sort_keys=True)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DPoPKey):
            return NotImplemented
        return secrets.compare_digest(self.export(), other.export())

    def __hash__(self) -> int:
        return hash(self._jkt)

    def __repr__(self) -> str:
        return f"DPoPKey(jkt={self._jkt!r})"

    __str__ = __repr__

    def __reduce__(self) -> NoReturn:
        raise TypeError("a DPoPKey is not pickled: store its export(), encrypted")

    def __copy__(self) -> DPoPKey:
        return self  # immutable

    def __deepcopy__(self, memo: dict[int, Any]) -> DPoPKey:
        return self


def proof(
    key: DPoPKey,
    method: str,
    url: str,
    *,
    nonce: str | None = None,
    access_token: str | None = None,
    now: float | None = None,
) -> str:
    """A fresh DPoP proof (RFC 9449 4.2) for one request: the ``DPoP`` header's value.

    :param key: The sign-in's key; the proof's header carries its public half.
    :param method: The request's HTTP method (``htm``, sent upper case).
    :param url: The request's absolute http(s) address; ``htu`` is it without query and
        fragment, with scheme and host in lower case and no default port (RFC 3986 6.2.2 and
        6.2.3). The path is kept as given: pass the address as it is sent.
    :param nonce: The server's last ``DPoP-Nonce``, if it gave one.
    :param access_token: The access token the request presents; its hash becomes ``ath``.
    :param now: Seconds since the epoch (``iat``); the clock by default.
    :raises ValueError: for an empty method, an address that is not absolute http(s), an
        invalid nonce, or an access token that is not ASCII.
    """
    if not method or not method.isascii() or not method.isalpha():
        raise ValueError("an HTTP method is letters only")
    claims: dict[str, Any] = {
        "jti": secrets.token_urlsafe(JTI_BYTES),
        "htm": method.upper(),
        "htu": target_uri(url),
        "iat": int(time.time() if now is None else now),
    }
    if nonce is not None:
        if not is_valid_nonce(nonce):
            raise ValueError(f"a DPoP nonce is 1 to {MAX_NONCE_LENGTH} NQCHAR")
        claims["nonce"] = nonce
    if access_token is not None:
        claims["ath"] = access_token_hash(access_token)
    payload = json.dumps(claims, separators=(",", ":")).encode("ascii")
    from joserfc import jws

    # the header a fresh dict (joserfc may add to it); the registry allows ES256 only
    return jws.serialize_compact(dict(key._header), payload, key._key, registry=_registry())


@functools.cache
def _registry() -> JWSRegistry:
    """The JWS registry of every proof: ES256 only, made once."""
    from joserfc.jws import JWSRegistry

    return JWSRegistry(algorithms=[ALGORITHM])


def authorization(
    key: DPoPKey, access_token: str, method: str, url: str, *, nonce: str | None = None
) -> dict[str, str]:
    """The headers that present a DPoP-bound access token to a resource server (RFC 9449 7.1):
    ``Authorization: DPoP <token>`` and a fresh proof with ``ath``."""
    return {
        "Authorization": f"DPoP {access_token}",
        "DPoP": proof(key, method, url, nonce=nonce, access_token=access_token),
    }


def access_token_hash(access_token: str) -> str:
    """``ath``: base64url (no padding) of the SHA-256 of the token's ASCII (RFC 9449 4.2).

    :raises ValueError: when the token is not ASCII (RFC 6749 A.12 allows only VSCHAR).
    """
    digest = hashlib.sha256(access_token.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _split(url: str) -> tuple[SplitResult, str]:
    """``url`` split, and its origin with scheme and host in lower case and no default port.

    :raises ValueError: when it is not an absolute http(s) URL with a host.
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:  # a port that is not a number in range, a broken IPv6 address
        raise ValueError("is not an absolute http(s) URL (bad host or port)") from None
    scheme = parts.scheme.lower()
    host = parts.hostname  # lower case, without brackets or user information
    if scheme not in _DEFAULT_PORTS or not host:
        raise ValueError("is not an absolute http(s) URL")
    if ":" in host:
        host = f"[{host}]"
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        host = f"{host}:{port}"
    return parts, f"{scheme}://{host}"


def target_uri(url: str) -> str:
    """The ``htu`` of a request to ``url`` (see :func:`proof`).

    :raises ValueError: when ``url`` is not an absolute http(s) URL with a host.
    """
    parts, server = _split(url)
    return server + (parts.path or "/")


def origin(url: str) -> str:
    """The server ``url`` belongs to, ``scheme://host[:port]``, as :class:`NonceStore` keys it.

    :raises ValueError: when ``url`` is not an absolute http(s) URL with a host.
    """
    return _split(url)[1]


def is_valid_nonce(value: object) -> bool:
    """Whether ``value`` is a nonce this client repeats: 1*NQCHAR, at most
    :data:`MAX_NONCE_LENGTH` characters."""
    return (
        isinstance(value, str)
        and len(value) <= MAX_NONCE_LENGTH
        and _NONCE.fullmatch(value) is not None
    )


class NonceStore:
    """The last DPoP nonce of each server, by origin: thread-safe, least recently used first
    out beyond ``max_servers``.

    :param max_servers: How many servers' nonces are kept.
    """

    def __init__(self, max_servers: int = 1024) -> None:
        self._nonces: RecentlyUsed[str, str] = RecentlyUsed(max_servers, "max_servers")
        self.max_servers = max_servers

    def get(self, url: str) -> str | None:
        """The last nonce of the server of ``url``, or ``None`` (also for a malformed URL)."""
        try:
            key = origin(url)
        except ValueError:
            return None
        return self._nonces.get(key)

    def remember(self, url: str, nonce: str | None) -> None:
        """Keep ``nonce`` as the server of ``url``'s last; ``None``, an invalid nonce or a
        malformed URL is ignored."""
        if not is_valid_nonce(nonce):
            return
        assert nonce is not None
        try:
            key = origin(url)
        except ValueError:
            return
        self._nonces.put(key, nonce)

    def clear(self) -> None:
        """Forget every nonce."""
        self._nonces.clear()

    def __len__(self) -> int:
        return len(self._nonces)

    def __repr__(self) -> str:
        return f"NonceStore(servers={len(self)}, max_servers={self.max_servers})"


#: The nonces of this process.
nonces: Final = NonceStore()
caches.register("DPoP nonces", nonces.clear)


class KeyCache:
    """The DPoP keys this process loaded lately, by the SHA-256 of their export: thread-safe,
    least recently used first out beyond ``max_keys``.

    Building a key from its JWK costs more than the proof it signs; a token store hands the
    same export back on every call of the identity's API. A kept key is no more exposed than
    before: the process already holds the token store's key, which decrypts every stored one.
    Its ``repr`` shows only counts.

    :param max_keys: How many keys are kept.
    """

    def __init__(self, max_keys: int = 256) -> None:
        self._keys: RecentlyUsed[bytes, DPoPKey] = RecentlyUsed(max_keys, "max_keys")
        self.max_keys = max_keys

    def load(self, text: str) -> DPoPKey:
        """The key of the export ``text`` (see :meth:`DPoPKey.load`); only a valid one is kept.

        :raises ValueError: as :meth:`DPoPKey.load`.
        """
        if not isinstance(text, str) or len(text) > _MAX_EXPORT_LENGTH:
            return DPoPKey._read(text)  # refused there, with its message
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
        key = self._keys.get(digest)
        if key is None:
            key = DPoPKey._read(text)  # two threads may both read it; either is kept
            self._keys.put(digest, key)
        return key

    def clear(self) -> None:
        """Forget every key."""
        self._keys.clear()

    def __len__(self) -> int:
        return len(self._keys)

    def __repr__(self) -> str:
        return f"KeyCache(keys={len(self)}, max_keys={self.max_keys})"


#: The keys this process loaded (:meth:`DPoPKey.load`).
loaded_keys: Final = KeyCache()
caches.register("DPoP keys", loaded_keys.clear)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    """The value of header ``name`` in ``headers``, whatever the case of its key."""
    value = headers.get(name)
    if value is None:
        wanted = name.lower()
        value = next(
            (v for k, v in headers.items() if isinstance(k, str) and k.lower() == wanted), None
        )
    return value if isinstance(value, str) else None


_Answer = TypeVar("_Answer")


def send_with_nonce(
    url: str,
    send: Callable[[str | None], _Answer],
    read: Callable[[_Answer], tuple[int, Mapping[str, str], bytes]],
    store: NonceStore | None = None,
) -> _Answer:
    """Send a DPoP request with the server's last nonce, and once more when its answer asks for
    a (new) one: ``send(nonce)`` makes a fresh proof (and anything else that must be fresh,
    such as a client assertion) for each attempt; ``read(answer)`` gives the answer's status,
    headers and body. Every answer's ``DPoP-Nonce`` is remembered for the server.

    :return: The last answer.
    """
    store = nonces if store is None else store
    answer = send(store.get(url))
    status, headers, body = read(answer)
    store.remember(url, new_nonce(headers))
    if not nonce_requested(status, headers, body):
        return answer
    answer = send(store.get(url))
    store.remember(url, new_nonce(read(answer)[1]))
    return answer


def new_nonce(headers: Mapping[str, str]) -> str | None:
    """The ``DPoP-Nonce`` of an answer's ``headers``, or ``None`` when absent or invalid."""
    value = _header(headers, "DPoP-Nonce")
    if value is None:
        return None
    value = value.strip(" \t")
    return value if is_valid_nonce(value) else None


def nonce_requested(status: int, headers: Mapping[str, str], body: bytes) -> bool:
    """Whether an answer asks for a proof with a (new) nonce: a 400 whose JSON ``error`` is
    ``use_dpop_nonce`` (authorization server, RFC 9449 8), or a 401 with a ``DPoP`` challenge
    whose ``error`` is ``use_dpop_nonce`` (resource server, RFC 9449 9). Never raises."""
    if status == 400:
        return _json_error(body) == USE_DPOP_NONCE
    if status == 401:
        value = _header(headers, "WWW-Authenticate")
        if value is None or len(value) > _MAX_CHALLENGE_LENGTH:
            return False
        return any(
            scheme == "dpop" and params.get("error") == USE_DPOP_NONCE
            for scheme, params in challenges(value)
        )
    return False


def _json_error(body: bytes) -> str | None:
    """The ``error`` member of a JSON object ``body``, or ``None``."""
    if not isinstance(body, bytes | bytearray) or len(body) > _MAX_ERROR_BODY:
        return None
    if USE_DPOP_NONCE.encode() not in body:  # the common case, and most garbage, unparsed
        return None
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        return None
    error = document.get("error") if isinstance(document, dict) else None
    return error if isinstance(error, str) else None
