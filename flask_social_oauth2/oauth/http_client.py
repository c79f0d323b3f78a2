"""The one pooled HTTP client that talks to providers.

One ``requests.Session`` per process owns the connection pools of every request to every
provider (its adapter's urllib3 pools; see ``ProviderHTTPClient._send``). It keeps no cookies,
never reads ``~/.netrc``, takes proxy settings and the CA bundle from the environment once, has
a connect and read timeout plus an overall deadline, and refuses bodies over a size cap. No
request is retried: an authorization code is single use.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any, Final, NamedTuple
from urllib.parse import urlencode, urlsplit

import requests
from requests.cookies import RequestsCookieJar
from requests.utils import DEFAULT_CA_BUNDLE_PATH, urldefragauth
from urllib3 import BaseHTTPResponse, PoolManager, Timeout
from urllib3 import exceptions as urllib3_errors
from urllib3.exceptions import LocationValueError
from urllib3.util import parse_url

from ..errors import AuthenticationError
from .deadline import DeadlineAdapter, deadline, reset_deadline, set_deadline
from .provider_response import ProviderResponse

logger = logging.getLogger("flask_social_oauth2")

_POOL_SIZE: Final = 32
#: Addresses whose route (pool, proxy, request target) is remembered; past it the memory
#: starts again.
_MAX_ROUTES: Final = 256


class _ProviderSession(requests.Session):
    """A session that never follows a redirect, nor prepares one: for an answer with a
    ``Location``, ``Session.send`` would otherwise read the whole body first (to free the
    connection), with no size cap and decoding any ``Content-Encoding``."""

    def get_redirect_target(self, resp: requests.Response) -> None:
        return None


class _NoCookies(RequestsCookieJar):
    """The session's cookie jar: keeps nothing, so no cookie of one user's sign-in reaches
    another's, and no answer is searched for cookies to keep."""

    def set_cookie(self, *args: Any, **kwargs: Any) -> None:
        return None

    def extract_cookies(self, *args: Any, **kwargs: Any) -> None:
        return None


class _Route(NamedTuple):
    """Where the requests to one address go."""

    scheme: str
    host: str | None
    port: int | None
    #: The request target: the path and query, or the whole URL through an HTTP proxy.
    target: str
    #: The pool manager: the adapter's, or the adapter's manager for the proxy. Asked on
    #: every request, never kept: the adapter owns them.
    manager: Callable[[], PoolManager]


