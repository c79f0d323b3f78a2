"""The "par" section: what a pushed authorization request adds to a sign-in start (issue 17).

"The extra round trip of PAR is the only added latency of a sign-in start": the start of a
fresh browser (``GET /authenticate/bench``, a 302 to the provider) is timed through the Flask
test client, side by side in one run, interleaved round by round, for

- ``project``: flask-social-oauth2 without PAR (the provider block names no PAR endpoint): the
  authorization request in the provider address;
- ``project-aa``: a second, identical app, for the A/A comparison (noise);
- ``project-par``: the same block with ``pushedAuthorization: required`` and
  ``pushedAuthorizationURL`` the provider server's ``/par``: every start POSTs the request,
  client-authenticated, to the server (real HTTP on loopback, the extension's pooled client)
  and redirects with only ``client_id`` and the ``request_uri`` answered;
- ``project+post``: a start without PAR, then one bare ``POST /par`` of the same fields through
  a pooled :class:`urllib3.PoolManager` (the library under the extension's client), its 201
  and ``request_uri`` checked: "without PAR, plus one round trip";
- ``round-trip``: the same bare POSTs back to back. Reported, not judged: a round trip made
  between other work costs more than one in a tight loop (the server process, idle longer,
  wakes up later; measured: about 450 against 270 us on 2 shared cores), so the round trip
  that PAR adds is measured where it happens, as ``t(project+post) - t(project)``.

Per round, with ``t`` the time per operation: the extra time of a start with PAR,
``t(project-par) - t(project)``, in round trips, ``/ (t(project+post) - t(project))``: 1 when
the push costs exactly one bare round trip made at the same point. The A/A noise, in round
trips, is max(|median|, IQR / 2) of ``(t(project-aa) - t(project))`` over the same round trip.
See :func:`check` for the target.

The server counts the pushes per client_id; they must equal the starts of ``project-par`` and
the POSTs of ``project+post`` and ``round-trip`` (and ``project`` must push none), or the run
is invalid.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlencode

import urllib3
from flask import Flask

from .apps import START_PATHS, project_app
from .inprocess import BenchmarkError, ProviderServer
from .provider_server import CLIENT_SECRET, REQUEST_URI_PREFIX
from .stats import MAX_TOLERANCE, Check, Rounds, aa_noise, calibrate, iqr, median, run_rounds

#: The contenders in table order.
CONTENDERS: Final = ("project", "project-aa", "project-par", "project+post", "round-trip")
#: The client_ids whose pushes the server counts.
PAR_CLIENT_ID: Final = "project-par"
ROUND_TRIP_CLIENT_ID: Final = "round-trip"
#: The extra time of a start with PAR is at most this many bare round trips: the round trip
#: itself, and 10 % of one for what the push adds around it (its body and client
#: authentication built, its answer read) net of the shorter provider address.
TARGET: Final = 1.10


def start_runner(
    app: Flask, *, pushed: bool, then: Callable[[], None] | None = None
) -> Callable[[int], float]:
    """``n`` sign-in starts of fresh browsers; each must be a 302 to the provider carrying
    the request itself (without PAR) or only a ``request_uri`` (with PAR). With ``then``,
    each start is followed by a call of it (a bare round trip), timed with the start."""
    client = app.test_client(use_cookies=False)
    path = START_PATHS["project"]
    wanted = "request_uri=urn%3Aietf%3Aparams%3Aoauth%3Arequest_uri%3A" if pushed else "&state="

    def run(n: int) -> float:
        get = client.get
        started = time.perf_counter()
        for _ in range(n):
            response = get(path)
            location = response.headers.get("Location", "")
            if response.status_code != 302 or wanted not in location:
                raise BenchmarkError(
                    f"{app.name}: sign-in start answered {response.status}: {response.text[:200]}"
                )
            if pushed and "&state=" in location:
                raise BenchmarkError(f"{app.name}: the pushed request is in the address too")
            if then is not None:
                then()
        return time.perf_counter() - started

    return run


def bare_push(provider_url: str) -> Callable[[], None]:
    """One bare POST of a pushed authorization request through one pooled
    :class:`urllib3.PoolManager`, which must answer 201 with a ``request_uri``."""
    pool = urllib3.PoolManager()
    url = f"{provider_url}/par"
    timeout = urllib3.Timeout(10)
    body = urlencode(
        {
            "response_type": "code",
            "client_id": ROUND_TRIP_CLIENT_ID,
            "redirect_uri": "http://localhost/authenticate/bench",
            "scope": "profile email",
            "state": "s" * 43,
            "code_challenge": "c" * 43,
            "code_challenge_method": "S256",
            "client_secret": CLIENT_SECRET,
        }
    )
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}
    request = pool.request

    def push() -> None:
        answer = request("POST", url, body=body, headers=headers, timeout=timeout, retries=False)
        request_uri = json.loads(answer.data).get("request_uri", "")
        if answer.status != 201 or not request_uri.startswith(REQUEST_URI_PREFIX):
            raise BenchmarkError(f"round-trip: POST /par answered {answer.status}")

    return push


def round_trip_runner(provider_url: str) -> Callable[[int], float]:
    """``n`` bare POSTs of a pushed authorization request back to back (:func:`bare_push`)."""
    push = bare_push(provider_url)

    def run(n: int) -> float:
        started = time.perf_counter()
        for _ in range(n):
            push()
        return time.perf_counter() - started

    return run


@dataclass(frozen=True)
class Measured:
    """The rounds, and the pushes the server saw per client_id during the section."""

    rounds: Rounds
    pushes: dict[str, int]

    def per_round_us(self, name: str) -> list[float]:
        """Microseconds per operation of ``name``, round by round."""
        return [1e6 / rate for rate in self.rounds.rates[name]]

    def summary(self) -> dict[str, Any]:
        """Times, the with/without ratio, the extra time and the noise, for the JSON report."""
        without, aa, pushed, then_post, bare = (self.per_round_us(name) for name in CONTENDERS)
        trip = [t - w for t, w in zip(then_post, without, strict=True)]
        extra = [p - w for p, w in zip(pushed, without, strict=True)]
        in_trips = [e / t for e, t in zip(extra, trip, strict=True)]
        aa_trips = [(a - w) / t for a, w, t in zip(aa, without, trip, strict=True)]
        return {
            "aa_noise": round(aa_noise(self.rounds.round_ratios("project-aa", "project")), 4),
            "us_per_op": {name: round(median(self.per_round_us(name)), 2) for name in CONTENDERS},
            "with_over_without": round(
                median([p / w for p, w in zip(pushed, without, strict=True)]), 4
            ),
            "extra_us": round(median(extra), 2),
            "round_trip_us": round(median(trip), 2),
            "bare_round_trip_us": round(median(bare), 2),
            "extra_minus_round_trip_us": round(
                median([e - t for e, t in zip(extra, trip, strict=True)]), 2
            ),
            "extra_in_round_trips": [round(value, 4) for value in in_trips],
            "aa_in_round_trips": [round(value, 4) for value in aa_trips],
            "aa_noise_round_trips": round(difference_noise(aa_trips), 4),
            "pushes": self.pushes,
        }


def difference_noise(differences: list[float]) -> float:
    """The A/A noise of differences that should be 0: max(|median|, IQR / 2)."""
    return max(abs(median(differences)), iqr(differences) / 2)


def measure(
    server: ProviderServer,
    rounds: int,
    batch_s: float,
    *,
    warm_up: int = 20,
    on_round: Callable[[int, dict[str, float]], None] | None = None,
) -> Measured:
    """Every contender, interleaved round by round; batches calibrated on ``project``.

    :raises BenchmarkError: when a start or a POST answers wrongly, or the server's count of
        pushes of a client_id is not what its contender did.
    """
    counted: dict[str, int] = dict.fromkeys(CONTENDERS, 0)

    def counting(name: str, runner: Callable[[int], float]) -> Callable[[int], float]:
        def run(n: int) -> float:
            took = runner(n)
            counted[name] += n
            return took

        return run

    runners = {
        "project": start_runner(project_app(server.url), pushed=False),
        "project-aa": start_runner(project_app(server.url), pushed=False),
        "project-par": start_runner(
            project_app(server.url, client_id=PAR_CLIENT_ID, par=True), pushed=True
        ),
        "project+post": start_runner(
            project_app(server.url), pushed=False, then=bare_push(server.url)
        ),
        "round-trip": round_trip_runner(server.url),
    }
    runners = {name: counting(name, runner) for name, runner in runners.items()}
    before = server.stats()
    for runner in runners.values():
        runner(warm_up)
    n = calibrate(runners["project"], batch_s)
    result = run_rounds(runners, rounds, dict.fromkeys(runners, n), "ops/s", on_round=on_round)
    after = server.stats()

    def pushes_of(client: str) -> int:
        return after.get(client, {}).get("par_requests", 0) - before.get(client, {}).get(
            "par_requests", 0
        )

    pushes = {client: pushes_of(client) for client in ("project", PAR_CLIENT_ID, "round-trip")}
    expected = {"project": 0, PAR_CLIENT_ID: counted["project-par"]}
    expected[ROUND_TRIP_CLIENT_ID] = counted["project+post"] + counted["round-trip"]
    for client, count in expected.items():
        if pushes[client] != count:
            raise BenchmarkError(f"{client}: the server saw {pushes[client]} pushes, not {count}")
    return Measured(result, pushes)


def check(measured: Measured) -> Check:
    """ "The extra round trip of PAR is the only added latency of a sign-in start": the median
    over the rounds of the extra time per start in bare round trips is at most :data:`TARGET`.

    Within noise when it is at most TARGET + max(A/A noise, IQR / 2 of its own per-round
    values), both in round trips, the allowance capped at ``MAX_TOLERANCE`` of the target.
    """
    summary = measured.summary()
    in_trips = summary["extra_in_round_trips"]
    allowance = max(summary["aa_noise_round_trips"], iqr(in_trips) / 2)
    return Check(
        name="sign-in start: extra time with PAR, in bare round trips (PAR's only cost)",
        target=TARGET,
        measured=median(in_trips),
        tolerance=min(allowance / TARGET, MAX_TOLERANCE),
        kind="at most",
        detail="extra = t(start with PAR) - t(start without); round trip = t(start without,"
        " then a bare POST /par) - t(start without)",
    )


def table(measured: Measured) -> list[str]:
    """The section's lines of the printed table."""
    summary = measured.summary()
    rounds = measured.rounds
    count = len(rounds.rates["project"])
    noise_trips = summary["aa_noise_round_trips"]
    noise_us = noise_trips * summary["round_trip_us"]
    lines = [
        f"sign-in start with and without PAR, in process (median of {count} rounds;"
        f" A/A noise {noise_us:.1f} us = {noise_trips:.2f} round trips)",
        f"  {'contender':<14}{'ops/s':>12}{'us/op':>10}",
    ]
    for name in CONTENDERS:
        us = summary["us_per_op"][name]
        lines.append(f"  {name:<14}{rounds.median_rate(name):>12,.0f}{us:>10.1f}")
    cpu = rounds.cpu_ratio("project", "project-par")
    lines += [
        f"  with PAR / without PAR: {summary['with_over_without']:.2f}x the time per start"
        f" (by this process's CPU time, not judged: {cpu:.2f}x)",
        f"  extra per start {summary['extra_us']:.1f} us; one bare round trip after a start"
        f" {summary['round_trip_us']:.1f} us (back to back {summary['bare_round_trip_us']:.1f}"
        f" us, not judged); extra - round trip {summary['extra_minus_round_trip_us']:+.1f} us"
        f" ({median(summary['extra_in_round_trips']):.2f} round trips in all)",
        "  pushes the server saw: "
        + ", ".join(f"{client} {count}" for client, count in measured.pushes.items()),
        "",
    ]
    return lines
