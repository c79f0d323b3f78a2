"""The one pooled HTTP client that talks to providers.

One ``requests.Session`` per process serves every request to every provider. It keeps no
cookies, never reads ``~/.netrc``, takes proxy settings from the environment once, has a connect
and read timeout plus an overall deadline, and refuses bodies over a size cap. No request is
retried: an authorization code is single use.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from http.cookiejar import DefaultCookiePolicy
from typing import Any, Final
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter

from .errors import AuthenticationError

logger = logging.getLogger("flask_social_oauth2")

_READ_SIZE: Final = 64 * 1024
_POOL_SIZE: Final = 32


@dataclass(frozen=True, slots=True)
class ProviderResponse:
    """A provider's answer, read whole within the size cap."""

    status: int
    content_type: str
    body: bytes
    headers: Mapping[str, str]

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
        adapter = HTTPAdapter(pool_connections=pool_size, pool_maxsize=pool_size, max_retries=0)
        session.mount("https://", adapter)
        session.mount("http://", adapter)
        session.headers["User-Agent"] = "flask-social-oauth2"
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
        try:
            response = self._session.request(
                method,
                url,
                headers=headers,
                data=data,
                params=params,
                timeout=(timeout, timeout),
                stream=True,
                allow_redirects=False,
                proxies=self._proxies_for(url),
            )
        except requests.Timeout:
            raise error(provider, f"{step} to {host} timed out", status_code=504) from None
        except requests.exceptions.SSLError:
            raise error(provider, f"{step} to {host} failed: TLS error", status_code=502) from None
        except requests.RequestException as exc:
            reason = type(exc).__name__
            raise error(provider, f"{step} to {host} failed: {reason}", status_code=502) from None
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