class ProviderHTTPClient:
    """A thread-safe, pooled client for requests to providers.

    :param pool_size: Connections kept per host.
    """

    def __init__(self, pool_size: int = _POOL_SIZE) -> None:
        self._adapter = DeadlineAdapter(
            pool_connections=pool_size, pool_maxsize=pool_size, max_retries=0
        )
        self._ca_bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
        self._session = _ProviderSession()
        self.configure(self._session)
        self._proxies = {key.lower(): value for key, value in urllib.request.getproxies().items()}
        # What the session sends with every request, and the TLS settings its adapter gives a
        # pool (``HTTPAdapter.build_connection_pool_key_attributes`` and ``cert_verify``).
        self._headers = {name: str(value) for name, value in self._session.headers.items()}
        self._header_names = {name.lower(): name for name in self._headers}
        self._tls: dict[str, Any] = {"cert_reqs": "CERT_REQUIRED"}
        self._ca_location = self._ca_bundle or DEFAULT_CA_BUNDLE_PATH
        self._ca_is_dir = os.path.isdir(self._ca_location)
        if self._ca_bundle:
            self._tls["ca_cert_dir" if self._ca_is_dir else "ca_certs"] = self._ca_bundle
        #: Where a request to each address goes, worked out once per address (provider
        #: addresses come from the configuration, and the proxies are read once).
        self._route: Callable[[str], _Route] = functools.lru_cache(maxsize=_MAX_ROUTES)(
            self._make_route
        )

    def configure(self, session: requests.Session) -> None:
        """Give ``session`` this client's rules: its connection pools (shared, thread-safe),
        no ``~/.netrc`` and no environment lookups per request (proxies and the CA bundle are
        read once, here), a cookie jar that keeps nothing, no retries, and its headers."""
        session.trust_env = False
        session.cookies = _NoCookies()
        session.mount("https://", self._adapter)
        session.mount("http://", self._adapter)
        session.headers["User-Agent"] = "flask-social-oauth2"
        # The body is read raw (undecoded) under the size cap, so ask for it unencoded: with
        # requests' default "gzip, deflate" a provider that compresses (GitHub, Google do) gave
        # gzip bytes to the JSON parser, and a small compressed body could expand without cap.
        session.headers["Accept-Encoding"] = "identity"
        if self._ca_bundle:
            session.verify = self._ca_bundle

    @staticmethod
    def deadline(timeout: float) -> AbstractContextManager[None]:
        """Bound every read of the requests sent in the ``with`` block (status line, headers
        and body alike) by ``timeout`` seconds from now (see :mod:`.deadline`)."""
        return deadline(timeout)

    @staticmethod
    def check_headers(
        headers: Mapping[str, str],
        *,
        provider: str,
        step: str,
        url: str,
        error: type[AuthenticationError],
    ) -> None:
        """Refuse a header that cannot be sent, naming it and never its value.

        :raises AuthenticationError: of class ``error``, 502.
        """
        _check_header_values(headers, provider, step, urlsplit(url).netloc, error)

    @staticmethod
    def read_body(
        response: requests.Response,
        *,
        provider: str,
        step: str,
        error: type[AuthenticationError],
        max_bytes: int,
    ) -> bytes:
        """Read a streamed answer whole, within the size cap and by the deadline it was sent
        with, and close it.

        :raises AuthenticationError: of class ``error``, 504 past the deadline, else 502.
        """
        host = urlsplit(response.url).netloc
        try:
            return _read_body(
                response.raw, response.headers, provider, step, host, error, max_bytes
            )
        finally:
            response.close()

    def proxies_for(self, url: str) -> dict[str, str]:
        """The proxy for ``url`` from the environment as read once (empty for none)."""
        if not self._proxies:
            return {}
        parts = urlsplit(url)
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
        bypass: Any = getattr(urllib.request, "proxy_bypass_environment")  # noqa: B009 - untyped
        if bypass(host, self._proxies):
            return {}
        proxy = self._proxies.get(parts.scheme) or self._proxies.get("all")
        return {parts.scheme: proxy} if proxy else {}

    def request(
        self,
        method: str,
        url: str,
        *,
        provider: str,
        step: str,
        error: type[AuthenticationError],
        timeout: float,
        max_bytes: int,
        headers: Mapping[str, str] | None = None,
        data: str | Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> ProviderResponse:
        """Send one request and read the whole answer.

        :param provider: The provider's name, for errors and logs.
        :param step: What the request is for (``"token request"``), for errors and logs.
        :param error: The error class raised on failure.
        :param timeout: Seconds for connecting, for each read, and for the whole exchange.
        :param max_bytes: The largest body accepted.
        :raises AuthenticationError: of class ``error``: 504 when the provider did not answer in
            time; 502 for a failed connection, a header that cannot be sent, or a malformed or
            oversized answer. The message names the provider, the step and the host, never the
            URL's query, a header's value or a body.
        """
        host = _netloc(url)
        if headers:
            _check_header_values(headers, provider, step, host, error)
        started = time.monotonic()
        bounded = set_deadline(timeout)  # every read of the answer, also of its body below
        try:
            try:
                response = self._send(method, url, headers, data, params, timeout)
            finally:
                reset_deadline(bounded)
        except (requests.RequestException, urllib3_errors.HTTPError, OSError) as exc:
            reason = _failure(exc)
            if reason == "timeout":
                raise error(provider, f"{step} to {host} timed out", status_code=504) from None
            raise error(provider, f"{step} to {host} failed: {reason}", status_code=502) from None
        try:
            body = _read_body(response, response.headers, provider, step, host, error, max_bytes)
        finally:
            response.close()
            response.release_conn()
        logger.debug(
            "%s: %s to %s answered %s in %.0f ms",
            provider,
            step,
            host,
            response.status,
            (time.monotonic() - started) * 1000,
        )
        return ProviderResponse(
            status=response.status,
            content_type=response.headers.get("Content-Type", ""),
            body=body,
            headers=response.headers,
        )

    def _send(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str] | None,
        data: str | Mapping[str, str] | None,
        params: Mapping[str, str] | None,
        timeout: float,
    ) -> BaseHTTPResponse:
        """Send through the urllib3 pool that the session's adapter keeps for the URL's host
        (or through the adapter's manager for its proxy); the answer's body is not read yet.

        This is what the adapter's ``send`` does with a prepared request, without the layers
        above the pool that this client never uses: ``Session.request`` merges environment
        settings, cookies, hooks and redirects it never has, and the adapter wraps every
        answer in a ``Response`` searched for cookies; every provider call would pay for them.
        The request sent, the pools, the TLS settings (those the adapter gives a pool: the CA
        bundle read once, else certifi's), the proxy, the timeouts and the errors (named as
        requests names them) are the same. ``social.api()`` sends with ``Session.request``
        through the same adapter.
        """
        route = self._route(url if not params else _with_params(url, params))
        body: bytes | None = None
        if data:
            text = data if isinstance(data, str) else urlencode(list(data.items()))
            body = text.encode("utf-8")
        fields = dict(self._headers)
        if headers:
            for name, value in headers.items():
                fields.pop(self._header_names.get(name.lower(), name), None)
                fields[name] = value
        if body is not None:
            fields["Content-Length"] = str(len(body))
            if not isinstance(data, str) and not any(n.lower() == "content-type" for n in fields):
                fields["Content-Type"] = "application/x-www-form-urlencoded"
        elif method not in ("GET", "HEAD"):
            fields["Content-Length"] = "0"
        try:
            pool = route.manager().connection_from_host(
                route.host, route.port, route.scheme, pool_kwargs=self._tls
            )
        except LocationValueError as exc:
            raise requests.exceptions.InvalidURL(exc) from None
        pool_tls: Any = pool  # what the adapter's cert_verify sets on the pool, every time
        if route.scheme == "https":
            pool_tls.cert_reqs = "CERT_REQUIRED"
            if self._ca_is_dir:
                pool_tls.ca_cert_dir = self._ca_location
            else:
                pool_tls.ca_certs = self._ca_location
        else:
            pool_tls.cert_reqs = "CERT_NONE"
            pool_tls.ca_certs = pool_tls.ca_cert_dir = None
        return pool.urlopen(
            method,
            route.target,
            body=body,
            headers=fields,
            redirect=False,
            assert_same_host=False,
            preload_content=False,
            decode_content=False,
            retries=self._adapter.max_retries,
            timeout=_timeout(timeout),
            chunked=False,
        )

    def _make_route(self, url: str) -> _Route:
        prepared = requests.PreparedRequest()
        prepared.prepare_url(url, None)  # as requests prepares it: IDNA host, requoted path
        full = prepared.url or url
        parts = parse_url(full)
        scheme = (parts.scheme or "").lower()
        if scheme not in ("http", "https"):
            raise requests.exceptions.InvalidSchema(f"no connection adapter for {scheme!r}")
        proxy = self.proxies_for(full).get(scheme)
        if not proxy:
            pools = self._adapter
            return _Route(
                scheme, parts.host, parts.port, parts.request_uri, lambda: pools.poolmanager
            )
        proxy = _with_scheme(proxy, "http")
        if not parse_url(proxy).host:
            raise requests.exceptions.InvalidProxyURL("the proxy URL has no host")
        target = parts.request_uri
        if scheme == "http" and not proxy.lower().startswith("socks"):
            target = urldefragauth(full)  # an HTTP proxy is sent the absolute form
        adapter = self._adapter
        return _Route(
            scheme, parts.host, parts.port, target, lambda: adapter.proxy_manager_for(proxy)
        )


