"""A real local HTTP(S) server that misbehaves on demand, for testing HTTP clients.

Raw sockets and one thread per connection; listens on 127.0.0.1 only. Each path
gets a :class:`Behaviour` (a normal answer or a fault); every request is
recorded. Importable both as ``tests.fault_server`` and as ``fault_server``.

Example::

    with FaultServer() as server:
        server.set("/token", Behaviour.json({"access_token": "x"}))
        requests.post(server.url + "/token", timeout=2)
        assert server.count("/token") == 1
"""

from __future__ import annotations

import contextlib
import datetime
import http
import ipaddress
import json
import socket
import ssl
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

__all__ = [
    "DNS_FAILURE_URL",
    "Behaviour",
    "FaultServer",
    "Headers",
    "RecordedRequest",
    "refused_url",
]

#: A URL whose host can never resolve (RFC 2606 ``.invalid``); fails fast offline.
DNS_FAILURE_URL = "http://does-not-exist.invalid/token"

_HOST = "127.0.0.1"
_MAX_HEAD = 64 * 1024
_MAX_REQUEST_BODY = 16 * 1024 * 1024
_IO_CHUNK = 64 * 1024
_STOP_BUDGET = 0.9  # seconds stop() may spend joining threads
_THREAD_PREFIX = "fault-server"


class _Gone(Exception):
    """The client went away or the server is stopping: unwind quietly."""


class _BadRequest(Exception):
    """The client sent something that is not a parseable HTTP/1.x request."""


class Headers(Mapping[str, str]):
    """Read-only header mapping with case-insensitive lookup; keeps original names."""

    def __init__(self, items: Iterable[tuple[str, str]] = ()) -> None:
        """Build from ``(name, value)`` pairs; repeated names are joined with ", "."""
        self._items: dict[str, tuple[str, str]] = {}
        for name, value in items:
            key = name.lower()
            if key in self._items:
                first_name, old = self._items[key]
                self._items[key] = (first_name, f"{old}, {value}")
            else:
                self._items[key] = (name, value)

    def __getitem__(self, name: str) -> str:
        """Return the value for ``name``, ignoring case."""
        return self._items[name.lower()][1]

    def __contains__(self, name: object) -> bool:
        """Case-insensitive membership test."""
        return isinstance(name, str) and name.lower() in self._items

    def __iter__(self) -> Iterator[str]:
        """Iterate over header names as the client spelled them."""
        return (name for name, _ in self._items.values())

    def __len__(self) -> int:
        """Number of distinct header names."""
        return len(self._items)

    def __repr__(self) -> str:
        """Show as a plain dict."""
        return f"Headers({dict(self.items())!r})"


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: Headers
    body: bytes
    target: str  # raw request-target, e.g. "/token?x=1"
    version: str  # e.g. "HTTP/1.1"
    connection: int  # 1-based id of the TCP connection that carried it

    def json(self) -> Any:
        """Decode the body as JSON."""
        return json.loads(self.body)

    def form(self) -> dict[str, list[str]]:
        """Decode the body as application/x-www-form-urlencoded."""
        return parse_qs(self.body.decode("utf-8"), keep_blank_values=True)


