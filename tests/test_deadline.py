"""The overall deadline of an answer: every read, head and body alike, ends by it."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import requests
from fault_server import Behaviour, FaultServer, _Exchange

from flask_social_oauth2.oauth.deadline import _DEADLINE_POOLS, DeadlineAdapter, deadline


@pytest.fixture
def session() -> Iterator[requests.Session]:
    with requests.Session() as session:
        adapter = DeadlineAdapter(max_retries=0)
        session.mount("http://", adapter)
        session.mount("https://", adapter)
        yield session


def drip_head(interval: float) -> Behaviour:
    """The status line and headers one byte per ``interval``: each read is quick, the whole
    head is not."""

    def handler(ex: _Exchange) -> bool:
        head = ex.head(200, [("Content-Length", "2")]) + b"{}"
        for at in range(len(head)):
            ex.conn.sleep(interval)
            ex.conn.send(head[at : at + 1])
        return False

    return Behaviour(f"drip_head({interval}s)", handler)


def test_a_dripped_head_is_cut_at_the_deadline(
    session: requests.Session, fault_server: FaultServer
) -> None:
    fault_server.set("/slow", drip_head(0.05))
    started = time.monotonic()
    with deadline(0.5), pytest.raises(requests.Timeout):
        session.get(fault_server.url + "/slow", timeout=(2, 0.3), stream=True)
    assert time.monotonic() - started < 1.5


def test_a_body_read_after_the_block_keeps_the_deadline_it_was_sent_with(
    session: requests.Session, fault_server: FaultServer
) -> None:
    fault_server.set("/slow", Behaviour.drip(b"x" * 100, interval=0.05))
    started = time.monotonic()
    with deadline(0.5):
        response = session.get(fault_server.url + "/slow", timeout=(2, 0.3), stream=True)
    with pytest.raises(Exception, match="timed out"):
        response.raw.read(decode_content=False)
    assert time.monotonic() - started < 1.5


def test_without_a_deadline_only_the_read_timeout_applies(
    session: requests.Session, fault_server: FaultServer
) -> None:
    fault_server.set("/slow", Behaviour.drip(b"x" * 10, interval=0.05))
    response = session.get(fault_server.url + "/slow", timeout=(2, 0.3))
    assert response.content == b"x" * 10


def test_the_block_restores_the_outer_deadline(
    session: requests.Session, fault_server: FaultServer
) -> None:
    fault_server.set("/slow", Behaviour.drip(b"x" * 10, interval=0.05))
    with deadline(0.01):
        pass
    # the drip takes ~0.5 s, long past the inner deadline: it must no longer apply
    assert session.get(fault_server.url + "/slow", timeout=(2, 0.3)).content == b"x" * 10


def test_a_proxy_managers_pools_keep_the_deadline() -> None:
    adapter = DeadlineAdapter()
    assert adapter.poolmanager.pool_classes_by_scheme is _DEADLINE_POOLS
    manager = adapter.proxy_manager_for("http://127.0.0.1:9")
    assert manager.pool_classes_by_scheme is _DEADLINE_POOLS