#: requests' own (untyped): a proxy address without a scheme is an http one.
_with_scheme: Callable[[str, str], str] = requests.utils.prepend_scheme_if_needed


@functools.lru_cache(maxsize=_MAX_ROUTES)
def _timeout(seconds: float) -> Timeout:
    """urllib3's connect and read timeout of ``seconds``, made once per value (a pool clones it
    for each request, so one object serves all)."""
    return Timeout(connect=seconds, read=seconds)


def _with_params(url: str, params: Mapping[str, str]) -> str:
    """``url`` with ``params`` added to its query, as requests adds them."""
    prepared = requests.PreparedRequest()
    prepared.prepare_url(url, params)
    return prepared.url or url


#: A header value http.client can send: Latin-1 without line breaks or NUL (requests refuses
#: those too, with an error whose text shows the value).
_SENDABLE_HEADER_VALUE: Final = re.compile(r"[^\x00\n\r\u0100-\U0010ffff]*")
#: A Content-Length as RFC 9110 writes it (``str.isdigit`` also takes "²" and Arabic-Indic
#: digits).
_ASCII_DIGITS: Final = re.compile("[0-9]+")
#: A length of more digits than this is over any cap, and is not converted (int() refuses
#: strings of over 4,300 digits).
_MAX_DIGITS: Final = 15


