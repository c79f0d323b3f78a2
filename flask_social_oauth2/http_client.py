"""The one pooled HTTP client that talks to providers.

One ``requests.Session`` per process serves every request to every provider (its adapter and
pool; see ``ProviderHTTPClient._send``). It keeps no cookies, never reads ``~/.netrc``, takes
proxy settings from the environment once, has a connect and read timeout plus an overall
deadline, and refuses bodies over a size cap. No request is retried: an authorization code is
single use.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import threading
import time
import urllib.request
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any, Final
from urllib.parse import urlsplit

import requests
from requests.cookies import RequestsCookieJar
from requests.structures import CaseInsensitiveDict

from .deadline import DeadlineAdapter, deadline
from .errors import AuthenticationError
from .provider_response import ProviderResponse

logger = logging.getLogger("flask_social_oauth2")

_POOL_SIZE: Final = 32


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
            return _read_body(response, provider, step, host, error, max_bytes)
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
        host = urlsplit(url).netloc
        if headers:
            _check_header_values(headers, provider, step, host, error)
        started = time.monotonic()
        try:
            with deadline(timeout):  # every read of the answer, also of its body below
                response = self._send(method, url, headers, data, params, timeout)
        except requests.Timeout:
            raise error(provider, f"{step} to {host} timed out", status_code=504) from None
        except requests.exceptions.SSLError:
            raise error(provider, f"{step} to {host} failed: TLS error", status_code=502) from None
        except requests.RequestException as exc:
            reason = type(exc).__name__
            raise error(provider, f"{step} to {host} failed: {reason}", status_code=502) from None
        try:
            body = _read_body(response, provider, step, host, error, max_bytes)
        finally:
            response.close()
        logger.debug(
            "%s: %s to %s answered %s in %.0f ms",
            provider,
            step,
            host,
            response.status_code,
            (time.monotonic() - started) * 1000,
        )
        return ProviderResponse(
            status=response.status_code,
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
    ) -> requests.Response:
        """Send through the session's adapter; the answer's body is not read yet.

        Without a proxy for ``url`` the request is prepared here and handed to the adapter:
        ``Session.request`` merges environment settings, cookies, hooks and redirects that this
        session never has, and on Python 3.11 with requests 2.34 that costs 40 % more CPU per
        request to a provider and 16 % per whole sign-in (measured side by side, see the
        issue note), more than every other layer here together. The request sent, the pool, the
        TLS settings and the errors are the same. With a proxy, ``Session.request`` does it all.
        """
        session = self._session
        proxies = self.proxies_for(url)
        if proxies:
            return session.request(
                method,
                url,
                headers=headers,
                data=data,
                params=params,
                timeout=(timeout, timeout),
                stream=True,  # the body is read by _read_body, under the size cap
                allow_redirects=False,
                proxies=proxies,
            )
        prepared = requests.PreparedRequest()
        prepared.prepare_method(method)
        if params:
            prepared.prepare_url(url, params)
        else:
            prepared.url = _prepared_url(url)
        merged = CaseInsensitiveDict(session.headers)
        if headers:
            merged.update(headers)
        prepared.prepare_headers(merged)
        prepared.prepare_body(data, None)
        return session.get_adapter(prepared.url or url).send(
            prepared,
            stream=True,
            timeout=(timeout, timeout),
            verify=True if session.verify is None else session.verify,
            cert=session.cert,
            proxies={},
        )


@functools.lru_cache(maxsize=256)
def _prepared_url(url: str) -> str:
    """``url`` as requests prepares it (IDNA host, requoted path), once per address: provider
    addresses come from the configuration."""
    prepared = requests.PreparedRequest()
    prepared.prepare_url(url, None)
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
    response: requests.Response,
    provider: str,
    step: str,
    host: str,
    error: type[AuthenticationError],
    max_bytes: int,
) -> bytes:
    """The whole body, at most ``max_bytes``, read in one call: each read ends by the request's
    deadline (see :mod:`.deadline`), and one byte past the cap tells an oversized
    answer, whether it declares its length, is chunked or is endless."""
    declared = response.headers.get("Content-Length")
    if declared is not None:
        if not _ASCII_DIGITS.fullmatch(declared):
            raise error(provider, f"{step} to {host}: malformed Content-Length header")
        if len(declared) > _MAX_DIGITS or int(declared) > max_bytes:
            raise error(provider, f"{step} to {host}: answer larger than {max_bytes} bytes")
    raw: Any = response.raw
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
