"""The two steps served by gunicorn (2 workers), under a bounded concurrent load on loopback.

Each server runs ``benchmarks.apps:create_app()`` for one contender, binds 127.0.0.1 on a free
port and is stopped at the end. The load generator is a small threaded client in the benchmark
process: ``clients`` simulated browsers, each with its own keep-alive ``http.client`` connection
(reopened when a ``sync`` worker closes it) and its own cookies, each doing a fixed number of
operations; nothing is unbounded (connection timeouts, a fixed count, a join timeout).

- redirect step: ``GET`` the start without cookies, expect 302;
- whole flow: ``GET`` the start, keep its cookies, ``GET`` the callback with ``code`` and
  ``state``, expect 302 to ``/``. The app POSTs the code to and GETs the profile from the
  provider server (one process, shared by all servers).

A rate is requests per second (a whole flow is two requests to the app).
"""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Final
from urllib.parse import parse_qs, urlencode, urlsplit

from .apps import START_PATHS
from .inprocess import ROOT, BenchmarkError

WORKERS: Final = 2
GTHREAD_THREADS: Final = 4
_PEER_ONLY_ENV: Final = ("AUTHLIB_INSECURE_TRANSPORT", "OAUTHLIB_INSECURE_TRANSPORT")


def free_port() -> int:
    """A port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Server:
    """A running gunicorn."""

    contender: str
    worker_class: str
    port: int
    process: subprocess.Popen[bytes]


def _ready(port: int) -> bool:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        connection.request("GET", "/")
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


def _start(contender: str, worker_class: str, provider_url: str) -> Server:
    env = {key: value for key, value in os.environ.items() if key not in _PEER_ONLY_ENV}
    env.update(
        BENCH_CONTENDER=contender,
        BENCH_PROVIDER_URL=provider_url,
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
    )
    for _ in range(3):
        port = free_port()
        command = [
            sys.executable,
            "-m",
            "gunicorn",
            "--workers",
            str(WORKERS),
            "--worker-class",
            worker_class,
            "--bind",
            f"127.0.0.1:{port}",
            "--log-level",
            "warning",
            "--backlog",
            "256",
        ]
        if worker_class == "gthread":
            command += ["--threads", str(GTHREAD_THREADS)]
        command.append("benchmarks.apps:create_app()")
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and process.poll() is None:
            if _ready(port):
                return Server(contender, worker_class, port, process)
            time.sleep(0.1)
        _stop(process)
    raise BenchmarkError(f"gunicorn ({contender}, {worker_class}) did not start")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if process.stderr is not None:
        process.stderr.close()


@contextmanager
def servers(
    contenders: list[str], worker_classes: list[str], provider_url: str
) -> Iterator[dict[tuple[str, str], Server]]:
    """Start one gunicorn per (contender, worker class); stop them all afterwards."""
    running: dict[tuple[str, str], Server] = {}
    try:
        for worker_class in worker_classes:
            for contender in contenders:
                running[(contender, worker_class)] = _start(contender, worker_class, provider_url)
        yield running
    finally:
        for server in running.values():
            _stop(server.process)


class Browser:
    """One simulated browser: a keep-alive connection and a cookie jar of its own."""

    def __init__(self, port: int, timeout: float) -> None:
        self.host = f"127.0.0.1:{port}"
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        self.cookies: dict[str, str] = {}

    def get(self, target: str) -> http.client.HTTPResponse:
        headers = {"Host": self.host}
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        try:
            self.connection.request("GET", target, headers=headers)
            response = self.connection.getresponse()
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
            self.connection.close()  # a keep-alive connection the server had closed: retry once
            self.connection.request("GET", target, headers=headers)
            response = self.connection.getresponse()
        response.read()
        for header in response.headers.get_all("Set-Cookie") or []:
            pair = header.split(";", 1)[0]
            name, _, value = pair.partition("=")
            if value and "Max-Age=0" not in header:
                self.cookies[name.strip()] = value
            else:
                self.cookies.pop(name.strip(), None)
        return response

    def redirect_step(self, start_path: str) -> int:
        self.cookies.clear()
        response = self.get(start_path)
        if response.status != 302:
            raise BenchmarkError(f"redirect step answered {response.status}")
        return 1

    def whole_flow(self, start_path: str, code: str) -> int:
        self.cookies.clear()
        first = self.get(start_path)
        if first.status != 302:
            raise BenchmarkError(f"start answered {first.status}")
        query = parse_qs(urlsplit(first.headers["Location"]).query)
        callback = urlsplit(query["redirect_uri"][0]).path
        second = self.get(f"{callback}?{urlencode({'code': code, 'state': query['state'][0]})}")
        if second.status != 302 or urlsplit(second.headers.get("Location", "")).path != "/":
            raise BenchmarkError(f"callback answered {second.status}")
        return 2

    def close(self) -> None:
        self.connection.close()


def load_runner(
    server: Server, step: str, clients: int, timeout: float = 10.0
) -> Callable[[int], float]:
    """A runner for :func:`benchmarks.stats.run_rounds`: ``n`` requests to ``server`` from
    ``clients`` concurrent browsers; returns the seconds they took."""
    start_path = START_PATHS[server.contender]
    counter = iter(range(10**12))
    lock = threading.Lock()

    def run(n: int) -> float:
        per_request = 1 if step == "redirect" else 2
        operations = max(clients, n // per_request)
        per_client = [operations // clients + (i < operations % clients) for i in range(clients)]
        browsers = [Browser(server.port, timeout) for _ in range(clients)]
        errors: list[BaseException] = []
        barrier = threading.Barrier(clients + 1)

        def work(browser: Browser, count: int) -> None:
            try:
                barrier.wait()
                for _ in range(count):
                    if step == "redirect":
                        browser.redirect_step(start_path)
                    else:
                        with lock:
                            code = f"code-{next(counter)}"
                        browser.whole_flow(start_path, code)
            except BaseException as error:  # reported below, the run is invalid
                errors.append(error)
            finally:
                browser.close()

        threads = [
            threading.Thread(target=work, args=(b, c), daemon=True)
            for b, c in zip(browsers, per_client, strict=True)
        ]
        for thread in threads:
            thread.start()
        barrier.wait()
        started = time.perf_counter()
        for thread in threads:
            thread.join(timeout=120)
        took = time.perf_counter() - started
        if errors or any(thread.is_alive() for thread in threads):
            raise BenchmarkError(
                f"load on {server.contender} ({server.worker_class}) failed: {errors[:1]!r}"
            )
        # rate = requests / seconds; run_rounds divides the n it passed, so scale to it
        return took * n / (operations * per_request)

    return run
