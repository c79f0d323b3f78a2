"""The app side in one process: each app's Flask test client, real HTTP to the provider server.

- the redirect step: ``GET`` the sign-in start of a fresh browser (no cookies), expect a 302;
- the whole flow: a fresh browser (a new test client, so a new cookie jar) starts the sign-in,
  reads ``state`` and ``redirect_uri`` from the provider address it is sent to, and calls the
  callback with a code: the app checks the state, POSTs the code to the provider server's
  ``/token``, GETs ``/userinfo`` and redirects to ``/``;
- an API call: a browser signed in once calls a view that calls the provider server's
  protected API (see :mod:`benchmarks.api_calls`);
- per-flow cost: bytes of ``Set-Cookie`` per flow, bytes the browser sends back, and the
  process's resident memory over many flows.
"""

from __future__ import annotations

import gc
import itertools
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

from flask import Flask
from flask.testing import FlaskClient

ROOT: Final = Path(__file__).resolve().parent.parent


class BenchmarkError(RuntimeError):
    """A contender did not do the work (wrong status, missing redirect): the run is invalid."""


@dataclass
class ProviderServer:
    """The loopback token + userinfo server, in its own process."""

    process: subprocess.Popen[str]
    url: str

    def stats(self) -> dict[str, dict[str, int]]:
        """Requests seen per client_id."""
        with urllib.request.urlopen(f"{self.url}/stats", timeout=10) as answer:  # noqa: S310
            data: dict[str, dict[str, int]] = json.loads(answer.read())
        return data


@contextmanager
def provider_server() -> Iterator[ProviderServer]:
    """Start :mod:`benchmarks.provider_server` on a free loopback port; stop it afterwards."""
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.provider_server"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("PORT "):
            raise BenchmarkError(f"provider server did not start: {line!r}")
        yield ProviderServer(process, f"http://127.0.0.1:{int(line.split()[1])}")
    finally:
        if process.stdin is not None:
            process.stdin.close()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


def redirect_runner(app: Flask, path: str) -> Callable[[int], float]:
    """``n`` redirect steps of fresh browsers; returns the seconds they took."""
    client = app.test_client(use_cookies=False)

    def run(n: int) -> float:
        get = client.get
        started = time.perf_counter()
        for _ in range(n):
            response = get(path)
            if response.status_code != 302:
                raise BenchmarkError(f"{app.name}: redirect step answered {response.status}")
        return time.perf_counter() - started

    return run


@dataclass(frozen=True)
class FlowCost:
    """What one whole flow cost the browser in cookies."""

    set_cookie_bytes: int
    cookie_bytes_sent: int
    cookies_set: int


def one_flow(app: Flask, start_path: str, code: str) -> FlowCost:
    """One whole sign-in of a fresh browser.

    :raises BenchmarkError: when a step does not answer as a successful sign-in does.
    """
    return _sign_in(app.test_client(), app, start_path, code)


def signed_in_browser(app: Flask, start_path: str, code: str) -> FlaskClient:
    """A fresh browser (a test client keeping its cookies) after one whole sign-in.

    :raises BenchmarkError: when a step does not answer as a successful sign-in does.
    """
    client = app.test_client()
    _sign_in(client, app, start_path, code)
    return client


def _sign_in(client: FlaskClient, app: Flask, start_path: str, code: str) -> FlowCost:
    first = client.get(start_path)
    if first.status_code != 302:
        raise BenchmarkError(f"{app.name}: start answered {first.status}")
    query = parse_qs(urlsplit(first.headers["Location"]).query)
    callback = urlsplit(query["redirect_uri"][0]).path
    second = client.get(callback, query_string={"code": code, "state": query["state"][0]})
    target = second.headers.get("Location", "")
    if second.status_code != 302 or urlsplit(target).path != "/":
        raise BenchmarkError(
            f"{app.name}: callback answered {second.status} to {target!r}: {second.text[:200]}"
        )
    set_cookies = first.headers.getlist("Set-Cookie") + second.headers.getlist("Set-Cookie")
    sent = second.request.headers.get("Cookie", "")
    return FlowCost(
        set_cookie_bytes=sum(len(value) for value in set_cookies),
        cookie_bytes_sent=len(sent),
        cookies_set=len(set_cookies),
    )


def flow_runner(app: Flask, start_path: str) -> Callable[[int], float]:
    """``n`` whole flows, each of a fresh browser; returns the seconds they took."""
    codes = itertools.count()

    def run(n: int) -> float:
        started = time.perf_counter()
        for _ in range(n):
            one_flow(app, start_path, f"code-{next(codes)}")
        return time.perf_counter() - started

    return run


def api_runner(
    browser: FlaskClient, name: str, path: str, expected: str, calls: dict[str, int]
) -> Callable[[int], float]:
    """``n`` API-calling requests of one signed-in browser; each must answer 200 with
    ``expected`` (the client_id the API server saw in the token). ``calls[name]`` counts them,
    to be checked against the server's own count.

    :raises BenchmarkError: on any other answer.
    """
    body = expected.encode()
    calls.setdefault(name, 0)

    def run(n: int) -> float:
        get = browser.get
        started = time.perf_counter()
        for _ in range(n):
            response = get(path)
            if response.status_code != 200 or response.data != body:
                raise BenchmarkError(
                    f"{name}: the API view answered {response.status}: {response.text[:200]!r}"
                )
        took = time.perf_counter() - started
        calls[name] += n
        return took

    return run


def resident_bytes() -> int:
    """The process's resident memory now (``/proc/self/statm``; peak RSS where absent)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            pages = int(statm.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):  # pragma: no cover - not Linux
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def memory_over_flows(
    app: Flask, start_path: str, total: int, checkpoints: int = 10
) -> list[tuple[int, int]]:
    """Resident memory after every ``total / checkpoints`` whole flows: (flows done, bytes)."""
    run = flow_runner(app, start_path)
    step = max(1, total // checkpoints)
    samples: list[tuple[int, int]] = []
    done = 0
    while done < total:
        n = min(step, total - done)
        run(n)
        done += n
        gc.collect()
        samples.append((done, resident_bytes()))
    return samples


def memory_summary(samples: list[tuple[int, int]]) -> dict[str, Any]:
    """Growth between the first checkpoint (10 % of the flows) and the last."""
    first_flows, first_rss = samples[0]
    last_flows, last_rss = samples[-1]
    growth = last_rss - first_rss
    flows = max(1, last_flows - first_flows)
    return {
        "samples": [{"flows": f, "rss_mib": round(r / 2**20, 2)} for f, r in samples],
        "rss_first_mib": round(first_rss / 2**20, 2),
        "rss_last_mib": round(last_rss / 2**20, 2),
        "growth_kib": round(growth / 1024, 1),
        "growth_bytes_per_flow": round(growth / flows, 3),
        "flows_first": first_flows,
        "flows_last": last_flows,
    }
