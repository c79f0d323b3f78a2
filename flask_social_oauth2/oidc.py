"""OpenID Connect on top of the authorization code flow: discovery and ID token verification.

A provider speaks OpenID Connect when its block names an issuer (``customProperties.issuer`` or
``customProperties.discoveryURL``), or when it is a built-in OpenID Connect provider
(:attr:`~flask_social_oauth2.provider.OAuth2Provider.openid_connect`) whose scope asks for
``openid``. Then:

* the discovery document (``<issuer>/.well-known/openid-configuration``) is read lazily, on the
  first request that needs it, with the package's pooled HTTP client, and kept per process
  (see :func:`provider_metadata`); its ``issuer`` must be the configured one;
* it supplies the addresses the block leaves out: ``authorizationURL`` (the
  ``authorization_endpoint``), ``apiURL`` (the ``userinfo_endpoint``) and the key set
  (``jwks_uri``). ``accessTokenURL`` is required by the settings record and is always used as
  given; a discovered ``token_endpoint`` that differs is logged, never used;
* the ID token of each token response is verified (:func:`verify_id_token`): its signature with
  the provider's published keys, using a library (joserfc), never hand-written crypto; the
  algorithm against an allow-list of asymmetric algorithms; ``iss``, ``aud``/``azp``, ``exp``,
  ``iat``, ``nbf`` with a small leeway; and the ``nonce`` kept with the flow's state;
* where the document announces ``authorization_response_iss_parameter_supported`` (RFC 9207),
  the callback's ``iss`` is required and must be the issuer.

Nothing here is stored on a provider or per request: the caches are per process, guarded by
locks, keyed by URL, and hold only the provider's public documents.
"""

from __future__ import annotations

import dataclasses
import hmac
import importlib.util
import logging
import os
import re
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar
from urllib.parse import urlsplit

from .errors import AuthenticationError, ConfigurationProblem, DiscoveryError, IdTokenError
from .flow import safe_error_code
from .settings import OAuth2Info, OAuth2Settings
from .urls import check_endpoint_url

if TYPE_CHECKING:
    from joserfc.jwk import Key

    from .http_client import ProviderResponse
    from .provider import OAuth2Provider

logger = logging.getLogger("flask_social_oauth2")

#: The path of the discovery document below the issuer (OpenID Connect Discovery 1.0, 4).
WELL_KNOWN_PATH: Final = "/.well-known/openid-configuration"
#: Algorithms an ID token may be signed with: asymmetric ones only, never ``none`` or HMAC
#: (an HMAC "signed" with a public key would be forgeable by anyone).
SAFE_ALGORITHMS: Final = frozenset(
    {
        "RS256",
        "RS384",
        "RS512",
        "PS256",
        "PS384",
        "PS512",
        "ES256",
        "ES384",
        "ES512",
        "EdDSA",
        "Ed25519",
    }
)
#: Seconds a discovery document or key set is kept when the answer has no ``max-age``.
DEFAULT_CACHE_SECONDS: Final = 3600
#: The shortest time an answer is kept, whatever its ``Cache-Control`` says
#: (``no-store``, ``no-cache`` and ``max-age=0`` included).
MIN_CACHE_SECONDS: Final = 60
#: The longest time an answer is kept, whatever its ``max-age`` says.
MAX_CACHE_SECONDS: Final = 24 * 3600
#: How long an expired document may still serve when fetching its successor fails.
MAX_STALE_SECONDS: Final = 24 * 3600
#: The least time between two key set fetches caused by an unknown ``kid``.
KEY_REFETCH_INTERVAL: Final = 60.0
#: Clock skew allowed on ``exp``, ``iat`` and ``nbf`` unless ``customProperties.idTokenLeeway``
#: says otherwise, and the most it may say.
DEFAULT_LEEWAY: Final = 60
MAX_LEEWAY: Final = 300

