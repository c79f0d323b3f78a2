"""The guarded GET that every AT Protocol resolution step uses.

A handle, a DID document and a PDS each name a URL that anyone can choose, and the server
fetches it: a textbook server-side request forgery. So a fetch here

- is ``https`` only; plain ``http`` only with ``allow_loopback`` and only to a loopback host
  (development and tests);
- resolves the host itself (``socket.getaddrinfo``, once, within the time cap) and goes on only
  when *every* address is public (:mod:`.addresses`), or loopback where that is allowed;
- connects to one of those checked addresses, never to the name again: the ``Host`` header and
  the TLS server name (SNI and certificate check) are the URL's host, so a DNS answer that
  changes between the check and the connection (DNS rebinding) cannot move the request; the
  socket's peer is checked again before a byte is sent;
- bounds the whole exchange by one deadline (connect, TLS, status line, headers and body, each
  ``recv`` given only the time left) and the body by a size cap;
- never follows a redirect, asks for no compression, and takes JSON only where JSON is wanted.

Proxy settings are not used: a proxy would make the address check meaningless. Every failure
is a :class:`~flask_social_oauth2.errors.ResolutionError` (502, 504 for the time cap).
"""

from __future__ import annotations

import contextlib
import http.client
import io
import ipaddress
import json
import socket
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from ..errors import ResolutionError
from ..urls import is_loopback_host, split_absolute_url
from .addresses import IPAddress, is_loopback_address, is_public_address

#: The largest answer read (a DID document or an OAuth metadata document is a few KiB).
DEFAULT_MAX_BYTES: Final = 64 * 1024
#: The time one fetch may take, from the DNS lookup to the last byte, in seconds.
DEFAULT_TIMEOUT: Final = 5.0
_USER_AGENT: Final = "flask-social-oauth2 (AT Protocol resolution)"

#: ``socket.getaddrinfo``'s shape, for tests that answer DNS themselves.
GetAddrInfo = Callable[..., Sequence[tuple[Any, ...]]]


class Fetcher(Protocol):
    """What the resolution steps need from a fetch: a JSON object or a short text by GET, and
    whether loopback servers are allowed (the steps check the URLs they read against it)."""

    @property
    def allow_loopback(self) -> bool:
        """Whether ``http`` to loopback hosts is allowed (development and tests only)."""
        ...

    def json(self, url: str) -> dict[str, Any]:
        """The JSON object at ``url``.

        :raises ResolutionError: on any failure.
        """
        ...

    def text(self, url: str) -> str:
        """The text at ``url`` (UTF-8).

        :raises ResolutionError: on any failure.
        """
        ...


@dataclass(frozen=True)
class _Target:
    scheme: str
    host: str
    port: int
    host_header: str
    path: str