class _Connection:
    """A client socket plus a read buffer; safe to abort from another thread."""

    def __init__(self, sock: socket.socket, ident: int, stop: threading.Event) -> None:
        self.sock = sock
        self.ident = ident
        self._stop = stop
        self._buf = bytearray()
        self._lock = threading.Lock()
        self._aborted = False

    def upgrade(self, context: ssl.SSLContext) -> None:
        """Wrap the socket in server-side TLS and run the handshake."""
        with self._lock:
            if self._aborted:
                raise _Gone
            tls = context.wrap_socket(self.sock, server_side=True, do_handshake_on_connect=False)
            self.sock = tls
        tls.do_handshake()

    def abort(self) -> None:
        """Shut the socket down so a thread blocked on it wakes up (fd stays open)."""
        with self._lock:
            self._aborted = True
            # Base-class shutdown: SSLSocket.shutdown would drop its SSL object.
            with contextlib.suppress(OSError):
                socket.socket.shutdown(self.sock, socket.SHUT_RDWR)

    def close(self) -> None:
        """Close the socket (idempotent)."""
        with self._lock, contextlib.suppress(OSError):
            self.sock.close()

    def reset(self) -> None:
        """Close with SO_LINGER 0 so the peer gets a TCP RST."""
        with self._lock:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.sock.close()

    def _recv(self) -> bytes:
        if self._stop.is_set():
            raise _Gone
        return self.sock.recv(_IO_CHUNK)

    def read_until(self, marker: bytes, limit: int) -> bytes | None:
        """Read up to ``marker`` (consumed, not returned); None on clean EOF."""
        while True:
            index = self._buf.find(marker)
            if index >= 0:
                out = bytes(self._buf[:index])
                del self._buf[: index + len(marker)]
                return out
            if len(self._buf) > limit:
                raise _BadRequest("line or header block too long")
            data = self._recv()
            if not data:
                if self._buf:
                    raise _Gone
                return None
            self._buf += data

    def read_exact(self, size: int) -> bytes:
        """Read exactly ``size`` bytes."""
        while len(self._buf) < size:
            data = self._recv()
            if not data:
                raise _Gone
            self._buf += data
        out = bytes(self._buf[:size])
        del self._buf[:size]
        return out

    def send(self, data: bytes) -> None:
        """Send all of ``data`` unless the server is stopping."""
        if self._stop.is_set():
            raise _Gone
        self.sock.sendall(data)

    def sleep(self, seconds: float) -> None:
        """Sleep, but give up at once when the server stops."""
        if self._stop.wait(seconds):
            raise _Gone

    def wait_for_close(self) -> None:
        """Never answer: discard input until the client leaves or the server stops."""
        self._buf.clear()
        while self._recv():
            pass


@dataclass
class _Exchange:
    """One request being answered on a connection."""

    conn: _Connection
    request: RecordedRequest
    keep_alive: bool

    def head(
        self, status: int, headers: Sequence[tuple[str, str]], *, close: bool = False
    ) -> bytes:
        """Serialise a status line and headers; adds Connection: close if needed."""
        try:
            reason = http.HTTPStatus(status).phrase
        except ValueError:
            reason = "Unknown"
        lines = [f"HTTP/1.1 {status} {reason}", "Server: fault-server"]
        lines += [f"{name}: {value}" for name, value in headers]
        if close or not self.keep_alive:
            self.keep_alive = False
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


_Handler = Callable[[_Exchange], bool]  # returns True to keep the connection alive


def _filler(size: int, content_type: str) -> Iterator[bytes]:
    """Yield exactly ``size`` bytes lazily; a JSON string document if JSON fits."""
    prefix, suffix = b'{"padding": "', b'"}'
    block = b"x" * _IO_CHUNK
    if "json" not in content_type or size < len(prefix) + len(suffix):
        prefix, suffix = b"", b""
    remaining = size - len(prefix) - len(suffix)
    if prefix:
        yield prefix
    while remaining > 0:
        piece = block[: min(remaining, len(block))]
        remaining -= len(piece)
        yield piece
    if suffix:
        yield suffix


def _chunk(data: bytes) -> bytes:
    """Frame ``data`` as one HTTP/1.1 chunk."""
    return b"%x\r\n" % len(data) + data + b"\r\n"


def _no_body(status: int, method: str) -> bool:
    return method == "HEAD" or status in (204, 304) or 100 <= status < 200