def _check_header_values(
    headers: Mapping[str, str],
    provider: str,
    step: str,
    host: str,
    error: type[AuthenticationError],
) -> None:
    """Refuse, before anything is sent, a header that cannot be sent, naming the header and
    never its value (an ``Authorization`` header holds a token or the client's credentials)."""
    for name, value in headers.items():
        if not _SENDABLE_HEADER_VALUE.fullmatch(value):
            raise error(provider, f"{step} to {host}: the {name} header cannot be sent")


def _read_body(
    raw: Any,
    headers: Mapping[str, str],
    provider: str,
    step: str,
    host: str,
    error: type[AuthenticationError],
    max_bytes: int,
) -> bytes:
    """The whole body of the urllib3 answer ``raw``, at most ``max_bytes``, read in one call:
    each read ends by the request's deadline (see :mod:`.deadline`), and one byte past the cap
    tells an oversized answer, whether it declares its length, is chunked or is endless."""
    declared = headers.get("Content-Length")
    if declared is not None:
        if not _ASCII_DIGITS.fullmatch(declared):
            raise error(provider, f"{step} to {host}: malformed Content-Length header")
        if len(declared) > _MAX_DIGITS or int(declared) > max_bytes:
            raise error(provider, f"{step} to {host}: answer larger than {max_bytes} bytes")
    try:
        body: bytes = raw.read(max_bytes + 1, decode_content=False)
    except Exception as exc:  # urllib3 and http.client raise many kinds mid-body
        if "timed out" in str(exc).lower() or isinstance(exc, TimeoutError):
            raise error(provider, f"{step} to {host} timed out", status_code=504) from None
        reason = type(exc).__name__
        raise error(provider, f"{step} to {host} failed mid-answer: {reason}") from None
    if len(body) > max_bytes:
        raise error(provider, f"{step} to {host}: answer larger than {max_bytes} bytes")
    return body


def _failure(exc: BaseException) -> str:
    """What went wrong in sending, as the adapter of requests names it: ``"timeout"``, ``"TLS
    error"``, or the name of the requests exception it raises (``ConnectionError``...)."""
    if isinstance(exc, requests.RequestException):  # raised here, as requests does
        if isinstance(exc, requests.Timeout):
            return "timeout"
        return "TLS error" if isinstance(exc, requests.exceptions.SSLError) else type(exc).__name__
    if isinstance(exc, urllib3_errors.MaxRetryError):
        cause = exc.reason
        if isinstance(cause, urllib3_errors.ConnectTimeoutError) and not isinstance(
            cause, urllib3_errors.NewConnectionError
        ):
            return "timeout"
        if isinstance(cause, urllib3_errors.ResponseError):
            return "RetryError"
        if isinstance(cause, urllib3_errors.ProxyError):
            return "ProxyError"
        if isinstance(cause, urllib3_errors.SSLError):
            return "TLS error"
        return "ConnectionError"
    if isinstance(exc, urllib3_errors.ProxyError):
        return "ProxyError"
    if isinstance(exc, urllib3_errors.SSLError):
        return "TLS error"
    if isinstance(exc, urllib3_errors.ReadTimeoutError):
        return "timeout"
    if isinstance(exc, urllib3_errors.InvalidHeader):
        return "InvalidHeader"
    if isinstance(exc, urllib3_errors.ProtocolError | urllib3_errors.ClosedPoolError | OSError):
        return "ConnectionError"
    return type(exc).__name__


@functools.lru_cache(maxsize=_MAX_ROUTES)
def _netloc(url: str) -> str:
    """The host (and port) of ``url``, as errors and logs name it."""
    return urlsplit(url).netloc


_client: ProviderHTTPClient | None = None
_client_lock = threading.Lock()


def get_client() -> ProviderHTTPClient:
    """The process's client, created on first use (and again in a forked child)."""
    global _client
    client = _client
    if client is None:
        with _client_lock:
            if _client is None:
                _client = ProviderHTTPClient()
            client = _client
    return client


def _forget_client_after_fork() -> None:
    global _client, _client_lock
    _client = None
    _client_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_client_after_fork)
