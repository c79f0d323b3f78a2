"""An overall deadline on each answer from a provider, also while its status line and headers
arrive.

urllib3's read timeout bounds each ``recv()``, not a whole answer: a provider that drips its
status line and headers one byte per (timeout - a little) would hold the worker for ever. So the
pools of :class:`DeadlineAdapter` open connections whose responses read through
:class:`_DeadlineReader`, which gives each ``recv()`` at most the time left before the deadline of
the request under way (a context variable, set by :func:`deadline`) and fails like a read timeout
once it has passed. This covers the status line, the headers and the body alike; nothing changes
for other users of requests or urllib3.
"""

from __future__ import annotations

import http.client
import io
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from typing import Any, Final

from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.poolmanager import PoolManager
from urllib3.poolmanager import pool_classes_by_scheme as _URLLIB3_POOLS

_deadline: ContextVar[float | None] = ContextVar("flask_social_oauth2_deadline", default=None)


class _DeadlineReader(io.RawIOBase):
    """A socket's raw reader whose every read ends by ``deadline`` (a monotonic time)."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        super().__init__()
        self._sock = sock
        # Held, never read from: like any socket file it keeps the socket open while the
        # response is read, even after the connection closes it (a "Connection: close" answer).
        self._keep_open = sock.makefile("rb", buffering=0)
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out (overall deadline)")
        per_read = self._sock.gettimeout()
        self._sock.settimeout(left if per_read is None else min(per_read, left))
        try:
            return self._sock.recv_into(buffer)
        finally:
            self._sock.settimeout(per_read)

    def close(self) -> None:
        self._keep_open.close()
        super().close()


class _DeadlineSocket:
    """What :class:`http.client.HTTPResponse` asks of its socket (one ``makefile``), answered
    with a deadline reader: the response reads through it from its first byte."""

    __slots__ = ("_deadline", "_sock")

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self._sock = sock
        self._deadline = deadline

    def makefile(self, mode: str) -> io.BufferedReader:
        return io.BufferedReader(_DeadlineReader(self._sock, self._deadline))


class _DeadlineResponse(http.client.HTTPResponse):
    """``http.client``'s response, reading through :class:`_DeadlineReader` when a deadline is
    set for the request under way (see :func:`deadline`)."""

    def __init__(
        self,
        sock: socket.socket,
        debuglevel: int = 0,
        method: str | None = None,
        url: str | None = None,
    ) -> None:
        deadline = _deadline.get()
        source: Any = sock if deadline is None else _DeadlineSocket(sock, deadline)
        super().__init__(source, debuglevel, method, url)


class _DeadlineHTTPConnection(HTTPConnection):
    response_class = _DeadlineResponse


class _DeadlineHTTPSConnection(HTTPSConnection):
    response_class = _DeadlineResponse


class _DeadlineHTTPConnectionPool(HTTPConnectionPool):
    ConnectionCls = _DeadlineHTTPConnection


class _DeadlineHTTPSConnectionPool(HTTPSConnectionPool):
    ConnectionCls = _DeadlineHTTPSConnection


_DEADLINE_POOLS: Final = {
    "http": _DeadlineHTTPConnectionPool,
    "https": _DeadlineHTTPSConnectionPool,
}


class DeadlineAdapter(HTTPAdapter):
    """An adapter whose pool managers (also those behind a proxy) make deadline-aware pools,
    set once when each manager is made rather than on every request."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _DEADLINE_POOLS

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> PoolManager:
        manager: PoolManager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if manager.pool_classes_by_scheme == _URLLIB3_POOLS:  # not a SOCKS proxy's own pools
            manager.pool_classes_by_scheme = _DEADLINE_POOLS
        return manager


@contextmanager
def deadline(timeout: float) -> Iterator[None]:
    """Bound every read of the answers to requests sent in the ``with`` block (status line,
    headers and body alike, also when the body is read after the block) by ``timeout`` seconds
    from now."""
    token = _deadline.set(time.monotonic() + timeout)
    try:
        yield
    finally:
        _deadline.reset(token)


def set_deadline(timeout: float) -> Token[float | None]:
    """What :func:`deadline` does on entering its block, for a caller that ends it itself with
    :func:`reset_deadline` (one call each, where the context manager's generator costs more than
    the request it bounds)."""
    return _deadline.set(time.monotonic() + timeout)


def reset_deadline(token: Token[float | None]) -> None:
    """End the deadline that :func:`set_deadline` set."""
    _deadline.reset(token)
