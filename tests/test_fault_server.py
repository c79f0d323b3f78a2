"""Each FaultServer behaviour, proven with real `requests` calls over loopback."""

from __future__ import annotations

import gc
import importlib
import itertools
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests

try:
    from fault_server import DNS_FAILURE_URL, Behaviour, FaultServer, refused_url
except ImportError:  # run without the tests/ directory on sys.path
    sys.path.insert(0, str(Path(__file__).parent))
    from fault_server import DNS_FAILURE_URL, Behaviour, FaultServer, refused_url

MiB = 1024 * 1024
TIMEOUT = (2.0, 2.0)


def _server_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("fault-server")]


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 0


def _wait(predicate: Callable[[], bool], timeout: float = 2.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return bool(predicate())


@pytest.fixture(autouse=True)
def _no_leaks() -> Iterator[None]:
    """Every test must leave no server threads and no open sockets behind."""
    fds = _open_fds()
    yield
    assert _server_threads() == []
    # After a timeout, urllib3's socket is freed by the GC (its makefile() reader sits in a
    # reference cycle with the exception), so collect before counting.
    gc.collect()
    assert _wait(lambda: _open_fds() <= fds), f"fd leak: {fds} -> {_open_fds()}"


@pytest.fixture
def server() -> Iterator[FaultServer]:
    with FaultServer() as srv:
        yield srv
        assert srv.errors == []


@pytest.fixture
def session() -> Iterator[requests.Session]:
    with requests.Session() as s:
        yield s


def _raw_request(srv: FaultServer, path: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=2)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    return sock


# -- normal answers and recording ------------------------------------------------


def test_json_and_request_recording(server: FaultServer, session: requests.Session) -> None:
    server.set("/token", Behaviour.json({"access_token": "x", "token_type": "bearer"}))
    resp = session.post(
        server.url + "/token?a=1&a=2&b=",
        data={"code": "c0de", "grant_type": "authorization_code"},
        headers={"X-Trace": "t1"},
        timeout=TIMEOUT,
    )
    assert resp.status_code == 200
    assert resp.headers["Content-Type"] == "application/json"
    assert resp.json() == {"access_token": "x", "token_type": "bearer"}

    (rec,) = server.requests
    assert (rec.method, rec.path, rec.target) == ("POST", "/token", "/token?a=1&a=2&b=")
    assert rec.query == {"a": ["1", "2"], "b": [""]}
    assert rec.headers["x-trace"] == "t1"
    assert "X-TRACE" in rec.headers
    assert rec.headers["content-type"] == "application/x-www-form-urlencoded"
    assert rec.form() == {"code": ["c0de"], "grant_type": ["authorization_code"]}
    assert rec.body == b"code=c0de&grant_type=authorization_code"
    assert server.count("/token") == 1
    assert server.count("/other") == 0
    server.clear()
    assert server.requests == []
    assert server.count() == 0


def test_unknown_path_is_404_json(server: FaultServer, session: requests.Session) -> None:
    resp = session.get(server.url + "/nope", timeout=TIMEOUT)
    assert resp.status_code == 404
    assert resp.json() == {"error": "not_found", "path": "/nope"}
    assert server.count("/nope") == 1


def test_respond_status_headers_and_content_type(
    server: FaultServer, session: requests.Session
) -> None:
    server.set(
        "/token",
        Behaviour.respond(
            status=503, body=b"busy", headers={"Retry-After": "5"}, content_type="text/plain"
        ),
    )
    resp = session.get(server.url + "/token", timeout=TIMEOUT)
    assert resp.status_code == 503
    assert resp.headers["Retry-After"] == "5"
    assert resp.headers["Content-Type"] == "text/plain"
    assert resp.content == b"busy"


def test_form_and_html(server: FaultServer, session: requests.Session) -> None:
    server.set("/form", Behaviour.form({"access_token": "x", "scope": "a b"}))
    server.set("/page", Behaviour.html("<html><p>hi</p></html>", status=201))
    resp = session.get(server.url + "/form", timeout=TIMEOUT)
    assert resp.headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert resp.text == "access_token=x&scope=a+b"
    resp = session.get(server.url + "/page", timeout=TIMEOUT)
    assert resp.status_code == 201
    assert resp.headers["Content-Type"].startswith("text/html")
    assert resp.text == "<html><p>hi</p></html>"


def test_chunked_request_body_is_recorded(server: FaultServer, session: requests.Session) -> None:
    resp = session.post(server.url + "/up", data=iter([b"ab", b"cd"]), timeout=TIMEOUT)
    assert resp.status_code == 404
    (rec,) = server.requests
    assert rec.headers["Transfer-Encoding"] == "chunked"
    assert rec.body == b"abcd"


def test_keep_alive_reuses_one_pooled_connection(
    server: FaultServer, session: requests.Session
) -> None:
    server.set("/a", Behaviour.json({"n": 1}))
    for _ in range(3):
        assert session.get(server.url + "/a", timeout=TIMEOUT).json() == {"n": 1}
    assert server.connections_accepted == 1
    assert {r.connection for r in server.requests} == {1}


def test_connection_close_is_honoured(server: FaultServer, session: requests.Session) -> None:
    server.set("/a", Behaviour.json({}))
    for _ in range(2):
        resp = session.get(server.url + "/a", headers={"Connection": "close"}, timeout=TIMEOUT)
        assert resp.headers["Connection"] == "close"
    assert server.connections_accepted == 2


def test_sequence_runs_in_order_then_repeats_last(
    server: FaultServer, session: requests.Session
) -> None:
    server.set(
        "/token",
        Behaviour.sequence(Behaviour.respond(status=503), Behaviour.json({"ok": True})),
    )
    statuses = [session.get(server.url + "/token", timeout=TIMEOUT).status_code for _ in range(4)]
    assert statuses == [503, 200, 200, 200]


def test_delayed_and_dynamic(server: FaultServer, session: requests.Session) -> None:
    server.set("/slow", Behaviour.delayed(0.2, Behaviour.json({})))
    start = time.monotonic()
    with pytest.raises(requests.ReadTimeout):
        session.get(server.url + "/slow", timeout=(1, 0.05))
    assert session.get(server.url + "/slow", timeout=TIMEOUT).status_code == 200
    assert time.monotonic() - start >= 0.2
    server.set("/echo", Behaviour.dynamic(lambda r: Behaviour.json({"state": r.query["state"]})))
    assert session.get(server.url + "/echo?state=s1", timeout=TIMEOUT).json() == {"state": ["s1"]}


# -- faults ------------------------------------------------------------------------


def test_hang_gives_read_timeout(server: FaultServer, session: requests.Session) -> None:
    server.set("/token", Behaviour.hang())
    start = time.monotonic()
    with pytest.raises(requests.ReadTimeout):
        session.post(server.url + "/token", data={"a": "b"}, timeout=(1.0, 0.3))
    assert 0.3 <= time.monotonic() - start < 0.8
    assert server.count("/token") == 1  # recorded although never answered
    assert _wait(lambda: server.open_connections == 0)  # thread ends when the client leaves


def test_drip_sends_bytes_slowly(server: FaultServer, session: requests.Session) -> None:
    body = b'{"a":1}'
    server.set("/token", Behaviour.drip(body, interval=0.08))
    start = time.monotonic()
    resp = session.get(server.url + "/token", stream=True, timeout=(1.0, 0.3))
    assert resp.headers["Content-Length"] == str(len(body))
    arrivals = []
    received = b""
    for byte in resp.iter_content(1):
        received += byte
        arrivals.append(time.monotonic() - start)
    resp.close()
    assert received == body
    assert arrivals[-1] >= 0.08 * len(body) * 0.9  # total time exceeds the read timeout
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert min(gaps) > 0.03


def test_reset_mid_body_raises(server: FaultServer, session: requests.Session) -> None:
    server.set("/token", Behaviour.reset_mid_body(total_length=10000, sent=100))
    with pytest.raises((requests.ConnectionError, requests.exceptions.ChunkedEncodingError)):
        session.get(server.url + "/token", timeout=TIMEOUT)
    resp = session.get(server.url + "/token", stream=True, timeout=TIMEOUT)
    assert resp.headers["Content-Length"] == "10000"
    with pytest.raises((requests.ConnectionError, requests.exceptions.ChunkedEncodingError)):
        resp.content  # noqa: B018
    resp.close()


def test_truncated_json(server: FaultServer, session: requests.Session) -> None:
    server.set("/token", Behaviour.truncated_json())
    resp = session.get(server.url + "/token", timeout=TIMEOUT)
    assert resp.status_code == 200
    assert resp.content == b'{"access_token": "ab'
    assert resp.headers["Content-Length"] == str(len(resp.content))
    with pytest.raises(requests.exceptions.JSONDecodeError):
        resp.json()


@pytest.mark.parametrize("chunked", [False, True])
def test_huge_streams_first_mib(
    server: FaultServer, session: requests.Session, chunked: bool
) -> None:
    server.set("/big", Behaviour.huge(chunked=chunked))
    with session.get(server.url + "/big", stream=True, timeout=TIMEOUT) as resp:
        if chunked:
            assert resp.headers["Transfer-Encoding"] == "chunked"
            assert "Content-Length" not in resp.headers
        else:
            assert resp.headers["Content-Length"] == str(50 * MiB)
        got = 0
        for piece in resp.iter_content(64 * 1024):
            got += len(piece)
            if got >= MiB:
                break
    assert got >= MiB
    assert _wait(lambda: server.open_connections == 0)


def test_huge_small_body_is_complete_json(server: FaultServer, session: requests.Session) -> None:
    server.set("/big", Behaviour.huge(size=200_000))
    resp = session.get(server.url + "/big", timeout=TIMEOUT)
    assert len(resp.content) == 200_000
    assert set(json.loads(resp.content)) == {"padding"}
    assert session.get(server.url + "/big", timeout=TIMEOUT).ok  # still keep-alive
    assert server.connections_accepted == 1


def test_endless_chunked_never_ends(server: FaultServer, session: requests.Session) -> None:
    server.set("/stream", Behaviour.endless_chunked())
    with session.get(server.url + "/stream", stream=True, timeout=TIMEOUT) as resp:
        assert resp.headers["Transfer-Encoding"] == "chunked"
        got = 0
        for piece in resp.iter_content(64 * 1024):
            got += len(piece)
            if got >= 2 * MiB:
                break
    assert got >= 2 * MiB
    assert _wait(lambda: server.open_connections == 0)  # client left; thread exits quietly


def test_close_without_response(server: FaultServer, session: requests.Session) -> None:
    server.set("/token", Behaviour.close_without_response())
    with pytest.raises(requests.ConnectionError):
        session.get(server.url + "/token", timeout=TIMEOUT)
    assert server.count("/token") == 1


def test_tls_self_signed_fails_verification() -> None:
    with FaultServer(tls=True) as srv, requests.Session() as sess:
        srv.set("/token", Behaviour.json({"access_token": "x"}))
        assert srv.url.startswith("https://127.0.0.1:")
        with pytest.raises(requests.exceptions.SSLError):
            sess.get(srv.url + "/token", timeout=TIMEOUT)
        # It is real TLS: trusting the throwaway cert makes the same call work.
        resp = sess.get(srv.url + "/token", timeout=TIMEOUT, verify=srv.cert_file)
        assert resp.json() == {"access_token": "x"}
        assert srv.errors == []


def test_refused_url_fails_fast() -> None:
    url = refused_url()
    assert url.startswith("http://127.0.0.1:")
    start = time.monotonic()
    with pytest.raises(requests.ConnectionError):
        requests.get(url + "/token", timeout=TIMEOUT)
    assert time.monotonic() - start < 1.0


def test_dns_failure_fails_fast() -> None:
    start = time.monotonic()
    with pytest.raises(requests.ConnectionError):
        requests.get(DNS_FAILURE_URL, timeout=TIMEOUT)
    assert time.monotonic() - start < 2.0


def test_malformed_request_gets_400(server: FaultServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=2) as sock:
        sock.sendall(b"NONSENSE\r\n\r\n")
        assert sock.recv(1024).startswith(b"HTTP/1.1 400 ")


# -- lifecycle -----------------------------------------------------------------------


def test_stop_is_fast_with_busy_and_hanging_handlers() -> None:
    srv = FaultServer().start()
    srv.set("/hang", Behaviour.hang())
    srv.set("/drip", Behaviour.drip(b"x" * 100, interval=10))
    srv.set("/endless", Behaviour.endless_chunked())
    srv.set("/huge", Behaviour.huge())
    srv.set("/ok", Behaviour.json({}))
    clients = [_raw_request(srv, p) for p in ("/hang", "/drip", "/endless", "/huge", "/ok")]
    clients.append(socket.create_connection(("127.0.0.1", srv.port), timeout=2))  # idle
    clients[-1].sendall(b"GET /partial HTTP/1.1\r\n")  # headers never finished
    try:
        assert srv.wait_for_requests(5)
        assert _wait(lambda: srv.open_connections == 6)
        start = time.monotonic()
        srv.stop()
        assert time.monotonic() - start < 1.0
        assert _server_threads() == []
        assert srv.open_connections == 0
        assert srv.errors == []
    finally:
        for sock in clients:
            sock.close()
    srv.stop()  # idempotent


def test_importable_as_tests_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parent.parent))
    module = importlib.import_module("tests.fault_server")
    assert module.FaultServer.__name__ == "FaultServer"
    assert module.Behaviour.hang().name == "hang"
