"""A tiny HTTP/1.1 keep-alive token + userinfo + API + PAR server for the benchmarks, on loopback.

It runs in its own process (``python -m benchmarks.provider_server``), so that it never competes
with the measured process for the GIL, and answers every contender the same way:

- ``POST /token``: a form with ``grant_type=authorization_code`` and a ``code`` is answered with
  a JSON bearer token; the token names the ``client_id`` so that the profile request can be
  counted per contender. Anything else is a 400 ``invalid_request``.
- ``GET /userinfo`` with ``Authorization: Bearer <token>`` (or a DPoP-bound token, below): a
  JSON OpenID Connect profile.
- ``GET /api/me`` with ``Authorization: Bearer <token>`` (or a DPoP-bound token): a small
  protected API answer, JSON
  ``{"sub": ..., "client": <client_id of the token>}``, so that the caller can check that its
  own token was sent.
- ``POST /par``: a pushed authorization request (RFC 9126): a form with ``response_type=code``,
  ``redirect_uri``, ``state`` and an S256 ``code_challenge``, client-authenticated with
  :data:`CLIENT_SECRET` (in the form, ``client_secret_post``, or HTTP Basic) is answered 201
  with ``{"request_uri": "urn:ietf:params:oauth:request_uri:<random>", "expires_in": 60}``;
  anything else is a 400 ``invalid_request`` (401 ``invalid_client`` for the client's
  authentication).
- ``GET /stats``: per ``client_id``: token requests, token requests that carried a PKCE
  ``code_verifier``, profile requests and API requests; DPoP requests (token, profile and API
  requests whose proof passed) and proofs whose signature was verified; pushed authorization
  requests answered.

DPoP (RFC 9449): a token request with a ``DPoP`` proof is answered with a ``token_type`` DPoP
token bound to the proof's key (its RFC 7638 thumbprint). ``/userinfo`` and ``/api/me`` then
accept that token only as ``Authorization: DPoP <token>`` with a proof of its key: ``typ``,
``alg`` ES256, ``htm``, ``htu`` (this server's address of the request, without query), ``iat``
within five minutes, a ``jti`` never seen before and ``ath`` (the token's hash) are checked on
every proof, and the key's thumbprint against the token's; the signature is verified with the
proof's embedded key on the first :data:`VERIFY_FIRST` proofs of each client and on every
:data:`VERIFY_EVERY`-th after (one ES256 verification costs more than the call it guards, and
this process must not become the bottleneck of the measured one). A bound token presented as
a bearer token, or a proof that fails a check, is a 401.

Connections are kept alive unless the client asks to close. The first line on stdout is
``PORT <n>``; the server stops when stdin is closed or on SIGTERM.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import secrets
import signal
import sys
import time
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
#: The client secret of every contender, checked by the PAR endpoint.
CLIENT_SECRET: Final = "bench-client-secret"
#: The prefix of the ``request_uri`` the PAR endpoint answers (RFC 9126 2.2).
REQUEST_URI_PREFIX: Final = "urn:ietf:params:oauth:request_uri:"
_MAX_HEAD: Final = 16 * 1024
_MAX_BODY: Final = 64 * 1024
#: DPoP proofs of each client whose signature is verified before sampling starts.
VERIFY_FIRST: Final = 32
#: After those, one proof in this many has its signature verified.
VERIFY_EVERY: Final = 8
#: How far a proof's ``iat`` may be from this server's clock, in seconds.
_PROOF_WINDOW: Final = 300


class Stats:
    """Counts per client_id."""

    def __init__(self) -> None:
        self.tokens: defaultdict[str, int] = defaultdict(int)
        self.pkce: defaultdict[str, int] = defaultdict(int)
        self.profiles: defaultdict[str, int] = defaultdict(int)
        self.api: defaultdict[str, int] = defaultdict(int)
        self.dpop: defaultdict[str, int] = defaultdict(int)
        self.verified: defaultdict[str, int] = defaultdict(int)
        self.pushed: defaultdict[str, int] = defaultdict(int)
        self.issued = 0
        #: DPoP-bound access tokens: token -> the JWK thumbprint of its key.
        self.bound: dict[str, str] = {}
        self.jtis: set[str] = set()

    def as_json(self) -> bytes:
        clients = set(self.tokens) | set(self.profiles) | set(self.api)
        clients |= set(self.dpop) | set(self.pushed)
        return json.dumps(
            {
                client: {
                    "token_requests": self.tokens[client],
                    "pkce_token_requests": self.pkce[client],
                    "profile_requests": self.profiles[client],
                    "api_requests": self.api[client],
                    "dpop_requests": self.dpop[client],
                    "dpop_signatures_verified": self.verified[client],
                    "par_requests": self.pushed[client],
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


def _authenticated_client(form: dict[str, str], authorization: str) -> str | None:
    """The client_id of a request authenticated with :data:`CLIENT_SECRET`, in the form
    (``client_secret_post``) or HTTP Basic (RFC 6749 2.3.1); ``None`` for anything else."""
    if authorization.startswith("Basic "):
        try:
            pair = base64.b64decode(authorization[6:]).decode("utf-8")
        except ValueError:
            return None
        client_id, _, secret = pair.partition(":")
        client_id, secret = unquote_plus(client_id), unquote_plus(secret)
    else:
        client_id, secret = form.get("client_id", ""), form.get("client_secret", "")
    if not client_id or form.get("client_id", client_id) != client_id:
        return None
    return client_id if secrets.compare_digest(secret, CLIENT_SECRET) else None


def pushed_request(stats: Stats, form: dict[str, str], authorization: str) -> tuple[str, bytes]:
    """The status and JSON answer of a pushed authorization request (RFC 9126 2.1, 2.2);
    counts the pushes answered."""
    client_id = _authenticated_client(form, authorization)
    if client_id is None:
        return "401 Unauthorized", b'{"error":"invalid_client"}'
    if (
        form.get("response_type") != "code"
        or not form.get("redirect_uri")
        or not form.get("state")
        or not form.get("code_challenge")
        or form.get("code_challenge_method") != "S256"
        or "request_uri" in form
    ):
        return "400 Bad Request", b'{"error":"invalid_request"}'
    stats.pushed[client_id] += 1
    request_uri = REQUEST_URI_PREFIX + secrets.token_urlsafe(24)
    return "201 Created", json.dumps({"request_uri": request_uri, "expires_in": 60}).encode()


def _bearer_client_id(authorization: str) -> str | None:
    """The client_id named by a bearer token this server issued (``at.<client_id>.<n>``)."""
    if not authorization.startswith("Bearer at."):
        return None
    client_id, _, serial = authorization[len("Bearer at.") :].rpartition(".")
    return client_id if client_id and serial.isdigit() else None


def _b64json(segment: str) -> dict[str, object]:
    value = json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value


def _b64sha256(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")


def _public_ec_jwk(jwk: object) -> dict[str, str]:
    """The members of a public EC JWK that its RFC 7638 thumbprint covers."""
    if not isinstance(jwk, dict) or jwk.get("kty") != "EC":
        raise ValueError("not an EC JWK")
    return {name: str(jwk[name]) for name in ("crv", "kty", "x", "y")}


def _thumbprint(members: dict[str, str]) -> str:
    return _b64sha256(json.dumps(members, separators=(",", ":"), sort_keys=True).encode())


def check_proof(
    stats: Stats,
    client_id: str,
    proof: str,
    method: str,
    url: str,
    access_token: str | None,
) -> str | None:
    """The JWK thumbprint of a DPoP proof that passes the checks (see the module docstring),
    or ``None``; counts it, and its verified signature."""
    try:
        header_segment, payload_segment, _ = proof.split(".")
        header = _b64json(header_segment)
        claims = _b64json(payload_segment)
        jwk = _public_ec_jwk(header.get("jwk"))
        jkt = _thumbprint(jwk)
    except (ValueError, KeyError, TypeError):
        return None
    iat = claims.get("iat")
    jti = claims.get("jti")
    if (
        header.get("typ") != "dpop+jwt"
        or header.get("alg") != "ES256"
        or claims.get("htm") != method
        or claims.get("htu") != url
        or not isinstance(iat, int)
        or abs(time.time() - iat) > _PROOF_WINDOW
        or not isinstance(jti, str)
        or not jti
        or jti in stats.jtis
        or claims.get("ath")
        != (None if access_token is None else _b64sha256(access_token.encode("ascii")))
    ):
        return None
    count = stats.dpop[client_id]
    if count < VERIFY_FIRST or count % VERIFY_EVERY == 0:
        from joserfc import jws
        from joserfc.errors import JoseError
        from joserfc.jwk import ECKey

        try:
            public: dict[str, str | list[str]] = dict(jwk)
            jws.deserialize_compact(proof, ECKey.import_key(public), algorithms=["ES256"])
        except (JoseError, ValueError, TypeError):
            return None
        stats.verified[client_id] += 1
    stats.jtis.add(jti)
    stats.dpop[client_id] = count + 1
    return jkt


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
            access_token = f"at.{client_id}.{stats.issued}"
            token_type = "Bearer"
            if "dpop" in headers:
                url = f"http://{headers.get('host', '')}{path}"
                jkt = check_proof(stats, client_id, headers["dpop"], "POST", url, None)
                if jkt is None:
                    return _response(
                        "400 Bad Request", b'{"error":"invalid_dpop_proof"}', close=close
                    )
                stats.bound[access_token] = jkt
                token_type = "DPoP"
            token = json.dumps(
                {"access_token": access_token, "token_type": token_type, "expires_in": 3600}
            ).encode()
            return _response("200 OK", token, close=close)
        if method == "POST" and path == "/par":
            form = dict(parse_qsl(body.decode("utf-8")))
            status, answer = pushed_request(stats, form, headers.get("authorization", ""))
            return _response(status, answer, close=close)
        if method == "GET" and path == "/userinfo":
            bearer = self._authorized(method, path, headers)
            if bearer is None:
                return _response("401 Unauthorized", b'{"error":"invalid_token"}', close=close)
            stats.profiles[bearer] += 1
            return _response("200 OK", PROFILE, close=close)
        if method == "GET" and path == "/api/me":
            bearer = self._authorized(method, path, headers)
            if bearer is None:
                return _response("401 Unauthorized", b'{"error":"invalid_token"}', close=close)
            stats.api[bearer] += 1
            answer = json.dumps({"sub": SUB, "client": bearer}).encode()
            return _response("200 OK", answer, close=close)
        if method == "GET" and path == "/stats":
            return _response("200 OK", stats.as_json(), close=close)
        return _response("404 Not Found", b'{"error":"not_found"}', close=close)

    def _authorized(self, method: str, path: str, headers: dict[str, str]) -> str | None:
        """The client_id of the request's valid token: a bearer token, or a DPoP-bound token
        with a valid proof of its key; ``None`` for anything else."""
        authorization = headers.get("authorization", "")
        scheme, _, access_token = authorization.partition(" ")
        if scheme == "Bearer":
            if access_token in self.stats.bound:  # a bound token is never a bearer token
                return None
            return _bearer_client_id(authorization)
        if scheme != "DPoP" or "dpop" not in headers:
            return None
        client_id = _bearer_client_id(f"Bearer {access_token}")
        jkt = self.stats.bound.get(access_token)
        if client_id is None or jkt is None:
            return None
        url = f"http://{headers.get('host', '')}{path}"
        proven = check_proof(self.stats, client_id, headers["dpop"], method, url, access_token)
        return client_id if proven == jkt else None


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