_MAX_CACHE_ENTRIES: Final = 256
_MAX_KEYS: Final = 64
_MAX_ID_TOKEN: Final = 16 * 1024
_TENANT_PLACEHOLDER: Final = "{tenantid}"
_TENANT_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9.\-]{0,99}")
_ALGORITHM_KEY_TYPES: Final[Mapping[str, tuple[str, str | None]]] = MappingProxyType(
    {
        "RS256": ("RSA", None),
        "RS384": ("RSA", None),
        "RS512": ("RSA", None),
        "PS256": ("RSA", None),
        "PS384": ("RSA", None),
        "PS512": ("RSA", None),
        "ES256": ("EC", "P-256"),
        "ES384": ("EC", "P-384"),
        "ES512": ("EC", "P-521"),
        "EdDSA": ("OKP", None),
        "Ed25519": ("OKP", "Ed25519"),
    }
)
#: Members of a JWK that only a private key has (a key set should never publish them), and
#: ``key_ops``, which a verifying key does not need: left out when a key is read.
_PRIVATE_MEMBERS: Final = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "key_ops"})
_ENDPOINTS: Final = ("authorization_endpoint", "token_endpoint", "userinfo_endpoint", "jwks_uri")

_T = TypeVar("_T")


def _monotonic() -> float:
    return time.monotonic()


# -- configuration -------------------------------------------------------------------------------


def issuer_from_discovery_url(url: str) -> str | None:
    """The issuer a discovery address implies: the part before
    ``/.well-known/openid-configuration`` (OpenID Connect Discovery), or the host plus the part
    after ``/.well-known/oauth-authorization-server`` (RFC 8414); else ``None``."""
    parts = urlsplit(url)
    if parts.query or parts.fragment:
        return None
    origin = f"{parts.scheme}://{parts.netloc}"
    if parts.path.endswith(WELL_KNOWN_PATH):
        return origin + parts.path[: -len(WELL_KNOWN_PATH)]
    rfc8414 = "/.well-known/oauth-authorization-server"
    if parts.path == rfc8414 or parts.path.startswith(rfc8414 + "/"):
        return origin + parts.path[len(rfc8414) :]
    return None


def configured_issuer(settings: OAuth2Settings) -> str | None:
    """The issuer named by the block: ``customProperties.issuer``, else the one implied by
    ``customProperties.discoveryURL``; ``None`` when the block names none."""
    properties = settings.custom_properties
    issuer = properties.get("issuer")
    if issuer:
        return issuer
    discovery = properties.get("discoveryURL")
    return issuer_from_discovery_url(discovery) if discovery else None


def discovery_url(settings: OAuth2Settings, issuer: str) -> str:
    """Where the discovery document of ``issuer`` is read: ``customProperties.discoveryURL``,
    else ``issuer`` (without a trailing ``/``) followed by :data:`WELL_KNOWN_PATH`."""
    return settings.custom_properties.get("discoveryURL") or issuer.rstrip("/") + WELL_KNOWN_PATH


def id_token_leeway(settings: OAuth2Settings) -> int:
    """Seconds of clock skew allowed on the ID token's times (``customProperties.idTokenLeeway``,
    default :data:`DEFAULT_LEEWAY`)."""
    value = settings.custom_properties.get("idTokenLeeway", "")
    return int(value) if value.isdigit() and int(value) <= MAX_LEEWAY else DEFAULT_LEEWAY


def allowed_algorithms(
    settings: OAuth2Settings, metadata: ProviderMetadata | None = None
) -> frozenset[str]:
    """The algorithms an ID token may use: ``customProperties.idTokenAlgorithms`` (space
    separated) or :data:`SAFE_ALGORITHMS`, narrowed to what the discovery document lists in
    ``id_token_signing_alg_values_supported``; never an algorithm outside the safe set."""
    configured = settings.custom_properties.get("idTokenAlgorithms")
    allowed = SAFE_ALGORITHMS & set(configured.split()) if configured else SAFE_ALGORITHMS
    if metadata is not None and metadata.signing_algorithms is not None:
        allowed &= metadata.signing_algorithms
    return allowed