@dataclass(frozen=True)
class GuardedFetcher:
    """The SSRF-guarded fetch (see the module's description).

    :param allow_loopback: Allow ``http`` to loopback hosts, and loopback addresses.
    :param max_bytes: The body size cap.
    :param timeout: The time cap of one whole fetch, in seconds.
    :param ssl_context: The TLS context (default: the system's trust store, hostname checked).
    :param getaddrinfo: The DNS lookup (default: ``socket.getaddrinfo``, looked up per call).
    :param provider: The provider block's name, for the errors.
    """

    allow_loopback: bool = False
    max_bytes: int = DEFAULT_MAX_BYTES
    timeout: float = DEFAULT_TIMEOUT
    ssl_context: ssl.SSLContext | None = field(default=None, repr=False)
    getaddrinfo: GetAddrInfo | None = field(default=None, repr=False)
    provider: str = "bluesky"

    def json(self, url: str) -> dict[str, Any]:
        """GET ``url`` and read its JSON object (``application/json`` or ``*/*+json``).

        :raises ResolutionError: on any failure (see the module's description).
        """
        content_type, body = self._get(url, "application/json")
        media = content_type.split(";", 1)[0].strip().lower()
        if media != "application/json" and not media.endswith("+json"):
            raise self._error("not_json", f"{_where(url)} answered {media or 'no'} content type")
        try:
            document = json.loads(body.decode("utf-8"), parse_constant=_no_constant)
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise self._error("bad_json", f"{_where(url)} answered invalid JSON") from None
        if not isinstance(document, dict):
            raise self._error("bad_json", f"{_where(url)} answered JSON that is not an object")
        return document

    def text(self, url: str) -> str:
        """GET ``url`` and read its body as UTF-8 text.

        :raises ResolutionError: on any failure (see the module's description).
        """
        _, body = self._get(url, "text/plain")
        try:
            return body.decode("utf-8")
        except UnicodeDecodeError:
            raise self._error(
                "bad_text", f"{_where(url)} answered text that is not UTF-8"
            ) from None

    # -- the exchange ----------------------------------------------------------------------

    def _get(self, url: str, accept: str) -> tuple[str, bytes]:
        target = self._target(url)
        deadline = time.monotonic() + self.timeout
        addresses = self._addresses(target, deadline)
        sock = self._connect(target, addresses, deadline)
        try:
            request = (
                f"GET {target.path} HTTP/1.1\r\nHost: {target.host_header}\r\n"
                f"Accept: {accept}\r\nAccept-Encoding: identity\r\n"
                f"User-Agent: {_USER_AGENT}\r\nConnection: close\r\n\r\n"
            ).encode("ascii")
            return self._exchange(url, _DeadlineSocket(sock, deadline), request)
        except TimeoutError:
            raise self._error(
                "timeout", f"{_where(url)} did not answer within {self.timeout:g} s", status=504
            ) from None
        except OSError:
            raise self._error("unreachable", f"{_where(url)} failed mid-answer") from None
        except http.client.HTTPException:
            raise self._error("bad_response", f"{_where(url)} answered no valid HTTP") from None
        finally:
            with contextlib.suppress(OSError):
                sock.close()

    def _exchange(self, url: str, sock: _DeadlineSocket, request: bytes) -> tuple[str, bytes]:
        sock.sendall(request)
        response = http.client.HTTPResponse(sock, method="GET")  # type: ignore[arg-type]
        try:
            response.begin()
            status = response.status
            if 300 <= status < 400:
                raise self._error(
                    "redirect", f"{_where(url)} redirected ({status}); redirects are not followed"
                )
            if status != 200:
                raise self._error(
                    "http_status", f"{_where(url)} answered {status}", http_status=status
                )
            encoding = (response.getheader("Content-Encoding") or "identity").strip().lower()
            if encoding != "identity":
                raise self._error("bad_response", f"{_where(url)} answered a compressed body")
            length = response.getheader("Content-Length")
            if length is not None and length.strip().isdigit() and int(length) > self.max_bytes:
                raise self._error("too_large", f"{_where(url)} answered over {self.max_bytes} B")
            body = response.read(self.max_bytes + 1)
            if len(body) > self.max_bytes:
                raise self._error("too_large", f"{_where(url)} answered over {self.max_bytes} B")
            return response.getheader("Content-Type") or "", body
        finally:
            response.close()

    def _target(self, url: str) -> _Target:
        if not url.isascii():
            raise self._error("bad_url", f"{url[:100]!r} is not an ASCII URL")
        parts = split_absolute_url(url)
        if isinstance(parts, str):
            raise self._error("bad_url", f"{url[:100]!r} {parts}")
        host = parts.hostname or ""
        if parts.scheme == "http" and not (self.allow_loopback and is_loopback_host(host)):
            raise self._error("insecure_url", f"{_where(url)}: only https is allowed")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        path = parts.path or "/"
        if parts.query:
            path = f"{path}?{parts.query}"
        shown = f"[{host}]" if ":" in host else host
        host_header = shown if parts.port is None else f"{shown}:{parts.port}"
        return _Target(parts.scheme, host, port, host_header, path)

    def _addresses(self, target: _Target, deadline: float) -> list[tuple[int, IPAddress]]:
        try:
            literal = ipaddress.ip_address(target.host)
        except ValueError:
            infos = self._lookup(target, deadline)
            found: list[tuple[int, IPAddress]] = []
            for family, _, _, _, sockaddr in infos:
                if family not in (socket.AF_INET, socket.AF_INET6):
                    continue
                try:
                    found.append((family, ipaddress.ip_address(sockaddr[0])))
                except ValueError:  # a scoped IPv6 address ("fe80::1%eth0"): never public
                    raise self._refused(target) from None
        else:
            family = socket.AF_INET6 if literal.version == 6 else socket.AF_INET
            found = [(family, literal)]
        if not found:
            raise self._error("dns", f"{target.host!r} has no address")
        loopback_only = target.scheme == "http"
        for _, address in found:
            loopback = self.allow_loopback and is_loopback_address(address)
            if loopback_only and not loopback:
                raise self._refused(target)
            if not (loopback or is_public_address(address)):
                raise self._refused(target)
        return found

    def _lookup(self, target: _Target, deadline: float) -> Sequence[tuple[Any, ...]]:
        """``getaddrinfo`` has no timeout of its own: it runs in a daemon thread, waited for
        only until the deadline (a stuck resolver then ends on its own, unwaited)."""
        lookup = self.getaddrinfo or socket.getaddrinfo
        outcome: list[Sequence[tuple[Any, ...]] | BaseException] = []

        def run() -> None:
            try:
                outcome.append(
                    lookup(
                        target.host, target.port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
                    )
                )
            except Exception as failure:  # handed to the waiting thread
                outcome.append(failure)

        worker = threading.Thread(target=run, name="atproto-dns", daemon=True)
        worker.start()
        worker.join(max(0.0, deadline - time.monotonic()))
        if not outcome:
            raise self._error(
                "timeout",
                f"the DNS lookup of {target.host!r} took over {self.timeout:g} s",
                status=504,
            )
        result = outcome[0]
        if isinstance(result, BaseException):
            raise self._error("dns", f"{target.host!r} does not resolve") from None
        return result

    def _connect(
        self, target: _Target, addresses: list[tuple[int, IPAddress]], deadline: float
    ) -> socket.socket:
        timed_out = False
        for family, address in addresses:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            sock = socket.socket(family, socket.SOCK_STREAM)
            try:
                sock.settimeout(left)
                sock.connect((str(address), target.port))
                if ipaddress.ip_address(sock.getpeername()[0]) != address:
                    raise self._refused(target)
                if target.scheme == "https":
                    sock = self._tls(sock, target, deadline)
                return sock
            except ssl.SSLCertVerificationError:
                sock.close()
                raise self._error(
                    "tls", f"{target.host!r} presented a certificate that does not verify"
                ) from None
            except TimeoutError:
                sock.close()
                timed_out = True
            except OSError:
                sock.close()
            except BaseException:
                sock.close()
                raise
        if timed_out:
            raise self._error(
                "timeout", f"{target.host!r} did not answer within {self.timeout:g} s", status=504
            )
        raise self._error("unreachable", f"{target.host!r} refused the connection")

    def _tls(self, sock: socket.socket, target: _Target, deadline: float) -> ssl.SSLSocket:
        """The TLS handshake, checking the certificate against the URL's host (also its SNI).
        The ssl module gives a blocking handshake the socket timeout as one deadline for the
        whole handshake, not per read, so a server that drips it is cut off in time."""
        context = self.ssl_context or ssl.create_default_context()
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        return context.wrap_socket(sock, server_hostname=target.host)

    def _refused(self, target: _Target) -> ResolutionError:
        return self._error(
            "refused_address", f"{target.host!r} resolves to an address that is not public"
        )

    def _error(
        self,
        reason: str,
        message: str,
        *,
        status: int | None = None,
        http_status: int | None = None,
    ) -> ResolutionError:
        return ResolutionError(
            reason, message, status_code=status, provider=self.provider, http_status=http_status
        )


class _DeadlineSocket:
    """What :class:`http.client.HTTPResponse` needs of a socket (``makefile``), plus
    ``sendall``: every ``recv`` and ``send`` given only the time left before the deadline."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self._sock = sock
        self._deadline = deadline

    def _left(self) -> float:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out (overall deadline)")
        return left

    def sendall(self, data: bytes) -> None:
        self._sock.settimeout(self._left())
        self._sock.sendall(data)

    def makefile(self, mode: str = "rb", *args: Any, **kwargs: Any) -> io.BufferedReader:
        return io.BufferedReader(_DeadlineReader(self))

    def recv_into(self, buffer: Any) -> int:
        self._sock.settimeout(self._left())
        return self._sock.recv_into(buffer)


class _DeadlineReader(io.RawIOBase):
    def __init__(self, sock: _DeadlineSocket) -> None:
        super().__init__()
        self._sock = sock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        return self._sock.recv_into(buffer)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _where(url: str) -> str:
    """The URL as it may appear in an error: no query (a handle is not a secret, but an
    answer's URL is chosen by a stranger), cut to a sane length."""
    return url.split("?", 1)[0][:200]
