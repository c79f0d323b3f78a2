"""OpenID Connect discovery: a provider's metadata and its key set (JWKS), cached per process.

A provider speaks OpenID Connect when its block names an issuer (``customProperties.issuer`` or
``customProperties.discoveryURL``), or when it is a built-in OpenID Connect provider whose scope
asks for ``openid``. Its discovery document (``<issuer>/.well-known/openid-configuration``, or
where there is none, RFC 8414's ``/.well-known/oauth-authorization-server``) is read lazily, on
the first request that needs it, and kept per process by URL; so is its key set.

Nothing here sends a request itself: each reader takes a :class:`Source`, which carries the
provider's name and the function that GETs a URL with the app's rules (the provider hands in its
own, with the app's timeout and size cap). Nothing here is stored on a provider or per request:
the caches hold only the provider's public documents, and what went wrong when they could not be
read (see :attr:`Source.failure_ttl`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol
from urllib.parse import urlsplit

from .. import caches
from ..config import provider_options
from ..config.provider_options import ProviderOptions
from ..config.provider_options import issuer_from_discovery_url as issuer_from_discovery_url
from ..config.provider_options import issuer_problem as issuer_problem
from ..config.settings import OAuth2Settings
from ..errors import AuthenticationError, DiscoveryError
from ..oauth.metadata import ProviderMetadata as ProviderMetadata
from ..oauth.metadata import issuer_matches
from ..oauth.provider_response import ProviderResponse
from .document_cache import Clock, DocumentCache, Entry

if TYPE_CHECKING:
    from joserfc.jwk import Key

logger = logging.getLogger("flask_social_oauth2")

#: The path of the discovery document below the issuer (OpenID Connect Discovery 1.0, 4), and
#: that of an OAuth 2.0 authorization server's metadata (RFC 8414, 3), inserted between the
#: issuer's host and its path (both defined with the ``discoveryURL`` they check).
WELL_KNOWN_PATH: Final = provider_options.WELL_KNOWN_PATH
RFC8414_PATH: Final = provider_options.RFC8414_PATH
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
#: Seconds a failed fetch is remembered (``SOCIAL_OAUTH2_DISCOVERY_FAILURE_TTL``) unless the app
#: says otherwise.
DEFAULT_FAILURE_TTL: Final = 30.0

_MAX_KEYS: Final = 64
# Only ASCII digits: str.isdigit() also accepts "²" and other digits int() refuses.
_MAX_AGE_RE: Final = re.compile(r"[0-9]{1,12}")
#: Members of a JWK that only a private key has (a key set should never publish them), and
#: ``key_ops``, which a verifying key does not need: left out when a key is read.
_PRIVATE_MEMBERS: Final = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "key_ops"})


class Fetch(Protocol):
    """GET ``url`` with the app's rules (timeout, size cap, pooled client) and return the whole
    answer, whatever its status.

    :param step: What the request is for, e.g. ``"discovery request"``, for errors and logs.
    :raises DiscoveryError: when the request fails or times out (502 or 504).
    """

    def __call__(self, url: str, *, step: str) -> ProviderResponse: ...


@dataclass(frozen=True, slots=True)
class Source:
    """How this module reaches one provider's documents, made by the provider for each use.

    :param provider: The provider's name, for errors and logs.
    :param fetch: Sends the GET request (see :class:`Fetch`).
    :param failure_ttl: Seconds a failed fetch of a document is remembered: meanwhile every use
        fails at once with the same error (502, or 504 for a timeout) instead of waiting for the
        provider again. ``0`` remembers nothing (requests still wait for a fetch under way).
    """

    provider: str
    fetch: Fetch
    failure_ttl: float = DEFAULT_FAILURE_TTL


# -- configuration -------------------------------------------------------------------------------


def discovery_url(options: ProviderOptions, issuer: str) -> str:
    """Where the discovery document of ``issuer`` is read: ``customProperties.discoveryURL``,
    else ``issuer`` (without a trailing ``/``) followed by :data:`WELL_KNOWN_PATH`."""
    return _discovery_url(options.discovery_url, issuer)


def _discovery_url(configured: str | None, issuer: str) -> str:
    return configured or issuer.rstrip("/") + WELL_KNOWN_PATH


def metadata_urls(options: ProviderOptions, issuer: str) -> tuple[str, ...]:
    """Where the metadata of ``issuer`` is looked for, in order: ``customProperties.discoveryURL``
    alone; else the OpenID Connect discovery document (:func:`discovery_url`), then, when that is
    not found (404), RFC 8414's authorization server metadata, whose well-known path goes
    between the issuer's host and its path."""
    return _metadata_urls(options.discovery_url, issuer)