def settings_problems(settings: OAuth2Settings, *, verifies: bool) -> list[ConfigurationProblem]:
    """Problems of the OpenID Connect ``customProperties`` of ``settings``.

    :param verifies: Whether this provider verifies ID tokens with these settings (then the
        joserfc library must be installed).
    """
    properties = settings.custom_properties
    problems: list[ConfigurationProblem] = []

    def problem(key: str, message: str) -> None:
        problems.append(ConfigurationProblem(None, f"customProperties.{key}", message))

    issuer = properties.get("issuer")
    if issuer is not None:
        error = check_endpoint_url(issuer)
        if error is None and (urlsplit(issuer).query or "?" in issuer):
            error = "must not contain a query (OpenID Connect Discovery 2)"
        if error:
            problem("issuer", error)
    discovery = properties.get("discoveryURL")
    if discovery is not None:
        error = check_endpoint_url(discovery)
        if error:
            problem("discoveryURL", error)
        elif issuer is None and issuer_from_discovery_url(discovery) is None:
            problem(
                "discoveryURL",
                f"does not end in {WELL_KNOWN_PATH}, so the issuer cannot be derived from it:"
                " set customProperties.issuer too",
            )
    algorithms = properties.get("idTokenAlgorithms")
    if algorithms is not None:
        unsafe = sorted(set(algorithms.split()) - SAFE_ALGORITHMS)
        if unsafe or not algorithms.split():
            problem(
                "idTokenAlgorithms",
                f"must list asymmetric algorithms among {', '.join(sorted(SAFE_ALGORITHMS))}"
                + (f"; not {', '.join(repr(name) for name in unsafe)}" if unsafe else ""),
            )
    leeway = properties.get("idTokenLeeway")
    if leeway is not None and not (leeway.isdigit() and int(leeway) <= MAX_LEEWAY):
        problem("idTokenLeeway", f"must be a whole number of seconds from 0 to {MAX_LEEWAY}")
    if verifies and importlib.util.find_spec("joserfc") is None:
        problems.append(
            ConfigurationProblem(
                None,
                "scope",
                "asks for 'openid', and verifying ID tokens needs the joserfc library:"
                " pip install 'flask-social-oauth2[oidc]'",
            )
        )
    return problems


# -- the discovery document ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProviderMetadata:
    """The parts of a provider's discovery document this package uses.

    :param issuer: The issuer identifier, equal to the configured one.
    :param authorization_endpoint: Fills an absent ``authorizationURL``.
    :param token_endpoint: For comparison only: ``accessTokenURL`` is always used as given.
    :param userinfo_endpoint: Fills an absent ``apiURL``.
    :param jwks_uri: The provider's public signing keys.
    :param iss_parameter_supported: RFC 9207: callbacks carry ``iss``, which is then required.
    :param signing_algorithms: ``id_token_signing_alg_values_supported``, if listed.
    :param raw: The whole document.
    """

    issuer: str
    authorization_endpoint: str | None
    token_endpoint: str | None
    userinfo_endpoint: str | None
    jwks_uri: str | None
    iss_parameter_supported: bool
    signing_algorithms: frozenset[str] | None
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_document(cls, provider: str, document: Any) -> ProviderMetadata:
        """Read a discovery document.

        :raises DiscoveryError: when it is not a JSON object, has no ``issuer``, or an endpoint
            is not an https address (plain http only on loopback).
        """
        if not isinstance(document, Mapping):
            raise DiscoveryError(provider, "discovery document is not a JSON object")
        issuer = document.get("issuer")
        if not isinstance(issuer, str) or not issuer:
            raise DiscoveryError(provider, "discovery document has no issuer")
        endpoints: dict[str, str | None] = {}
        for name in _ENDPOINTS:
            value = document.get(name)
            if value is None:
                endpoints[name] = None
                continue
            if not isinstance(value, str) or check_endpoint_url(value) is not None:
                raise DiscoveryError(
                    provider, f"discovery document's {name} is not an https address"
                )
            endpoints[name] = value
        algorithms = document.get("id_token_signing_alg_values_supported")
        signing = (
            frozenset(item for item in algorithms if isinstance(item, str))
            if isinstance(algorithms, list)
            else None
        )
        return cls(
            issuer=issuer,
            authorization_endpoint=endpoints["authorization_endpoint"],
            token_endpoint=endpoints["token_endpoint"],
            userinfo_endpoint=endpoints["userinfo_endpoint"],
            jwks_uri=endpoints["jwks_uri"],
            iss_parameter_supported=document.get("authorization_response_iss_parameter_supported")
            is True,
            signing_algorithms=signing,
            raw=MappingProxyType(dict(document)),
        )


