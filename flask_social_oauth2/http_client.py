"""The one pooled HTTP client that talks to providers.

One ``requests.Session`` per process serves every request to every provider. It keeps no
cookies, never reads ``~/.netrc``, takes proxy settings from the environment once, has a connect
and read timeout plus an overall deadline, and refuses bodies over a size cap. No request is
retried: an authorization code is single use.
"""

from __future__ import annotations

import functools
import http.client
import io
import json
import logging
import os
import socket
import threading
import time
import urllib.request
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from http.cookiejar import DefaultCookiePolicy
from typing import Any, Final
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from requests.structures import CaseInsensitiveDict
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import ConnectionPool, HTTPConnectionPool, HTTPSConnectionPool

from .errors import AuthenticationError

logger = logging.getLogger("flask_social_oauth2")

_READ_SIZE: Final = 64 * 1024
_POOL_SIZE: Final = 32


# -- the overall deadline, also while the status line and headers arrive -----------------------
#
# urllib3's read timeout bounds each recv(), not a whole answer, and _read_body checks the
# deadline only once the headers are in: a provider that drips its status line and headers one
# byte per (timeout - a little) would hold the worker for ever. So the connections of our pools
# build their responses with _DeadlineResponse, whose socket reader gives each recv() at most the
# time left before the deadline of the request under way (a context variable set by
# ProviderHTTPClient.request) and fails like a read timeout once it has passed. This covers the
# status line, the headers and the body alike; nothing changes for other users of requests.

_deadline: ContextVar[float | None] = ContextVar("flask_social_oauth2_deadline", default=None)


class _DeadlineReader(io.RawIOBase):
    """A socket's raw reader whose every read ends by ``deadline`` (a monotonic time)."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        super().__init__()
        self._sock = sock
        self._raw = sock.makefile("rb", buffering=0)  # counts as a reference to the socket
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out (overall deadline)")
        per_read = self._sock.gettimeout()
        self._sock.settimeout(left if per_read is None else min(per_read, left))
        try:
            return self._raw.readinto(buffer)
        finally:
            self._sock.settimeout(per_read)

    def close(self) -> None:
        self._raw.close()
        super().close()


class _DeadlineResponse(http.client.HTTPResponse):
    """``http.client``'s response, reading through :class:`_DeadlineReader` when a deadline is
    set for the request under way."""

    def __init__(
        self,
        sock: socket.socket,
        debuglevel: int = 0,
        method: str | None = None,
        url: str | None = None,
    ) -> None:
        super().__init__(sock, debuglevel, method, url)
        deadline = _deadline.get()
        if deadline is not None:
            self.fp.close()  # the plain reader, not read from yet
            self.fp = io.BufferedReader(_DeadlineReader(sock, deadline))


class _DeadlineHTTPConnection(HTTPConnection):
    response_class = _DeadlineResponse


class _DeadlineHTTPSConnection(HTTPSConnection):
    response_class = _DeadlineResponse


class _DeadlineAdapter(HTTPAdapter):
    """An adapter whose pools (also those behind a proxy) open deadline-aware connections."""

    def get_connection_with_tls_context(self, *args: Any, **kwargs: Any) -> ConnectionPool:
        pool = super().get_connection_with_tls_context(*args, **kwargs)
        # A new pool has created no connection yet, so every one it makes uses our class.
        if isinstance(pool, HTTPSConnectionPool):
            pool.ConnectionCls = _DeadlineHTTPSConnection
        elif isinstance(pool, HTTPConnectionPool):
            pool.ConnectionCls = _DeadlineHTTPConnection
        return pool


@dataclass(frozen=True, slots=True)
class ProviderResponse:
    """A provider's answer, read whole within the size cap."""

    status: int
    content_type: str
    body: bytes
    headers: Mapping[str, str]

    def json(self) -> Any:
        """The body read as JSON.

        :raises ValueError: when it is not JSON, including JSON nested too deeply to read
            (``json`` raises :class:`RecursionError` for that, which must not become a 500).
        """
        try:
            return json.loads(self.body)
        except RecursionError:
            raise ValueError("JSON nested too deeply") from None

    @property
    def media_type(self) -> str:
        """The content type without parameters, lower case."""
        return self.content_type.split(";", 1)[0].strip().lower()