def _metadata_urls(configured: str | None, issuer: str) -> tuple[str, ...]:
    if configured:
        return (configured,)
    parts = urlsplit(issuer)
    rfc8414 = f"{parts.scheme}://{parts.netloc}{RFC8414_PATH}{parts.path.rstrip('/')}"
    return _discovery_url(None, issuer), rfc8414


# -- the discovery document ----------------------------------------------------------------------


def cache_seconds(headers: Mapping[str, str]) -> float:
    """How long to keep an answer, from its ``Cache-Control`` header: ``max-age`` kept within
    :data:`MIN_CACHE_SECONDS` and :data:`MAX_CACHE_SECONDS`, :data:`DEFAULT_CACHE_SECONDS`
    without a readable one (a ``max-age`` that is not ASCII digits is ignored), the minimum for
    ``no-store`` or ``no-cache``."""
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
    if _MAX_AGE_RE.fullmatch(max_age):
        return float(min(max(int(max_age), MIN_CACHE_SECONDS), MAX_CACHE_SECONDS))
    return DEFAULT_CACHE_SECONDS


# -- the per-process caches ----------------------------------------------------------------------


class ProcessCaches:
    """The discovery documents and key sets of this process, shared by every app and provider.

    :param clock: The monotonic clock the caches' times are read from (a test hands in one it
        moves, instead of sleeping).
    """

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self.clock = clock
        self.metadata: DocumentCache[ProviderMetadata] = DocumentCache()
        self.keys: DocumentCache[tuple[Key, ...]] = DocumentCache()

    def clear(self) -> None:
        """Forget every document, key set and failure (the clock stays)."""
        self.metadata.clear()
        self.keys.clear()


_caches = ProcessCaches()


def process_caches() -> ProcessCaches:
    """This process's caches (e.g. to give them a test clock)."""
    return _caches


def clear_caches() -> None:
    """Forget every cached discovery document, key set and failure of this process; the next
    use fetches them again. :func:`flask_social_oauth2.caches.clear_caches` empties these and
    every other process-wide cache."""
    _caches.clear()


caches.register("discovery documents", lambda: _caches.metadata.clear())
caches.register("key sets", lambda: _caches.keys.clear())


def _after_fork() -> None:
    global _caches
    _caches = ProcessCaches(_caches.clock)


os.register_at_fork(after_in_child=_after_fork)


def _get_json(source: Source, url: str, step: str) -> tuple[Any, ProviderResponse]:
    return _json_of(source, source.fetch(url, step=step), step)


def _json_of(source: Source, response: ProviderResponse, step: str) -> tuple[Any, ProviderResponse]:
    if not 200 <= response.status < 300:
        raise DiscoveryError(source.provider, f"{step} failed: HTTP {response.status}")
    try:
        return response.json(), response
    except (ValueError, UnicodeError):
        raise DiscoveryError(
            source.provider, f"{step}: HTTP {response.status} answered no JSON"
        ) from None


def provider_metadata(
    source: Source, settings: OAuth2Settings, options: ProviderOptions, issuer: str
) -> ProviderMetadata:
    """The metadata of ``issuer``, from this process's cache or fetched now: its OpenID Connect
    discovery document, or where there is none its RFC 8414 metadata (see
    :func:`metadata_urls`).

    A document is kept for its ``Cache-Control: max-age`` (see :func:`cache_seconds`); when
    fetching its successor fails, the expired one serves on for up to
    :data:`MAX_STALE_SECONDS`, retried each :data:`MIN_CACHE_SECONDS`. A fetch that fails with
    nothing to serve is remembered for :attr:`Source.failure_ttl`.

    :param settings: The provider's settings: ``accessTokenURL`` (a ``token_endpoint`` that
        differs is logged; never used).
    :param options: Its ``customProperties``: ``discoveryURL``.
    :raises DiscoveryError: when it cannot be fetched or read, or its ``issuer`` is not
        ``issuer``.
    """
    return issuer_metadata(
        source,
        issuer,
        discovery_url=options.discovery_url,
        access_token_url=settings.access_token_url,
    )


def issuer_metadata(
    source: Source,
    issuer: str,
    *,
    discovery_url: str | None = None,
    access_token_url: str | None = None,
) -> ProviderMetadata:
    """The metadata of ``issuer`` as :func:`provider_metadata` reads it (the same cache), for
    a block that is not written yet (:func:`.issuer_settings.settings_from_issuer`).

    :param discovery_url: Read the document there (else below the issuer, see
        :func:`metadata_urls`).
    :param access_token_url: The block's token address, compared with the document's; ``None``
        compares nothing.
    :raises DiscoveryError: when it cannot be fetched or read, or its ``issuer`` is not
        ``issuer``.
    """
    url = _discovery_url(discovery_url, issuer)
    urls = _metadata_urls(discovery_url, issuer)

    def usable(entry: Entry[ProviderMetadata] | None, now: float) -> bool:
        return entry is not None and entry.expires > now

    def fetch(stale: Entry[ProviderMetadata] | None, now: float) -> Entry[ProviderMetadata]:
        return _fetch_metadata(source, urls, issuer, access_token_url, stale, now)

    caches = _caches
    metadata = caches.metadata.get(
        url,
        provider=source.provider,
        clock=caches.clock,
        failure_ttl=source.failure_ttl,
        usable=usable,
        fetch=fetch,
    ).value
    if not issuer_matches(issuer, metadata.issuer):
        raise _other_issuer(source.provider, issuer, metadata.issuer)
    return metadata


