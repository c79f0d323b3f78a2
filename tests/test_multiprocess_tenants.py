"""Providers loaded at runtime across processes: two gunicorn instances (2 workers each) behind
nginx, a provider loader reading a SQLite table of customers' blocks, a small
``SOCIAL_OAUTH2_PROVIDER_CACHE_TTL``. A customer's changed block is seen by every process within
the TTL, and sign-ins through the loaded provider work across instances."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest
import requests
from helpers import ALICE, CLIENT_ID, CLIENT_SECRET
from multiprocess_support import (
    Browser,
    Gunicorn,
    Nginx,
    app_environment,
    require_gunicorn,
    require_nginx,
)

from flask_social_oauth2.local_idp import LocalIdentityProvider

pytestmark = pytest.mark.multiprocess

TTL: Final = 1.0
EMAIL: Final = ALICE.email
assert EMAIL is not None


@dataclass
class TenantCluster:
    first: LocalIdentityProvider
    second: LocalIdentityProvider
    database: Path
    instances: tuple[Gunicorn, Gunicorn]
    nginx: Nginx

    def set_block(self, server: LocalIdentityProvider) -> None:
        block: dict[str, Any] = server.settings_block(
            CLIENT_ID, CLIENT_SECRET, "/authenticate/acme"
        )
        with sqlite3.connect(self.database) as connection:
            connection.execute(
                "INSERT OR REPLACE INTO tenants (name, block) VALUES ('acme', ?)",
                (json.dumps(block),),
            )

    def token_urls_seen(self, asks: int) -> set[str]:
        """The token URL of ``acme`` as ``asks`` requests to each instance see it; at least
        one worker process of each instance answers."""
        seen = set()
        processes = set()
        with requests.Session() as http:
            for instance in self.instances:
                for _ in range(asks):
                    answer = http.get(f"http://{instance.address}/provider/acme", timeout=10)
                    assert answer.status_code == 200, answer.text
                    seen.add(answer.json()["token_url"])
                    processes.add(answer.headers["X-Served-By"])
        assert len(processes) >= 2, processes
        return seen


@pytest.fixture
def tenant_cluster(tmp_path: Path) -> Iterator[TenantCluster]:
    require_gunicorn()
    require_nginx()
    database = tmp_path / "tenants.sqlite3"
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE tenants (name TEXT PRIMARY KEY, block TEXT NOT NULL)")
    with LocalIdentityProvider() as first, LocalIdentityProvider() as second:
        environment = {
            "SOCIAL_TEST_TENANTS_DB": str(database),
            "SOCIAL_TEST_PROVIDER_CACHE_TTL": str(TTL),
        }
        a = Gunicorn("a", tmp_path, app_environment({}, "a") | environment)
        b = Gunicorn("b", tmp_path, app_environment({}, "b") | environment)
        nginx = Nginx(tmp_path, [a.address, b.address])
        for server in (first, second):
            server.auto_approve = ALICE
            server.register_client(CLIENT_ID, CLIENT_SECRET, [f"{nginx.url}/authenticate/acme"])
        cluster = TenantCluster(first, second, database, (a, b), nginx)
        cluster.set_block(first)
        with a, b, nginx:
            a.wait_for_workers()
            b.wait_for_workers()
            yield cluster
        for instance in (a, b):
            assert "Traceback" not in instance.log_text(), instance.log_text()


def sign_in(cluster: TenantCluster) -> None:
    browser = Browser(cluster.nginx.url, 0)
    try:
        callback = browser.authorize(browser.start("acme"))
        browser.check_signed_in(browser.finish(callback), EMAIL)
    finally:
        browser.close()


def test_every_process_sees_a_changed_block_within_the_ttl(
    tenant_cluster: TenantCluster,
) -> None:
    cluster = tenant_cluster
    assert cluster.token_urls_seen(20) == {cluster.first.token_url}  # every worker has it kept
    sign_in(cluster)
    assert len(cluster.first.token_requests) == 1
    cluster.set_block(cluster.second)
    changed = time.monotonic()
    time.sleep(TTL + 0.2)
    assert cluster.token_urls_seen(20) == {cluster.second.token_url}
    assert time.monotonic() - changed < TTL + 5
    sign_in(cluster)
    assert len(cluster.second.token_requests) == 1
    assert len(cluster.first.token_requests) == 1
