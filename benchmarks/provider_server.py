"""A tiny HTTP/1.1 keep-alive token + userinfo + API server for the benchmarks, on loopback.

It runs in its own process (``python -m benchmarks.provider_server``), so that it never competes
with the measured process for the GIL, and answers every contender the same way:

- ``POST /token``: a form with ``grant_type=authorization_code`` and a ``code`` is answered with
  a JSON bearer token; the token names the ``client_id`` so that the profile request can be
  counted per contender. Anything else is a 400 ``invalid_request``.
- ``GET /userinfo`` with ``Authorization: Bearer <token>``: a JSON OpenID Connect profile.
- ``GET /api/me`` with ``Authorization: Bearer <token>``: a small protected API answer, JSON
  ``{"sub": ..., "client": <client_id of the token>}``, so that the caller can check that its
  own token was sent.
- ``GET /stats``: per ``client_id``: token requests, token requests that carried a PKCE
  ``code_verifier``, profile requests and API requests.

Connections are kept alive unless the client asks to close. The first line on stdout is
``PORT <n>``; the server stops when stdin is closed or on SIGTERM.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import sys
from collections import defaultdict
from typing import Final
from urllib.parse import parse_qsl, unquote_plus

SUB: Final = "248289761001"
PROFILE: Final = json.dumps(
    {
        "sub": SUB,
        "name": "Ada Lovelace",
        "given_name": "Ada",
        "family_name": "Lovelace",
        "email": "ada@example.org",
        "picture": "https://example.org/ada.png",
    }
).encode()
_MAX_HEAD: Final = 16 * 1024
_MAX_BODY: Final = 64 * 1024


class Stats:
    """Counts per client_id."""

    def __init__(self) -> None:
        self.tokens: defaultdict[str, int] = defaultdict(int)
        self.pkce: defaultdict[str, int] = defaultdict(int)
        self.profiles: defaultdict[str, int] = defaultdict(int)
        self.api: defaultdict[str, int] = defaultdict(int)
        self.issued = 0

    def as_json(self) -> bytes:
        clients = set(self.tokens) | set(self.profiles) | set(self.api)
        return json.dumps(
            {
                client: {
                    "token_requests": self.tokens[client],
                    "pkce_token_requests": self.pkce[client],
                    "profile_requests": self.profiles[client],
                    "api_requests": self.api[client],
                }
                for client in sorted(clients)
            }
        ).encode()


def _basic_client_id(authorization: str) -> str:
    """The client_id of an HTTP Basic ``Authorization`` header (RFC 6749 2.3.1), or ``""``."""
    if not authorization.startswith("Basic "):
        return ""
    try:
        pair = base64.b64decode(authorization[6:]).decode("utf-8")
    except ValueError:
        return ""
    return unquote_plus(pair.partition(":")[0])


def _bearer_client_id(authorization: str) -> str | None:
    """The client_id named by a bearer token this server issued (``at.<client_id>.<n>``)."""
    if not authorization.startswith("Bearer at."):
        return None
    client_id, _, serial = authorization[len("Bearer at.") :].rpartition(".")
    return client_id if client_id and serial.isdigit() else None


def _response(status: str, body: bytes, *, close: bool) -> bytes:
    head = (
        f"HTTP/1.1 {status}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Cache-Control: no-store\r\n"
        f"Connection: {'close' if close else 'keep-alive'}\r\n\r\n"
    )
    return head.encode("latin-1") + body


class ProviderProtocol(asyncio.Protocol):
    """One connection: parses pipelined HTTP/1.1 requests from a buffer."""

    def __init__(self, stats: Stats) -> None:
        self.stats = stats
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while self.transport is not None:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buffer) > _MAX_HEAD:
                    self._send(_response("431 Too Large", b"{}", close=True), close=True)
                return
            head = self.buffer[:end].decode("latin-1")
            lines = head.split("\r\n")
            parts = lines[0].split(" ")
            headers: dict[str, str] = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "0") or 0)
            if length > _MAX_BODY or len(parts) != 3:
                self._send(_response("400 Bad Request", b"{}", close=True), close=True)
                return
            if len(self.buffer) < end + 4 + length:
                return
            body = self.buffer[end + 4 : end + 4 + length]
            self.buffer = self.buffer[end + 4 + length :]
            close = headers.get("connection", "").lower() == "close" or parts[2] == "HTTP/1.0"
            self._send(self.handle(parts[0], parts[1], headers, body, close), close=close)

    def _send(self, data: bytes, *, close: bool) -> None:
        assert self.transport is not None
        self.transport.write(data)
        if close:
            self.transport.close()
            self.transport = None

    def handle(
        self, method: str, target: str, headers: dict[str, str], body: bytes, close: bool
    ) -> bytes:
        path = target.split("?", 1)[0]
        stats = self.stats
        if method == "POST" and path == "/token":
            form = dict(parse_qsl(body.decode("utf-8")))
            client_id = form.get("client_id", "")
            if not client_id:
                client_id = _basic_client_id(headers.get("authorization", ""))
            if form.get("grant_type") != "authorization_code" or not form.get("code"):
                return _response("400 Bad Request", b'{"error":"invalid_request"}', close=close)
            stats.tokens[client_id] += 1
            if form.get("code_verifier"):
                stats.pkce[client_id] += 1
            stats.issued += 1
            token = json.dumps(
                {
                    "access_token": f"at.{client_id}.{stats.issued}",
                    "token_type": "Bearer",
                    "expires_in": 3600,
                }
            ).encode()
            return _response("200 OK", token, close=close)
        if method == "GET" and path == "/userinfo":
            bearer = _bearer_client_id(headers.get("authorization", ""))
            if bearer is None:
                return _response("401 Unauthorized", b'{"error":"invalid_token"}', close=close)
            stats.profiles[bearer] += 1
            return _response("200 OK", PROFILE, close=close)
        if method == "GET" and path == "/api/me":
            bearer = _bearer_client_id(headers.get("authorization", ""))
            if bearer is None:
                return _response("401 Unauthorized", b'{"error":"invalid_token"}', close=close)
            stats.api[bearer] += 1
            answer = json.dumps({"sub": SUB, "client": bearer}).encode()
            return _response("200 OK", answer, close=close)
        if method == "GET" and path == "/stats":
            return _response("200 OK", stats.as_json(), close=close)
        return _response("404 Not Found", b'{"error":"not_found"}', close=close)


async def serve() -> None:
    """Serve on a free loopback port until stdin closes or SIGTERM."""
    loop = asyncio.get_running_loop()
    stats = Stats()
    server = await loop.create_server(
        lambda: ProviderProtocol(stats), "127.0.0.1", 0, backlog=1024, reuse_address=True
    )
    port = server.sockets[0].getsockname()[1]
    sys.stdout.write(f"PORT {port}\n")
    sys.stdout.flush()
    stop = loop.create_future()

    def finish() -> None:
        if not stop.done():
            stop.set_result(None)

    loop.add_signal_handler(signal.SIGTERM, finish)
    loop.add_signal_handler(signal.SIGINT, finish)
    stdin = sys.stdin.fileno()
    loop.add_reader(stdin, lambda: None if os.read(stdin, 1) else finish())
    async with server:
        await stop


if __name__ == "__main__":
    asyncio.run(serve())
