"""Many processes, real parts: two gunicorn instances (2 workers each) behind nginx, 1,000
complete sign-ins, 20 at a time, against the local identity provider.

The instances share nothing but ``SECRET_KEY`` (from the environment): every step of a flow
lands on whichever instance nginx picks, and the state lives in the browser's cookie. Then the
same with one instance killed halfway: flows in progress on it complete on the other, and
nginx's ``proxy_next_upstream error`` steers everything else away from the dead one.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Final

import pytest
from helpers import ALICE, idp_block
from multiprocess_support import Browser, Cluster, FlowRecord, running_cluster

pytestmark = pytest.mark.multiprocess

FLOWS: Final = 1000
CONCURRENCY: Final = 20
EMAIL: Final = ALICE.email
assert EMAIL is not None


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    # redirectURL "/authenticate/local", relative
    with running_cluster(tmp_path, lambda idp: {"local": idp_block(idp)}) as running:
        yield running


def cluster_sign_in(
    cluster: Cluster, flow: int, between: Callable[[], None] | None = None
) -> FlowRecord:
    """One whole sign-in by a fresh browser; ``between`` runs after the provider step."""
    browser = Browser(cluster.nginx.url, flow)
    try:
        callback = browser.authorize(browser.start())
        if between is not None:
            between()
        browser.check_signed_in(browser.finish(callback), EMAIL)
        browser.record.ok = True
    except Exception as error:
        browser.record.failure = f"{type(error).__name__}: {error}"
    finally:
        browser.close()
    return browser.record


def run(cluster: Cluster, flows: range) -> list[FlowRecord]:
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        return list(pool.map(lambda flow: cluster_sign_in(cluster, flow), flows))


def assert_all_signed_in(records: list[FlowRecord], cluster: Cluster) -> None:
    failures = [(r.flow, r.failure) for r in records if not r.ok]
    assert failures == [], f"{len(failures)} failed, first: {failures[:5]}"
    assert len(records) == FLOWS
    # The provider saw each step exactly once per flow: no code was exchanged twice.
    assert len(cluster.idp.authorization_requests) == FLOWS
    token_requests = cluster.idp.token_requests
    assert len(token_requests) == FLOWS
    assert Counter(request.status_code for request in token_requests) == {200: FLOWS}
    assert len({request.form["code"] for request in token_requests}) == FLOWS
    assert len(cluster.idp.userinfo_requests) == FLOWS
    # nginx passed exactly three app requests per flow, each answered as expected.
    answers = Counter((row[2], row[3]) for row in cluster.nginx.access_lines())
    assert answers == {
        ("/authenticate/local", "302"): 2 * FLOWS,
        ("/me", "200"): FLOWS,
    }


def report(title: str, records: list[FlowRecord], seconds: float) -> None:
    crossed = sum(1 for r in records if r.instance("start") != r.instance("callback"))
    workers = {served for r in records for served in r.served_by.values()}
    print(
        f"\n{title}: {len(records)} flows, {sum(not r.ok for r in records)} failed,"
        f" {seconds:.1f} s, {len(records) / seconds:.0f} flows/s;"
        f" {crossed} finished on another instance than they started;"
        f" {len(workers)} worker processes answered"
    )


def test_thousand_sign_ins_across_two_instances(cluster: Cluster) -> None:
    started = time.monotonic()
    records = run(cluster, range(FLOWS))
    seconds = time.monotonic() - started
    report("two healthy instances", records, seconds)

    assert_all_signed_in(records, cluster)
    # Each step landed on whichever instance nginx picked: both served every step, and many
    # flows started on one instance and finished on the other.
    for step in ("start", "callback", "me"):
        assert set(Counter(r.instance(step) for r in records)) == {"a", "b"}, step
    assert sum(1 for r in records if r.instance("start") != r.instance("callback")) > FLOWS // 4
    errors = cluster.nginx.error_log.read_text()
    assert "[error]" not in errors
    assert "[crit]" not in errors


def test_flows_survive_an_instance_killed_halfway(cluster: Cluster) -> None:
    half = FLOWS // 2
    held = range(half - CONCURRENCY, half)
    started = time.monotonic()

    # Phase 1: the first flows, on both instances.
    records = run(cluster, range(held.start))

    # Phase 2: 20 browsers each start a flow and come back from the provider; then instance
    # "a" is killed (SIGKILL, master and workers) while all of them are between the provider
    # and the callback, so no request is in flight on it; then they finish.
    barrier = threading.Barrier(CONCURRENCY + 1)

    def between() -> None:
        barrier.wait(timeout=60)  # all browsers came back from the provider
        barrier.wait(timeout=60)  # instance "a" is dead

    with ThreadPoolExecutor(CONCURRENCY) as pool:
        futures = [pool.submit(cluster_sign_in, cluster, flow, between) for flow in held]
        barrier.wait(timeout=60)
        cluster.a.kill()
        barrier.wait(timeout=60)
        held_records = [future.result() for future in futures]

    # Phase 3: the rest, with "a" dead.
    after = run(cluster, range(half, FLOWS))
    records += held_records + after
    seconds = time.monotonic() - started
    report("instance 'a' killed halfway", records, seconds)

    assert_all_signed_in(records, cluster)
    started_on_a = [r for r in held_records if r.instance("start") == "a"]
    print(f"  {len(started_on_a)} flows started on 'a' before it died, finished on 'b'")
    assert started_on_a, "no held flow started on 'a'; round-robin should have sent ~half there"
    assert {r.instance("callback") for r in held_records} == {"b"}
    assert {r.instance(step) for r in after for step in ("start", "callback", "me")} == {"b"}
    # nginx met the dead instance and passed those requests on to the live one.
    assert "Connection refused" in cluster.nginx.error_log.read_text()
    retried = [row for row in cluster.nginx.access_lines() if "," in row[4]]
    assert retried, "no request was passed from the dead instance to the live one"
    assert all(row[4].endswith(cluster.b.address) for row in retried)
    print(f"  {len(retried)} requests were passed on from the dead instance by nginx")
