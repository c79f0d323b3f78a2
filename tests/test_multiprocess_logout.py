"""A provider's logout across processes, real parts: two gunicorn instances (2 workers each)
behind nginx keep their sessions in ONE PostgreSQL database. A browser signs in through nginx;
the provider's back-channel logout token is delivered to one instance, and the browser's next
request, served by the other, is signed out; the same token replayed to the other instance is
refused and ends nothing more (SECURITY.md lines 38 and 39)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from helpers import ALICE, CLIENT_ID, idp_block
from multiprocess_support import Browser, Cluster, Gunicorn, running_cluster

from flask_social_oauth2.local_idp import LocalIdentityProvider

pytestmark = pytest.mark.multiprocess

EMAIL = ALICE.email or ""
PATH = "/authenticate/local/backchannel-logout"
#: SOCIAL_OAUTH2_SESSION_CHECK_SECONDS of the cluster: a session ends within it.
CHECK_SECONDS = 1


@pytest.fixture
def cluster(tmp_path: Path, postgres_database_url: str) -> Iterator[Cluster]:
    def providers(idp: LocalIdentityProvider) -> dict[str, Any]:
        idp.id_token_tamper = lambda header, claims: (header, {**claims, "sid": "op-session"})
        custom = {"issuer": idp.issuer, "backchannelLogout": "true"}
        return {"local": idp_block(idp, customProperties=custom)}

    shared = {
        "SOCIAL_TEST_TOKEN_STORE": postgres_database_url,
        "SOCIAL_TEST_SESSION_CHECK": str(CHECK_SECONDS),
    }
    with running_cluster(tmp_path, providers, shared) as running:
        yield running


def signed_in(cluster: Cluster) -> Browser:
    browser = Browser(cluster.nginx.url, 0)
    browser.check_signed_in(browser.finish(browser.authorize(browser.start())), EMAIL)
    return browser


def me_at(browser: Browser, instance: Gunicorn) -> int:
    """The status of ``GET /me`` served by ``instance``, with the browser's cookie."""
    return browser.get(f"http://{instance.address}/me").status_code


def test_a_logout_at_one_instance_ends_the_session_the_other_serves_and_a_replay_is_refused(
    cluster: Cluster,
) -> None:
    browser = signed_in(cluster)
    assert me_at(browser, cluster.b) == 200
    token = cluster.idp.logout_token(CLIENT_ID, sid="op-session")
    delivered = requests.post(
        f"http://{cluster.a.address}{PATH}", data={"logout_token": token}, timeout=10
    )
    assert delivered.status_code == 200, delivered.text
    assert delivered.headers["Cache-Control"] == "no-store"
    time.sleep(CHECK_SECONDS + 0.1)
    assert me_at(browser, cluster.b) == 401
    assert me_at(browser, cluster.a) == 401

    again = signed_in(cluster)  # a new session in the same provider session
    replayed = requests.post(
        f"http://{cluster.b.address}{PATH}", data={"logout_token": token}, timeout=10
    )
    assert replayed.status_code == 400
    assert replayed.json()["error"] == "invalid_request"
    assert "used already" in replayed.json()["error_description"]
    time.sleep(CHECK_SECONDS + 0.1)
    assert me_at(again, cluster.a) == 200
    assert me_at(again, cluster.b) == 200