def issuer_matches(configured: str, discovered: str) -> bool:
    """Whether the discovery document's ``issuer`` is the configured one.

    They must be identical, with one exception written into the document itself: a multi-tenant
    document (Microsoft's ``common``, ``organizations`` and ``consumers``) names its issuer with
    a ``{tenantid}`` placeholder, which the configured issuer fills with the tenant it used.
    """
    if configured == discovered:
        return True
    if discovered.count(_TENANT_PLACEHOLDER) != 1:
        return False
    prefix, _, suffix = discovered.partition(_TENANT_PLACEHOLDER)
    if not (configured.startswith(prefix) and configured.endswith(suffix)):
        return False
    tenant = configured[len(prefix) : len(configured) - len(suffix)]
    return _TENANT_RE.fullmatch(tenant) is not None


def expected_token_issuer(metadata: ProviderMetadata, claims: Mapping[str, Any]) -> str | None:
    """The ``iss`` an ID token must carry: the document's issuer; for a multi-tenant document,
    its template filled with the token's ``tid`` claim."""
    issuer = metadata.issuer
    if _TENANT_PLACEHOLDER not in issuer:
        return issuer
    tenant = claims.get("tid")
    if not isinstance(tenant, str) or _TENANT_RE.fullmatch(tenant) is None:
        return None
    return issuer.replace(_TENANT_PLACEHOLDER, tenant)


def cache_seconds(headers: Mapping[str, str]) -> float:
    """How long to keep an answer, from its ``Cache-Control`` header: ``max-age`` kept within
    :data:`MIN_CACHE_SECONDS` and :data:`MAX_CACHE_SECONDS`, :data:`DEFAULT_CACHE_SECONDS`
    without one, the minimum for ``no-store`` or ``no-cache``."""
    value = ""
    for name, item in headers.items():
        if name.lower() == "cache-control":
            value = item
    directives: dict[str, str] = {}
    for part in value.split(","):
        name, _, argument = part.strip().partition("=")
        directives[name.strip().lower()] = argument.strip().strip('"')
    if "no-store" in directives or "no-cache" in directives:
        return MIN_CACHE_SECONDS
    max_age = directives.get("max-age", "")
    if max_age.isdigit():
        return float(min(max(int(max_age), MIN_CACHE_SECONDS), MAX_CACHE_SECONDS))
    return DEFAULT_CACHE_SECONDS


# -- the per-process caches ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Entry(Generic[_T]):
    value: _T
    fetched: float  # time.monotonic() of the fetch
    expires: float
    forced: float = float("-inf")  # last fetch caused by an unknown kid (key sets only)