def _other_issuer(provider: str, configured: str, discovered: str) -> DiscoveryError:
    """The error for a document naming ``discovered`` (shown, cut: an issuer is public, and
    seeing it fixes the usual mistake, a trailing ``/``) where ``configured`` was expected."""
    hint = (
        " (they differ by a trailing '/')"
        if configured.rstrip("/") == discovered.rstrip("/")
        else ""
    )
    return DiscoveryError(
        provider,
        f"discovery document names another issuer than the configured one: {discovered[:200]!r}"
        + hint,
    )


def _get_metadata_json(source: Source, urls: tuple[str, ...]) -> tuple[Any, ProviderResponse]:
    """The JSON of the first of ``urls`` that is found (not a 404)."""
    for url in urls[:-1]:
        response = source.fetch(url, step="discovery request")
        if response.status != 404:
            return _json_of(source, response, "discovery request")
    return _get_json(source, urls[-1], "discovery request")


def _fetch_metadata(
    source: Source,
    urls: tuple[str, ...],
    issuer: str,
    access_token_url: str | None,
    stale: Entry[ProviderMetadata] | None,
    now: float,
) -> Entry[ProviderMetadata]:
    name = source.provider
    try:
        document, response = _get_metadata_json(source, urls)
        metadata = ProviderMetadata.from_document(name, document)
        if not issuer_matches(issuer, metadata.issuer):
            raise _other_issuer(name, issuer, metadata.issuer)
    except AuthenticationError as error:
        if stale is None or now - stale.fetched > MAX_STALE_SECONDS:
            raise
        logger.warning("%s: keeping the previous discovery document: %s", name, error)
        return dataclasses.replace(stale, expires=now + MIN_CACHE_SECONDS)
    if access_token_url is not None and metadata.token_endpoint not in (None, access_token_url):
        logger.warning(
            "%s: accessTokenURL differs from the discovery document's token_endpoint;"
            " accessTokenURL is used",
            name,
        )
    logger.info("%s: discovery document read from %s", name, urlsplit(issuer).netloc)
    return Entry(metadata, now, now + cache_seconds(response.headers))


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
        except (JoseError, ValueError, TypeError, KeyError, AttributeError):
            logger.info("%s: skipped a key of the key set that could not be read", provider)
    return tuple(keys)


def signing_keys(source: Source, jwks_uri: str, *, unknown_kid: bool = False) -> tuple[Key, ...]:
    """The provider's public keys from ``jwks_uri``, cached like the discovery document.

    :param unknown_kid: The cached keys do not include the one a token names: fetch them again,
        at most once each :data:`KEY_REFETCH_INTERVAL` seconds per key set (a flood of tokens
        with made-up ``kid`` values causes one request a minute, not one each).
    :raises DiscoveryError: when the key set cannot be fetched or read.
    """

    def usable(entry: Entry[tuple[Key, ...]] | None, now: float) -> bool:
        if entry is None or entry.expires <= now:
            return False
        # After an unknown kid, refetch a fresh set unless that was done a moment ago.
        return not unknown_kid or now - entry.forced < KEY_REFETCH_INTERVAL

    def fetch(entry: Entry[tuple[Key, ...]] | None, now: float) -> Entry[tuple[Key, ...]]:
        forced = now if unknown_kid else (entry.forced if entry is not None else float("-inf"))
        try:
            document, response = _get_json(source, jwks_uri, "key set request")
            keys = _read_keys(source.provider, document)
        except AuthenticationError as error:
            if entry is None or now - entry.fetched > MAX_STALE_SECONDS:
                raise
            logger.warning("%s: keeping the previous key set: %s", source.provider, error)
            return dataclasses.replace(entry, expires=now + MIN_CACHE_SECONDS, forced=forced)
        logger.info("%s: key set read (%d keys)", source.provider, len(keys))
        return Entry(keys, now, now + cache_seconds(response.headers), forced)

    caches = _caches
    return caches.keys.get(
        jwks_uri,
        provider=source.provider,
        clock=caches.clock,
        failure_ttl=source.failure_ttl,
        usable=usable,
        fetch=fetch,
    ).value
