"""Concurrency, proven: one refresh for 50 concurrent API calls served by many processes.

Two gunicorn instances (2 workers each) behind nginx keep their tokens in ONE real PostgreSQL
database. A browser signs in through nginx; its access token is then made due in the database
(and dead at the provider), and 50 API calls with that browser's cookie arrive at once, through
nginx, on all four workers. The local identity provider rotates refresh tokens and refuses a
used one, so a second refresh with the old refresh token would fail: exactly one refresh
request must reach it, all 50 calls must succeed, and the stored token must be the newest. The
refresh is serialized by the store's ``SELECT ... FOR UPDATE`` across processes and by its lock
within one.

Then a fault: the provider answers 500 to the refresh; the call is a 502 and the old token is
kept, so that the next refresh (once, for 50 calls again) uses it and succeeds.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest
import requests
import sqlalchemy as sa
from flask import Flask
from helpers import ALICE, CLIENT_ID, CLIENT_SECRET, idp_block
from multiprocess_support import (
    SECRET_KEY,
    Browser,
    Gunicorn,
    Nginx,
    app_environment,
    require_gunicorn,
    require_nginx,
)

from flask_social_oauth2.config.settings import OAuth2Info
from flask_social_oauth2.local_idp import LocalIdentityProvider
from flask_social_oauth2.local_idp.records import RecordedTokenRequest
from flask_social_oauth2.tokens import SQLAlchemyTokenStore

pytestmark = pytest.mark.multiprocess

CALLS: Final = 50
#: Seconds the provider takes to answer a token request, as a real one over the internet might:
#: the window in which a second refresh could start, were the calls not serialized.
PROVIDER_LATENCY: Final = 0.3
KEY: Final = ALICE.sub
EMAIL: Final = ALICE.email
assert EMAIL is not None


@dataclass
class Cluster:
    idp: LocalIdentityProvider
    a: Gunicorn
    b: Gunicorn
    nginx: Nginx
    store: SQLAlchemyTokenStore
    #: The store's app: the instances' SECRET_KEY, from which the token key is derived.
    app: Flask
    #: Every token answer the provider issued (sign-in and refreshes), oldest first.
    issued: list[dict[str, Any]]

    def stored(self) -> OAuth2Info | None:
        with self.app.app_context():
            return self.store.load("local", KEY)

    def version(self) -> int:
        with self.store.engine.connect() as connection:
            version: int = connection.execute(sa.select(self.store.table.c.version)).scalar_one()
        return version

    def make_due(self) -> OAuth2Info:
        """Make the stored token due (expired a second ago) in PostgreSQL, and dead at the
        provider too, so that a call with it would be refused; the token it was."""
        with self.app.app_context():
            info = self.store.load("local", KEY)
            assert info is not None
            self.store.save("local", KEY, dataclasses.replace(info, expires_at=time.time() - 1))
        self.idp.revoke_access_tokens()
        return info


@pytest.fixture
def cluster(
    tmp_path: Path, postgres_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Cluster]:
    require_gunicorn()
    require_nginx()
    with LocalIdentityProvider() as idp:
        idp.auto_approve = ALICE
        issued: list[dict[str, Any]] = []
        save_token = idp.store.save_token

        def recording(token: Mapping[str, Any], oauth_request: Any) -> None:
            time.sleep(PROVIDER_LATENCY)
            issued.append(dict(token))
            save_token(token, oauth_request)

        monkeypatch.setattr(idp.store, "save_token", recording)
        block = idp_block(idp, customProperties={"apiBaseURL": idp.api_base_url})
        providers = {"local": block}
        environments = {
            name: {
                **app_environment(providers, name),
                "SOCIAL_TEST_TOKEN_STORE": postgres_database_url,
            }
            for name in ("a", "b")
        }
        a = Gunicorn("a", tmp_path, environments["a"])
        b = Gunicorn("b", tmp_path, environments["b"])
        nginx = Nginx(tmp_path, [a.address, b.address])
        idp.register_client(CLIENT_ID, CLIENT_SECRET, [f"{nginx.url}/authenticate/local"])
        app = Flask("multiprocess_refresh")
        app.config["SECRET_KEY"] = SECRET_KEY
        store = SQLAlchemyTokenStore(postgres_database_url)
        try:
            with a, b, nginx:
                a.wait_for_workers()
                b.wait_for_workers()
                yield Cluster(idp, a, b, nginx, store, app, issued)
        finally:
            store.engine.dispose()
        for instance in (a, b):
            assert "Traceback" not in instance.log_text(), instance.log_text()


def signed_in_browser(cluster: Cluster) -> Browser:
    """A browser that signed in with the local provider through nginx; its token is stored.

    Its fresh token then served a first burst of calls (no refresh), so every worker has
    booted its app and connected to the database: the calls of the next burst race each other
    from the start instead of being staggered by each worker's first request. The provider's
    records are cleared after.
    """
    browser = Browser(cluster.nginx.url, 0)
    callback = browser.authorize(browser.start())
    browser.check_signed_in(browser.finish(callback), EMAIL)
    assert [r.grant_type for r in cluster.idp.token_requests] == ["authorization_code"]
    workers: set[str] = set()
    for _ in range(10):
        warm, _ = burst(cluster, browser, calls=20)
        assert [call.status for call in warm] == [200] * 20
        workers |= {call.served_by for call in warm}
        if len(workers) == 4:
            break
    assert len(workers) == 4, f"not every worker answered: {workers}"
    assert refreshes(cluster.idp) == []
    cluster.idp.reset_records()
    return browser


@dataclass
class Call:
    status: int
    served_by: str
    body: str


def burst(cluster: Cluster, browser: Browser, calls: int = CALLS) -> tuple[list[Call], float]:
    """``calls`` GET /api/me with the browser's cookie, all released at once through nginx;
    their answers and the seconds they took together."""
    cookies = browser.session.cookies.get_dict()
    start = threading.Barrier(calls)

    def call(_: int) -> Call:
        with requests.Session() as session:
            session.trust_env = False
            start.wait(timeout=60)
            answer = session.get(
                f"{cluster.nginx.url}/api/me", cookies=cookies, allow_redirects=False, timeout=60
            )
        return Call(answer.status_code, answer.headers.get("X-Served-By", "?"), answer.text)

    started = time.monotonic()
    with ThreadPoolExecutor(calls) as pool:
        answers = list(pool.map(call, range(calls)))
    return answers, time.monotonic() - started


def refreshes(idp: LocalIdentityProvider) -> list[RecordedTokenRequest]:
    return [r for r in idp.token_requests if r.grant_type == "refresh_token"]


def assert_newest_stored(cluster: Cluster, old: OAuth2Info) -> OAuth2Info:
    """The stored token is the one the provider issued last (the refresh's answer), rotated."""
    stored = cluster.stored()
    assert stored is not None
    newest = cluster.issued[-1]
    assert stored.access_token == newest["access_token"]
    assert stored.refresh_token == newest["refresh_token"]
    assert (stored.access_token, stored.refresh_token) != (old.access_token, old.refresh_token)
    assert stored.expires_at is not None
    assert stored.expires_at > time.time() + 60
    # the provider still accepts the stored refresh token, and no longer the old one
    assert cluster.idp.store.refresh_token(stored.refresh_token or "") is not None
    assert cluster.idp.store.refresh_token(old.refresh_token or "") is None
    return stored


def report(title: str, answers: list[Call], seconds: float, cluster: Cluster) -> None:
    statuses = Counter(answer.status for answer in answers)
    instances = Counter(answer.served_by.partition("/")[0] for answer in answers)
    workers = {answer.served_by for answer in answers}
    seen = [r.status_code for r in refreshes(cluster.idp)]
    print(
        f"\n{title}: {len(answers)} calls in {seconds:.2f} s, statuses {dict(statuses)};"
        f" refresh requests seen by the provider: {len(seen)} {seen};"
        f" instances {dict(instances)}, {len(workers)} worker processes answered"
    )


def assert_both_instances_answered(answers: list[Call]) -> None:
    assert {answer.served_by.partition("/")[0] for answer in answers} == {"a", "b"}


def test_fifty_calls_from_two_instances_refresh_once(cluster: Cluster) -> None:
    browser = signed_in_browser(cluster)
    try:
        old = cluster.make_due()
        assert cluster.version() == 2  # the sign-in's save, then ours

        answers, seconds = burst(cluster, browser)
    finally:
        browser.close()
    report("50 calls, expired token", answers, seconds, cluster)

    statuses = Counter(answer.status for answer in answers)
    assert statuses == {200: CALLS}, statuses
    assert {answer.body for answer in answers} == {answers[0].body}
    assert f'"sub": "{KEY}"' in answers[0].body
    assert_both_instances_answered(answers)
    # exactly one refresh reached the provider, with the old refresh token, and it succeeded
    (refresh,) = refreshes(cluster.idp)
    assert refresh.status_code == 200
    assert refresh.form["refresh_token"] == old.refresh_token
    assert len(cluster.issued) == 2  # the sign-in's token and the refresh's
    stored = assert_newest_stored(cluster, old)
    assert cluster.version() == 3  # one refresh saved
    # every call reached the API with the refreshed token (the old one is refused there)
    sent = [call["Authorization"] for call in cluster.idp.api_requests]
    assert sent == [f"Bearer {stored.access_token}"] * CALLS


def test_a_provider_fault_during_the_refresh_is_a_502_and_keeps_the_token(
    cluster: Cluster,
) -> None:
    browser = signed_in_browser(cluster)
    try:
        old = cluster.make_due()
        version = cluster.version()

        # one call: the provider answers 500 to the refresh
        cluster.idp.fail_next_token("server_error")
        (failed,), _ = burst(cluster, browser, calls=1)
        assert failed.status == 502
        assert "The provider did not answer as expected" in failed.body  # the typed error's page
        assert old.access_token not in failed.body
        assert str(old.refresh_token) not in failed.body
        assert [r.status_code for r in refreshes(cluster.idp)] == [500]
        stored = cluster.stored()
        assert stored is not None
        assert (stored.access_token, stored.refresh_token) == (old.access_token, old.refresh_token)
        assert stored.expires_at == pytest.approx(time.time() - 1, abs=30)  # still due
        assert cluster.version() == version  # nothing written
        assert cluster.idp.api_requests == []

        # 50 at once, the first refresh failing again: that call alone is a 502; the next
        # one to take the lock refreshes with the kept refresh token, for all the others
        cluster.idp.fail_next_token("server_error")
        answers, seconds = burst(cluster, browser)
    finally:
        browser.close()
    report("50 calls, the first refresh answered 500", answers, seconds, cluster)

    assert Counter(answer.status for answer in answers) == {502: 1, 200: CALLS - 1}
    assert_both_instances_answered(answers)
    seen = refreshes(cluster.idp)
    assert [r.status_code for r in seen] == [500, 500, 200]
    assert {r.form["refresh_token"] for r in seen} == {old.refresh_token}
    stored = assert_newest_stored(cluster, old)
    assert cluster.version() == version + 1
    sent = [call["Authorization"] for call in cluster.idp.api_requests]
    assert sent == [f"Bearer {stored.access_token}"] * (CALLS - 1)