class ProviderHTTPClient:
    """A thread-safe, pooled client for requests to providers.

    :param pool_size: Connections kept per host.
    """

    def __init__(self, pool_size: int = _POOL_SIZE) -> None:
        session = requests.Session()
        session.trust_env = False  # no ~/.netrc; proxies and CA bundle are read once below
        session.cookies.set_policy(DefaultCookiePolicy(allowed_domains=[]))
        adapter = _DeadlineAdapter(
            pool_connections=pool_size, pool_maxsize=pool_size, max_retries=0
        )
        session.mount("https://", adapter)
        session.mount("http://", adapter)
        session.headers["User-Agent"] = "flask-social-oauth2"
        # The body is read raw (undecoded) under the size cap, so ask for it unencoded: with
        # requests' default "gzip, deflate" a provider that compresses (GitHub, Google do) gave
        # gzip bytes to the JSON parser, and a small compressed body could expand without cap.
        session.headers["Accept-Encoding"] = "identity"
        ca_bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
        if ca_bundle:
            session.verify = ca_bundle
        self._session = session
        self._proxies = {key.lower(): value for key, value in urllib.request.getproxies().items()}

    def _proxies_for(self, url: str) -> dict[str, str] | None:
        if not self._proxies:
            return None
        parts = urlsplit(url)
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
        bypass: Any = getattr(urllib.request, "proxy_bypass_environment")  # noqa: B009 - untyped
        if bypass(host, self._proxies):
            return None
        proxy = self._proxies.get(parts.scheme) or self._proxies.get("all")
        return {parts.scheme: proxy} if proxy else None

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
            time, 502 for a failed connection or an oversized body. The message names the
            provider, the step and the host, never the URL's query or a body.
        """
        host = urlsplit(url).netloc
        started = time.monotonic()
        deadline = started + timeout
        deadline_token = _deadline.set(deadline)  # read by _DeadlineResponse, see above
        try:
            response = self._send(method, url, headers, data, params, timeout)
        except requests.Timeout:
            raise error(provider, f"{step} to {host} timed out", status_code=504) from None
        except requests.exceptions.SSLError:
            raise error(provider, f"{step} to {host} failed: TLS error", status_code=502) from None
        except requests.RequestException as exc:
            reason = type(exc).__name__
            raise error(provider, f"{step} to {host} failed: {reason}", status_code=502) from None
        finally:
            _deadline.reset(deadline_token)
        try:
            body = self._read_body(response, provider, step, host, error, deadline, max_bytes)
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
        ``Session.request`` would merge environment settings, cookies and hooks that this client
        never has (``trust_env`` is off, the cookie policy refuses every cookie, there are no
        hooks), and in the profile that was a third of each request to a provider. The request
        sent, the pool, the TLS settings and the errors are the same. With a proxy,
        ``Session.request`` does it all.
        """
        session = self._session
        proxies = self._proxies_for(url)
        if proxies is not None:
            return session.request(
                method,
                url,
                headers=headers,
                data=data,
                params=params,
                timeout=(timeout, timeout),
                stream=True,
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
        adapter = session.get_adapter(prepared.url or url)
        return adapter.send(
            prepared,
            stream=True,
            timeout=(timeout, timeout),
            verify=True if session.verify is None else session.verify,
            cert=session.cert,
            proxies={},
        )

    @staticmethod
    def _read_body(
        response: requests.Response,
        provider: str,
        step: str,
        host: str,
        error: type[AuthenticationError],
        deadline: float,
        max_bytes: int,
    ) -> bytes:
        declared = response.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > max_bytes:
            raise error(provider, f"{step} to {host}: answer larger than {max_bytes} bytes")
        chunks: list[bytes] = []
        size = 0
        raw: Any = response.raw
        try:
            while True:
                if time.monotonic() > deadline:
                    raise error(provider, f"{step} to {host} timed out", status_code=504)
                chunk = raw.read1(_READ_SIZE)
                if not chunk:
                    break
                size += len(chunk)
                if size > max_bytes:
                    raise error(provider, f"{step} to {host}: answer larger than {max_bytes} bytes")
                chunks.append(chunk)
        except AuthenticationError:
            raise
        except requests.Timeout:
            raise error(provider, f"{step} to {host} timed out", status_code=504) from None
        except Exception as exc:  # urllib3 and http.client raise many kinds mid-body
            if "timed out" in str(exc).lower() or isinstance(exc, TimeoutError):
                raise error(provider, f"{step} to {host} timed out", status_code=504) from None
            reason = type(exc).__name__
            raise error(provider, f"{step} to {host} failed mid-answer: {reason}") from None
        return b"".join(chunks)


@functools.lru_cache(maxsize=256)
def _prepared_url(url: str) -> str:
    """``url`` as requests prepares it (IDNA host, requoted path), once per address: provider
    addresses come from the configuration, and preparing one was an eighth of a request."""
    prepared = requests.PreparedRequest()
    prepared.prepare_url(url, None)
    return prepared.url or url


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