class _Cache(Generic[_T]):
    """A small, thread-safe map of URL -> fetched document, with one fetch at a time per URL."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry[_T]] = {}
        self._fetch_locks: dict[str, threading.Lock] = {}

    def get(self, url: str) -> _Entry[_T] | None:
        with self._lock:
            return self._entries.get(url)

    def put(self, url: str, entry: _Entry[_T]) -> None:
        with self._lock:
            self._entries.pop(url, None)
            while len(self._entries) >= _MAX_CACHE_ENTRIES:
                del self._entries[next(iter(self._entries))]
            self._entries[url] = entry

    def fetch_lock(self, url: str) -> threading.Lock:
        with self._lock:
            lock = self._fetch_locks.get(url)
            if lock is None:
                if len(self._fetch_locks) >= _MAX_CACHE_ENTRIES:
                    self._fetch_locks.clear()  # held locks stay valid for their holders
                lock = self._fetch_locks[url] = threading.Lock()
            return lock

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._fetch_locks.clear()


_metadata_cache: _Cache[ProviderMetadata] = _Cache()
_key_cache: _Cache[tuple[Key, ...]] = _Cache()


def clear_caches() -> None:
    """Forget every cached discovery document and key set of this process (e.g. between
    tests); the next use fetches them again."""
    _metadata_cache.clear()
    _key_cache.clear()


def _after_fork() -> None:
    global _metadata_cache, _key_cache
    _metadata_cache = _Cache()
    _key_cache = _Cache()


os.register_at_fork(after_in_child=_after_fork)


def _get_json(provider: OAuth2Provider, url: str, step: str) -> tuple[Any, ProviderResponse]:
    response = provider.send(
        "GET", url, step=step, error=DiscoveryError, headers={"Accept": "application/json"}
    )
    if not 200 <= response.status < 300:
        raise DiscoveryError(provider.name, f"{step} failed: HTTP {response.status}")
    try:
        return response.json(), response
    except ValueError:
        raise DiscoveryError(
            provider.name, f"{step}: HTTP {response.status} answered no JSON"
        ) from None


def provider_metadata(provider: OAuth2Provider, issuer: str) -> ProviderMetadata:
    """The discovery document of ``issuer``, from this process's cache or fetched now.

    A document is kept for its ``Cache-Control: max-age`` (see :func:`cache_seconds`); when
    fetching its successor fails, the expired one serves on for up to
    :data:`MAX_STALE_SECONDS`, retried each :data:`MIN_CACHE_SECONDS`. Needs an app context.

    :raises DiscoveryError: when it cannot be fetched or read, or its ``issuer`` is not
        ``issuer``.
    """
    url = discovery_url(provider.settings, issuer)
    entry = _metadata_cache.get(url)
    if entry is None or entry.expires <= _monotonic():
        with _metadata_cache.fetch_lock(url):
            entry = _metadata_cache.get(url)
            if entry is None or entry.expires <= _monotonic():
                entry = _fetch_metadata(provider, url, issuer, entry)
    metadata = entry.value
    if not issuer_matches(issuer, metadata.issuer):
        raise DiscoveryError(
            provider.name, "discovery document names another issuer than the configured one"
        )
    return metadata


def _fetch_metadata(
    provider: OAuth2Provider, url: str, issuer: str, stale: _Entry[ProviderMetadata] | None
) -> _Entry[ProviderMetadata]:
    now = _monotonic()
    try:
        document, response = _get_json(provider, url, "discovery request")
        metadata = ProviderMetadata.from_document(provider.name, document)
        if not issuer_matches(issuer, metadata.issuer):
            raise DiscoveryError(
                provider.name, "discovery document names another issuer than the configured one"
            )
    except AuthenticationError as error:
        if stale is None or now - stale.fetched > MAX_STALE_SECONDS:
            raise
        logger.warning("%s: keeping the previous discovery document: %s", provider.name, error)
        entry = dataclasses.replace(stale, expires=now + MIN_CACHE_SECONDS)
    else:
        token_endpoint = metadata.token_endpoint
        if token_endpoint is not None and token_endpoint != provider.settings.access_token_url:
            logger.warning(
                "%s: accessTokenURL differs from the discovery document's token_endpoint;"
                " accessTokenURL is used",
                provider.name,
            )
        entry = _Entry(metadata, now, now + cache_seconds(response.headers))
        logger.info("%s: discovery document read from %s", provider.name, urlsplit(url).netloc)
    _metadata_cache.put(url, entry)
    return entry


# -- the key set ---------------------------------------------------------------------------------


def _read_keys(provider: str, document: Any) -> tuple[Key, ...]:
    from joserfc.errors import JoseError
    from joserfc.jwk import import_key

    entries = document.get("keys") if isinstance(document, Mapping) else None
    if not isinstance(entries, list):
        raise DiscoveryError(provider, "key set (jwks_uri) has no list of keys")
    keys: list[Key] = []
    for item in entries[:_MAX_KEYS]:
        if not isinstance(item, dict) or item.get("kty") not in ("RSA", "EC", "OKP"):
            continue  # symmetric ("oct") or unknown keys never verify an ID token
        if item.get("use", "sig") != "sig":
            continue
        public = {name: value for name, value in item.items() if name not in _PRIVATE_MEMBERS}
        try:
            keys.append(import_key(public))
        except (JoseError, ValueError, TypeError, KeyError):
            logger.info("%s: skipped a key of the key set that could not be read", provider)
    return tuple(keys)


def signing_keys(
    provider: OAuth2Provider, jwks_uri: str, *, unknown_kid: bool = False
) -> tuple[Key, ...]:
    """The provider's public keys from ``jwks_uri``, cached like the discovery document.

    :param unknown_kid: The cached keys do not include the one a token names: fetch them again,
        at most once each :data:`KEY_REFETCH_INTERVAL` seconds per key set (a flood of tokens
        with made-up ``kid`` values causes one request a minute, not one each).
    :raises DiscoveryError: when the key set cannot be fetched or read.
    """
    entry = _key_cache.get(jwks_uri)
    if entry is not None and entry.expires > _monotonic() and not unknown_kid:
        return entry.value
    with _key_cache.fetch_lock(jwks_uri):
        entry = _key_cache.get(jwks_uri)
        now = _monotonic()
        if entry is not None:
            fresh = entry.expires > now
            if fresh and not unknown_kid:
                return entry.value
            if fresh and now - entry.forced < KEY_REFETCH_INTERVAL:
                return entry.value  # refetched for an unknown kid a moment ago
        forced = now if unknown_kid else (entry.forced if entry is not None else float("-inf"))
        try:
            document, response = _get_json(provider, jwks_uri, "key set request")
            keys = _read_keys(provider.name, document)
        except AuthenticationError as error:
            if entry is None or now - entry.fetched > MAX_STALE_SECONDS:
                raise
            logger.warning("%s: keeping the previous key set: %s", provider.name, error)
            entry = dataclasses.replace(entry, expires=now + MIN_CACHE_SECONDS, forced=forced)
        else:
            entry = _Entry(keys, now, now + cache_seconds(response.headers), forced)
            logger.info("%s: key set read (%d keys)", provider.name, len(keys))
        _key_cache.put(jwks_uri, entry)
        return entry.value


def _matching_keys(keys: Iterable[Key], algorithm: str, kid: str | None) -> list[Key]:
    key_type, curve = _ALGORITHM_KEY_TYPES[algorithm]
    found = []
    for key in keys:
        if key.key_type != key_type or (kid is not None and key.kid != kid):
            continue
        if key.alg is not None and key.alg != algorithm:
            continue
        if curve is not None and getattr(key, "curve_name", None) != curve:
            continue
        found.append(key)
    return found


# -- the ID token --------------------------------------------------------------------------------


def verify_id_token(
    provider: OAuth2Provider,
    id_token: object,
    metadata: ProviderMetadata,
    *,
    nonce: str | None,
    subject: str | None = None,
) -> dict[str, Any]:
    """Verify an ID token (OpenID Connect Core 3.1.3.7) and return its claims.

    :param id_token: The token response's ``id_token``.
    :param metadata: The provider's discovery document.
    :param nonce: The nonce sent with the authorization request; the token must carry it.
        ``None`` when there was none to check (a refresh, or a code a client-side framework
        obtained).
    :param subject: The ``sub`` the token must have (a refresh must not change the user).
    :raises IdTokenError: naming the check that failed.
    :raises DiscoveryError: when the key set cannot be fetched.
    """
    from joserfc import jws, jwt
    from joserfc.errors import BadSignatureError, JoseError

    name = provider.name
    if not isinstance(id_token, str) or not id_token or len(id_token) > _MAX_ID_TOKEN:
        raise IdTokenError(name, "token response's id_token is missing or not a string")
    try:
        header = jws.extract_compact(id_token.encode("ascii")).headers()
    except (JoseError, ValueError, TypeError, UnicodeError):
        raise IdTokenError(name, "id_token is not a signed JWT (JWS compact form)") from None
    algorithm = header.get("alg")
    allowed = allowed_algorithms(provider.settings, metadata)
    if not isinstance(algorithm, str) or algorithm not in allowed:
        shown = safe_error_code(algorithm) if isinstance(algorithm, str) else "<missing>"
        raise IdTokenError(name, f"id_token algorithm {shown!r} is not allowed")
    kid = header.get("kid")
    if kid is not None and not isinstance(kid, str):
        raise IdTokenError(name, "id_token header's kid is not a string")
    if metadata.jwks_uri is None:
        raise DiscoveryError(name, "discovery document has no jwks_uri to verify ID tokens with")
    candidates = _matching_keys(signing_keys(provider, metadata.jwks_uri), algorithm, kid)
    if not candidates:
        keys = signing_keys(provider, metadata.jwks_uri, unknown_kid=True)
        candidates = _matching_keys(keys, algorithm, kid)
    if not candidates:
        raise IdTokenError(name, "no key of the provider's key set matches the id_token's kid")
    registry = jws.JWSRegistry(algorithms=[algorithm], strict_check_header=False)
    claims: dict[str, Any] | None = None
    for key in candidates:
        try:
            claims = dict(jwt.decode(id_token, key, registry=registry).claims)
            break
        except BadSignatureError:
            continue
        except (JoseError, ValueError, TypeError) as error:
            raise IdTokenError(
                name, f"id_token could not be verified ({type(error).__name__})"
            ) from None
    if claims is None:
        raise IdTokenError(name, "id_token signature is not valid")
    _check_claims(provider, claims, metadata, nonce=nonce, subject=subject)
    return claims


def _check_claims(
    provider: OAuth2Provider,
    claims: dict[str, Any],
    metadata: ProviderMetadata,
    *,
    nonce: str | None,
    subject: str | None,
) -> None:
    from joserfc import jwt
    from joserfc.errors import ClaimError, ExpiredTokenError, MissingClaimError

    name = provider.name
    checks = jwt.JWTClaimsRegistry(
        leeway=id_token_leeway(provider.settings),
        iss={"essential": True},
        sub={"essential": True},
        aud={"essential": True},
        exp={"essential": True},
        iat={"essential": True},
    )
    try:
        checks.validate(claims)
    except ExpiredTokenError:
        raise IdTokenError(name, "id_token has expired (exp)") from None
    except MissingClaimError as error:
        raise IdTokenError(name, f"id_token lacks the claims {error.claim}") from None
    except ClaimError as error:
        raise IdTokenError(name, f"id_token claim {error.claim!r} is not valid") from None
    issuer = claims["iss"]
    expected = expected_token_issuer(metadata, claims)
    if issuer != expected and issuer not in provider.extra_id_token_issuers:
        raise IdTokenError(name, "id_token iss is not the provider's issuer")
    client_id = provider.settings.client_id
    audience = claims["aud"]
    audiences = [audience] if isinstance(audience, str) else list(audience)
    if client_id not in audiences:
        raise IdTokenError(name, "id_token aud does not name this client")
    authorized_party = claims.get("azp")
    if len(audiences) > 1 and authorized_party is None:
        raise IdTokenError(name, "id_token has several audiences and no azp")
    if authorized_party is not None and authorized_party != client_id:
        raise IdTokenError(name, "id_token azp is not this client")
    if nonce is not None:
        value = claims.get("nonce")
        if not isinstance(value, str) or not hmac.compare_digest(
            value.encode("utf-8"), nonce.encode("utf-8")
        ):
            raise IdTokenError(name, "id_token nonce is not the one of this sign-in")
    if subject is not None and claims["sub"] != subject:
        raise IdTokenError(name, "id_token sub is not the user the token was issued for")


def verify_token_response(
    provider: OAuth2Provider,
    info: OAuth2Info,
    issuer: str,
    *,
    nonce: str | None,
    required: bool = True,
    subject: str | None = None,
) -> OAuth2Info:
    """Verify the ID token of a token response; ``info`` with :attr:`OAuth2Info.id_token_claims`.

    :param issuer: The provider's configured issuer.
    :param nonce: See :func:`verify_id_token`.
    :param required: Whether a response without ``id_token`` is an error (a code exchange with
        the ``openid`` scope) or accepted as it is (a refresh, where it is optional).
    :param subject: See :func:`verify_id_token`.
    :raises IdTokenError: when the ID token is missing (if required) or not valid.
    """
    id_token = info.params.get("id_token")
    if id_token is None:
        if required:
            raise IdTokenError(
                provider.name, "token response has no id_token although the scope asks for openid"
            )
        return info
    metadata = provider_metadata(provider, issuer)
    claims = verify_id_token(provider, id_token, metadata, nonce=nonce, subject=subject)
    logger.info("%s: id_token verified", provider.name)
    return dataclasses.replace(info, id_token_claims=claims)
