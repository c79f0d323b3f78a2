"""A soak: mixed sign-ins through gunicorn for a while, watching the workers' memory and files.

Flows, a bounded number at a time: success, access denied at the provider, a state mismatch,
and a provider whose token endpoint answers 503. Every 10 s each worker's resident memory
(``/proc/<pid>/statm``) and open file descriptors (``/proc/<pid>/fd``) are sampled (the least
of five reads 20 ms apart, so that the sockets of the request under way do not count).

"Flat" means, for each worker, after a warm-up (the first sixth of the run, at least 10 s):
the median of the last third of the samples is within 3 % + 1 MiB of the median of the first
third for memory (about 2.2 MiB for a 40 MiB worker), and within 2 descriptors for files.
Medians shrug off one-off spikes (a garbage collection, a connection being opened); comparing
the first and last thirds after the warm-up (imports, caches, connection pools filling) catches
steady growth, while the allowance absorbs allocator noise. At ~45 flows/s per worker the two
thirds lie ~1,800 flows apart in the 1-minute run and ~15,000 in the 10-minute run, so a leak
of about 1.3 KiB (short run) or 0.15 KiB (long run) per flow, or one descriptor per ~900 flows,
breaks the rule.

The 1-minute run is part of ``tox -e multiprocess``; the 10-minute run is ``tox -e soak``.
"""

from __future__ import annotations

import os
import secrets
import statistics
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest
from fault_server import Behaviour, FaultServer
from helpers import ALICE, CLIENT_ID, CLIENT_SECRET, idp_block, valid_block
from multiprocess_support import PAGE_SIZE, Browser, Gunicorn, app_environment, require_gunicorn

from flask_social_oauth2.local_idp import LocalIdentityProvider

CONCURRENCY: Final = 4
SAMPLE_EVERY: Final = 10.0
MiB: Final = 1024 * 1024
EMAIL: Final = ALICE.email
assert EMAIL is not None
#: The flows, in turn: what each does and the status its callback must end with.
KINDS: Final = ("success", "success", "denied", "state_mismatch", "provider_503")
EXPECTED_STATUS: Final = {"success": 302, "denied": 403, "state_mismatch": 400, "provider_503": 502}


@dataclass
class Sample:
    seconds: float
    rss: dict[int, int]
    fds: dict[int, int]


def sample(pids: list[int], seconds: float, reads: int = 5) -> Sample:
    """Each worker's RSS and open descriptors: the least of ``reads`` reads 20 ms apart, so
    that the sockets of the request a worker is serving at that instant do not count."""
    rss: dict[int, int] = {}
    fds: dict[int, int] = {}
    for attempt in range(reads):
        if attempt:
            time.sleep(0.02)
        for pid in pids:
            pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
            rss[pid] = min(rss.get(pid, pages * PAGE_SIZE), pages * PAGE_SIZE)
            count = len(os.listdir(f"/proc/{pid}/fd"))
            fds[pid] = min(fds.get(pid, count), count)
    return Sample(seconds, rss, fds)


def is_flat(first: list[int], last: list[int], relative: float, absolute: int) -> bool:
    start, end = statistics.median(first), statistics.median(last)
    return end <= start * (1 + relative) + absolute


def one_flow(
    kind: str, app_url: str, flow: int, idp: LocalIdentityProvider, idp_lock: threading.Lock
) -> int:
    """Run one flow of ``kind``; the status its callback answered."""
    browser = Browser(app_url, flow)
    try:
        if kind == "provider_503":
            authorization_url = browser.start("faulty")
            state = Browser.state_of(authorization_url)
            return browser.get(f"{app_url}/authenticate/faulty?code=c&state={state}").status_code
        authorization_url = browser.start("local")
        # The provider's deny knob acts on its next authorization request, so that request and
        # the knob are taken together.
        with idp_lock:
            if kind == "denied":
                idp.deny_next("access_denied")
            callback = browser.authorize(authorization_url)
        if kind == "state_mismatch":
            callback = callback.replace(Browser.state_of(callback), secrets.token_urlsafe(24))
        finished = browser.finish(callback)
        if kind == "success":
            browser.check_signed_in(finished, EMAIL)
        return finished.status_code
    finally:
        browser.close()