class Behaviour:
    """How the server answers a path. Build one with the static constructors."""

    __slots__ = ("_handler", "name")

    def __init__(self, name: str, handler: _Handler) -> None:
        """Wrap ``handler``; prefer the named constructors."""
        self.name = name
        self._handler = handler

    def __repr__(self) -> str:
        """Show the constructor that built it."""
        return f"<Behaviour {self.name}>"

    def serve(self, exchange: _Exchange) -> bool:
        """Answer one request; return True to keep the connection open."""
        return self._handler(exchange)

    # -- normal answers -------------------------------------------------------

    @staticmethod
    def respond(
        status: int = 200,
        body: bytes | str = b"",
        headers: Mapping[str, str] | None = None,
        content_type: str | None = "application/json",
    ) -> Behaviour:
        """A complete response with Content-Length (keep-alive friendly)."""
        data = body.encode("utf-8") if isinstance(body, str) else bytes(body)
        extra = list((headers or {}).items())
        has_type = any(name.lower() == "content-type" for name, _ in extra)

        def handler(ex: _Exchange) -> bool:
            fields: list[tuple[str, str]] = []
            if content_type is not None and not has_type:
                fields.append(("Content-Type", content_type))
            fields += extra
            if _no_body(status, ex.request.method):
                if ex.request.method == "HEAD":
                    fields.append(("Content-Length", str(len(data))))
                ex.conn.send(ex.head(status, fields))
            else:
                fields.append(("Content-Length", str(len(data))))
                ex.conn.send(ex.head(status, fields) + data)
            return ex.keep_alive

        return Behaviour(f"respond({status})", handler)

    @staticmethod
    def json(data: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Behaviour:
        """A JSON response."""
        body = json.dumps(data).encode("utf-8")
        return Behaviour.respond(status, body, headers, "application/json")

    @staticmethod
    def form(
        data: Mapping[str, str] | Sequence[tuple[str, str]],
        status: int = 200,
        headers: Mapping[str, str] | None = None,
    ) -> Behaviour:
        """An application/x-www-form-urlencoded response (GitHub-style tokens)."""
        body = urlencode(data).encode("ascii")
        ctype = "application/x-www-form-urlencoded"
        return Behaviour.respond(status, body, headers, ctype)

    @staticmethod
    def html(text: str, status: int = 200, headers: Mapping[str, str] | None = None) -> Behaviour:
        """An HTML response."""
        return Behaviour.respond(status, text, headers, "text/html; charset=utf-8")

    @staticmethod
    def text(text: str, status: int = 200, headers: Mapping[str, str] | None = None) -> Behaviour:
        """A plain-text response."""
        return Behaviour.respond(status, text, headers, "text/plain; charset=utf-8")

    @staticmethod
    def not_found() -> Behaviour:
        """The default for unknown paths: 404 with a JSON error body."""

        def handler(ex: _Exchange) -> bool:
            body = {"error": "not_found", "path": ex.request.path}
            return Behaviour.json(body, status=404).serve(ex)

        return Behaviour("not_found", handler)

    # -- faults ---------------------------------------------------------------

    @staticmethod
    def hang() -> Behaviour:
        """Read the request, never answer (until the client leaves or stop)."""

        def handler(ex: _Exchange) -> bool:
            ex.conn.wait_for_close()
            return False

        return Behaviour("hang", handler)

    @staticmethod
    def drip(
        body: bytes,
        interval: float,
        chunk: int = 1,
        status: int = 200,
        content_type: str = "application/json",
    ) -> Behaviour:
        """Headers at once (with Content-Length), then ``chunk`` bytes per interval."""
        if chunk < 1:
            raise ValueError("chunk must be >= 1")
        data = bytes(body)

        def handler(ex: _Exchange) -> bool:
            fields = [("Content-Type", content_type), ("Content-Length", str(len(data)))]
            ex.conn.send(ex.head(status, fields))
            for start in range(0, len(data), chunk):
                ex.conn.sleep(interval)
                ex.conn.send(data[start : start + chunk])
            return ex.keep_alive

        return Behaviour(f"drip({len(data)}B/{interval}s)", handler)

    @staticmethod
    def delayed(seconds: float, then: Behaviour) -> Behaviour:
        """Wait ``seconds`` before answering with ``then`` (slow but well-formed)."""

        def handler(ex: _Exchange) -> bool:
            ex.conn.sleep(seconds)
            return then.serve(ex)

        return Behaviour(f"delayed({seconds}, {then.name})", handler)

    @staticmethod
    def reset_mid_body(total_length: int = 10000, sent: int = 100) -> Behaviour:
        """Promise ``total_length`` bytes, send ``sent``, then RST (SO_LINGER 0)."""
        if not 0 <= sent <= total_length:
            raise ValueError("need 0 <= sent <= total_length")

        def handler(ex: _Exchange) -> bool:
            fields = [
                ("Content-Type", "application/json"),
                ("Content-Length", str(total_length)),
            ]
            partial = bytearray()
            for piece in _filler(total_length, "application/json"):
                partial += piece[: sent - len(partial)]
                if len(partial) >= sent:
                    break
            ex.conn.send(ex.head(200, fields, close=True) + bytes(partial))
            ex.conn.sleep(0.02)  # let the partial response reach the client first
            ex.conn.reset()
            return False

        return Behaviour(f"reset_mid_body({total_length}, {sent})", handler)

    @staticmethod
    def truncated_json(body: bytes = b'{"access_token": "ab', status: int = 200) -> Behaviour:
        """Well-framed response (Content-Length matches) whose JSON is cut off."""
        return Behaviour.respond(status, body, None, "application/json")

    @staticmethod
    def huge(
        size: int = 50 * 1024 * 1024,
        content_type: str = "application/json",
        chunked: bool = False,
    ) -> Behaviour:
        """A ``size``-byte body generated lazily (Content-Length or chunked)."""

        def handler(ex: _Exchange) -> bool:
            fields = [("Content-Type", content_type)]
            if chunked:
                fields.append(("Transfer-Encoding", "chunked"))
            else:
                fields.append(("Content-Length", str(size)))
            ex.conn.send(ex.head(200, fields))
            for piece in _filler(size, content_type):
                ex.conn.send(_chunk(piece) if chunked else piece)
            if chunked:
                ex.conn.send(b"0\r\n\r\n")
            return ex.keep_alive

        return Behaviour(f"huge({size}, chunked={chunked})", handler)

    @staticmethod
    def endless_chunked(
        content_type: str = "application/json",
        chunk_size: int = 16 * 1024,
        interval: float = 0.0,
    ) -> Behaviour:
        """Chunked body that never ends (until the client leaves or stop)."""
        frame = _chunk(b"x" * chunk_size)

        def handler(ex: _Exchange) -> bool:
            fields = [("Content-Type", content_type), ("Transfer-Encoding", "chunked")]
            ex.conn.send(ex.head(200, fields, close=True) + _chunk(b'{"padding": "'))
            while True:
                ex.conn.send(frame)
                if interval:
                    ex.conn.sleep(interval)

        return Behaviour("endless_chunked", handler)

    @staticmethod
    def close_without_response() -> Behaviour:
        """Read the request, then close the socket (FIN) without a byte."""
        return Behaviour("close_without_response", lambda ex: False)

    # -- combinators ----------------------------------------------------------

    @staticmethod
    def sequence(*behaviours: Behaviour) -> Behaviour:
        """One behaviour per request, in order; the last repeats forever."""
        if not behaviours:
            raise ValueError("sequence() needs at least one behaviour")
        lock = threading.Lock()
        calls = [0]

        def handler(ex: _Exchange) -> bool:
            with lock:
                index = min(calls[0], len(behaviours) - 1)
                calls[0] += 1
            return behaviours[index].serve(ex)

        names = ", ".join(b.name for b in behaviours)
        return Behaviour(f"sequence({names})", handler)

    @staticmethod
    def dynamic(choose: Callable[[RecordedRequest], Behaviour]) -> Behaviour:
        """Pick the behaviour per request (e.g. echo a ``state`` parameter)."""
        return Behaviour("dynamic", lambda ex: choose(ex.request).serve(ex))


def _self_signed_cert(directory: Path) -> tuple[Path, Path]:
    """Write a throwaway self-signed cert/key for 127.0.0.1 and localhost."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fault-server")])
    now = datetime.datetime.now(datetime.UTC)
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    san = x509.SubjectAlternativeName(
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address(_HOST))]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(san, critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(ski, critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


class FaultServer:
    """Threaded HTTP/1.1 server on 127.0.0.1 with per-path :class:`Behaviour`."""

    def __init__(self, *, tls: bool = False) -> None:
        """Create (not start); ``tls=True`` serves HTTPS with a self-signed cert."""
        self.tls = tls
        self._lock = threading.Condition()
        self._routes: dict[str, Behaviour] = {}
        self._records: list[RecordedRequest] = []
        self._conns: set[_Connection] = set()
        self._threads: list[threading.Thread] = []
        self._errors: list[BaseException] = []
        self._accepted = 0
        self._stop = threading.Event()
        self._listener: socket.socket | None = None
        self._accept_thread: threading.Thread | None = None
        self._context: ssl.SSLContext | None = None
        self._tmpdir: tempfile.TemporaryDirectory[str] | None = None
        self._cert_file: Path | None = None
        self._port = 0

    # -- lifecycle ------------------------------------------------------------

    def start(self) -> FaultServer:
        """Bind a free port on 127.0.0.1 and start accepting."""
        if self._listener is not None or self._stop.is_set():
            raise RuntimeError("FaultServer can only be started once")
        if self.tls:
            self._tmpdir = tempfile.TemporaryDirectory(prefix="fault-server-")
            cert, key = _self_signed_cert(Path(self._tmpdir.name))
            self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self._context.load_cert_chain(cert, key)
            self._cert_file = cert
        listener = socket.create_server((_HOST, 0), backlog=128)
        listener.settimeout(0.05)
        self._listener = listener
        self._port = listener.getsockname()[1]
        self._accept_thread = threading.Thread(
            target=self._accept_loop,
            name=f"{_THREAD_PREFIX}-accept-{self._port}",
            daemon=True,
        )
        self._accept_thread.start()
        return self

    def stop(self) -> None:
        """Close the listener and every client socket; join threads (< 1 s)."""
        listener = self._listener
        if listener is None or self._stop.is_set():
            return
        deadline = time.monotonic() + _STOP_BUDGET
        self._stop.set()
        if self._accept_thread is not None:
            self._accept_thread.join(timeout=_STOP_BUDGET / 3)
        listener.close()
        with self._lock:
            conns, threads = list(self._conns), list(self._threads)
        for conn in conns:
            conn.abort()
        for thread in threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        with self._lock:
            leftovers = list(self._conns)
            self._threads = [t for t in self._threads if t.is_alive()]
        for conn in leftovers:
            conn.close()
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None

    def __enter__(self) -> FaultServer:
        """Start the server."""
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        """Stop the server."""
        self.stop()

    # -- configuration and inspection -----------------------------------------

    @property
    def port(self) -> int:
        """The bound port (0 before start)."""
        return self._port

    @property
    def url(self) -> str:
        """Base URL without trailing slash, e.g. ``http://127.0.0.1:PORT``."""
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{_HOST}:{self._port}"

    @property
    def cert_file(self) -> str:
        """PEM of the self-signed cert (TLS only): pass as ``verify=`` to trust it."""
        if self._cert_file is None:
            raise RuntimeError("cert_file needs FaultServer(tls=True), started")
        return str(self._cert_file)

    def set(self, path: str, behaviour: Behaviour) -> None:
        """Answer requests for ``path`` (query string ignored) with ``behaviour``."""
        if not path.startswith("/"):
            raise ValueError(f"path must start with '/': {path!r}")
        with self._lock:
            self._routes[path] = behaviour

    def unset(self, path: str) -> None:
        """Forget ``path`` (it answers 404 again)."""
        with self._lock:
            self._routes.pop(path, None)

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received, in arrival order."""
        with self._lock:
            return list(self._records)

    def count(self, path: str | None = None) -> int:
        """Number of requests received for ``path`` (all paths if None)."""
        with self._lock:
            return sum(1 for r in self._records if path is None or r.path == path)

    def clear(self) -> None:
        """Forget recorded requests (behaviours stay)."""
        with self._lock:
            self._records.clear()

    def wait_for_requests(self, n: int, path: str | None = None, timeout: float = 2.0) -> bool:
        """Block until ``count(path) >= n``; False on timeout."""
        with self._lock:
            return self._lock.wait_for(
                lambda: sum(1 for r in self._records if path in (None, r.path)) >= n,
                timeout,
            )

    @property
    def connections_accepted(self) -> int:
        """How many TCP connections were accepted so far."""
        with self._lock:
            return self._accepted

    @property
    def open_connections(self) -> int:
        """How many client connections are currently being served."""
        with self._lock:
            return len(self._conns)

    @property
    def errors(self) -> list[BaseException]:
        """Unexpected server-side exceptions (bugs); client disconnects are not here."""
        with self._lock:
            return list(self._errors)

    # -- internals --------------------------------------------------------------

    def _accept_loop(self) -> None:
        listener = self._listener
        assert listener is not None
        while not self._stop.is_set():
            try:
                sock, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                time.sleep(0.01)  # e.g. EMFILE: back off, keep serving
                continue
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                if self._stop.is_set():
                    sock.close()
                    return
                self._accepted += 1
                conn = _Connection(sock, self._accepted, self._stop)
                self._conns.add(conn)
                thread = threading.Thread(
                    target=self._serve_connection,
                    args=(conn,),
                    name=f"{_THREAD_PREFIX}-conn-{self._port}-{conn.ident}",
                    daemon=True,
                )
                self._threads = [t for t in self._threads if t.is_alive()]
                self._threads.append(thread)
            thread.start()

    def _serve_connection(self, conn: _Connection) -> None:
        # Nothing may escape this thread: pytest turns it into a failure.
        try:
            if self._context is not None:
                conn.upgrade(self._context)
            while not self._stop.is_set():
                try:
                    request = self._read_request(conn)
                except _BadRequest:
                    conn.send(
                        b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n"
                        b"Connection: close\r\n\r\n"
                    )
                    return
                if request is None:
                    return
                with self._lock:
                    self._records.append(request)
                    self._lock.notify_all()
                    behaviour = self._routes.get(request.path)
                exchange = _Exchange(conn, request, _keep_alive(request))
                if not (behaviour or _NOT_FOUND).serve(exchange):
                    return
        except (_Gone, OSError):
            pass  # client disconnect, reset, TLS failure or stop(): expected
        except Exception as exc:  # a bug in this module: keep it, don't raise
            with self._lock:
                self._errors.append(exc)
        finally:
            with self._lock:
                self._conns.discard(conn)
            conn.close()

    def _read_request(self, conn: _Connection) -> RecordedRequest | None:
        head = conn.read_until(b"\r\n\r\n", _MAX_HEAD)
        if head is None:
            return None
        request_line, *lines = head.decode("latin-1").split("\r\n")
        parts = request_line.split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise _BadRequest(request_line)
        method, target, version = parts
        fields: list[tuple[str, str]] = []
        for line in lines:
            name, sep, value = line.partition(":")
            if not sep or not name.strip():
                raise _BadRequest(line)
            fields.append((name.strip(), value.strip()))
        headers = Headers(fields)
        if "100-continue" in headers.get("Expect", "").lower():
            conn.send(b"HTTP/1.1 100 Continue\r\n\r\n")
        if "chunked" in headers.get("Transfer-Encoding", "").lower():
            body = _read_chunked(conn)
        elif "Content-Length" in headers:
            try:
                length = int(headers["Content-Length"])
            except ValueError:
                raise _BadRequest("bad Content-Length") from None
            if not 0 <= length <= _MAX_REQUEST_BODY:
                raise _BadRequest("bad Content-Length")
            body = conn.read_exact(length)
        else:
            body = b""
        split = urlsplit(target)
        return RecordedRequest(
            method=method,
            path=split.path or "/",
            query=parse_qs(split.query, keep_blank_values=True),
            headers=headers,
            body=body,
            target=target,
            version=version,
            connection=conn.ident,
        )


_NOT_FOUND = Behaviour.not_found()


def _keep_alive(request: RecordedRequest) -> bool:
    tokens = {t.strip().lower() for t in request.headers.get("Connection", "").split(",")}
    if request.version == "HTTP/1.0":
        return False
    return "close" not in tokens


def _read_chunked(conn: _Connection) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        line = conn.read_until(b"\r\n", 1024)
        if line is None:
            raise _Gone
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise _BadRequest("bad chunk size") from None
        if size == 0:
            while conn.read_until(b"\r\n", _MAX_HEAD):  # trailers until blank line
                pass
            return b"".join(parts)
        total += size
        if total > _MAX_REQUEST_BODY:
            raise _BadRequest("request body too large")
        parts.append(conn.read_exact(size))
        conn.read_exact(2)


def refused_url(path: str = "") -> str:
    """An ``http://127.0.0.1:PORT`` URL (plus ``path``) where nothing listens."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((_HOST, 0))
        port = probe.getsockname()[1]
    return f"http://{_HOST}:{port}{path}"
