"""Front-Channel Logout 1.0: ``GET <url rule>/frontchannel-logout?iss=...&sid=...`` ends the
sessions of that provider session, framed only by the provider; a foreign ``iss`` ends nothing.
Against a hand-signed OpenID provider on loopback and a real SQLite store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fault_server import FaultServer
from flask import Flask
from helpers import FakeOpenIDProvider, MakeApp, backchannel_app, sign_in_fake
from joserfc.jwk import RSAKey

PATH = "/authenticate/fake/frontchannel-logout"


@pytest.fixture
def fake(fault_server: FaultServer, rsa_key: RSAKey) -> FakeOpenIDProvider:
    return FakeOpenIDProvider(fault_server, rsa_key, userinfo=False)


@pytest.fixture
def app(make_app: MakeApp, fault_server: FaultServer, tmp_path: Path) -> Flask:
    return backchannel_app(
        make_app,
        fault_server,
        f"sqlite:///{tmp_path / 'sessions.sqlite3'}",
        backchannelLogout="false",
        frontchannelLogout="true",
    )


def test_the_providers_iss_and_sid_end_the_session(
    app: Flask, fake: FakeOpenIDProvider, rsa_key: RSAKey
) -> None:
    browser = app.test_client()
    sign_in_fake(browser, fake, rsa_key)
    # the provider's page frames it in the browser; the app's cookies need not come along
    answer = app.test_client().get(PATH, query_string={"iss": fake.issuer, "sid": "sid-1"})
    assert answer.status_code == 200
    assert answer.headers["Cache-Control"] == "no-store"
    policy = answer.headers["Content-Security-Policy"]
    assert f"frame-ancestors {fake.issuer}" in policy
    assert "default-src 'none'" in policy
    assert "X-Frame-Options" not in answer.headers
    assert "Signed out" in answer.text
    assert browser.get("/me").json == {"identities": {}}


@pytest.mark.parametrize(
    "query",
    [
        {"iss": "https://evil.example", "sid": "sid-1"},
        {"sid": "sid-1"},
        {"iss": "", "sid": "sid-1"},
        {"iss": "ISSUER"},
        {"iss": "ISSUER", "sid": ""},
        {"iss": "ISSUER", "sid": "x" * 600},
    ],
)
def test_a_foreign_iss_or_no_sid_ends_nothing(
    app: Flask, fake: FakeOpenIDProvider, rsa_key: RSAKey, query: dict[str, str]
) -> None:
    browser = app.test_client()
    sign_in_fake(browser, fake, rsa_key)
    query = {key: fake.issuer if value == "ISSUER" else value for key, value in query.items()}
    answer = app.test_client().get(PATH, query_string=query)
    assert answer.status_code == 400
    assert f"frame-ancestors {fake.issuer}" in answer.headers["Content-Security-Policy"]
    assert browser.get("/me").json == {"identities": {"fake": "user-1"}}


def test_a_doubled_iss_is_refused(app: Flask, fake: FakeOpenIDProvider, rsa_key: RSAKey) -> None:
    browser = app.test_client()
    sign_in_fake(browser, fake, rsa_key)
    query = f"iss={fake.issuer}&iss={fake.issuer}&sid=sid-1"
    assert app.test_client().get(f"{PATH}?{query}").status_code == 400
    assert browser.get("/me").json == {"identities": {"fake": "user-1"}}


def test_only_blocks_that_turn_it_on_answer(
    make_app: MakeApp, fault_server: FaultServer, fake: FakeOpenIDProvider, tmp_path: Path
) -> None:
    off = backchannel_app(make_app, fault_server, f"sqlite:///{tmp_path / 'off.sqlite3'}")
    answer: Any = off.test_client().get(PATH, query_string={"iss": fake.issuer, "sid": "s"})
    assert answer.status_code == 404
    assert off.test_client().get("/authenticate/nobody/frontchannel-logout").status_code == 404