def soak(tmp_path: Path, seconds: float) -> None:
    require_gunicorn()
    warm_up = max(10.0, seconds / 6)
    with LocalIdentityProvider() as idp, FaultServer() as faulty:
        idp.auto_approve = ALICE
        faulty.set("/token", Behaviour.text("Service Unavailable", status=503))
        providers = {
            "local": idp_block(idp),
            "faulty": valid_block(
                authorizationURL=f"{faulty.url}/authorize",
                accessTokenURL=f"{faulty.url}/token",
                apiURL=f"{faulty.url}/userinfo",
                redirectURL="/authenticate/faulty",
            ),
        }
        server = Gunicorn("soak", tmp_path, app_environment(providers, "soak", timeout=2))
        idp.register_client(
            CLIENT_ID, CLIENT_SECRET, [f"http://{server.address}/authenticate/local"]
        )
        with server:
            pids = server.wait_for_workers()
            app_url = f"http://{server.address}"
            outcomes: Counter[tuple[str, int | str]] = Counter()
            outcomes_lock = threading.Lock()
            idp_lock = threading.Lock()
            counter = iter(range(10**9))
            stop = threading.Event()

            def drive() -> None:
                while not stop.is_set():
                    with outcomes_lock:
                        flow = next(counter)
                    kind = KINDS[flow % len(KINDS)]
                    try:
                        result: int | str = one_flow(kind, app_url, flow, idp, idp_lock)
                    except Exception as error:
                        result = f"{type(error).__name__}: {error}"
                    with outcomes_lock:
                        outcomes[(kind, result)] += 1

            threads = [threading.Thread(target=drive, daemon=True) for _ in range(CONCURRENCY)]
            started = time.monotonic()
            for thread in threads:
                thread.start()
            samples: list[Sample] = []
            try:

                def wait_until(at: float) -> None:
                    stop.wait(max(0.0, started + at - time.monotonic()))

                wait_until(warm_up)
                at = warm_up
                while at <= seconds + 0.01:
                    wait_until(at)
                    samples.append(sample(pids, time.monotonic() - started))
                    at += SAMPLE_EVERY
            finally:
                stop.set()
                for thread in threads:
                    thread.join(timeout=30)
            assert server.worker_pids() == pids, "a worker died or was replaced during the soak"
            log = server.log_text()

    assert "Traceback" not in log, log
    total = sum(outcomes.values())
    unexpected = {key: n for key, n in outcomes.items() if key[1] != EXPECTED_STATUS[key[0]]}
    third = max(1, len(samples) // 3)
    first, last = samples[:third], samples[-third:]
    print(
        f"\nsoak {seconds:.0f} s: {total} flows ({total / seconds:.0f}/s), {CONCURRENCY} at a"
        f" time; {dict(Counter(kind for kind, _ in outcomes.elements()))}; unexpected:"
        f" {unexpected or 0}; {len(samples)} samples after {warm_up:.0f} s of warm-up"
    )
    for pid in pids:
        start, end = samples[0], samples[-1]
        print(
            f"  worker {pid}: RSS {start.rss[pid] / MiB:.1f} -> {end.rss[pid] / MiB:.1f}"
            f" MiB (medians {statistics.median(s.rss[pid] for s in first) / MiB:.1f} ->"
            f" {statistics.median(s.rss[pid] for s in last) / MiB:.1f}),"
            f" fds {start.fds[pid]} -> {end.fds[pid]}"
        )
    assert unexpected == {}
    assert len(samples) >= 5
    for pid in pids:
        rss_first = [s.rss[pid] for s in first]
        rss_last = [s.rss[pid] for s in last]
        assert is_flat(rss_first, rss_last, 0.03, 1 * MiB), (pid, rss_first, rss_last)
        fds_first = [s.fds[pid] for s in first]
        fds_last = [s.fds[pid] for s in last]
        assert is_flat(fds_first, fds_last, 0.0, 2), (pid, fds_first, fds_last)


@pytest.mark.multiprocess
def test_soak_one_minute(tmp_path: Path) -> None:
    soak(tmp_path, 60)


@pytest.mark.slow
def test_soak_ten_minutes(tmp_path: Path) -> None:
    soak(tmp_path, 600)
