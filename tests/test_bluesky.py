"""Sign in with Bluesky through the extension, against the real AT Protocol PDS and PLC on
loopback (the ``atproto_server`` fixture), with the loopback development client."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest
from atproto_server import AtprotoServer, sign_in_and_consent
from fault_server import FaultServer
from flask import Flask
from helpers import MakeApp, callback_path

from flask_social_oauth2 import SocialOAuth2, dpop, signals
from flask_social_oauth2.errors import StateError

pytestmark = pytest.mark.atproto

BASE_URL = "http://127.0.0.1:5000"


@pytest.fixture(autouse=True)
def _fresh_nonces() -> Iterator[None]:
    dpop.nonces.clear()
    yield
    dpop.nonces.clear()


def bluesky_app(make_app: MakeApp, server: AtprotoServer, tmp_path: Path, **custom: str) -> Flask:
    block = {
        "authorizationURL": f"{server.pds_url}/oauth/authorize",
        "accessTokenURL": f"{server.pds_url}/oauth/token",
        "redirectURL": "/authenticate/bluesky",
        "clientID": "http://localhost",
        "clientSecret": "unused",
        "customProperties": {
            "handleResolver": server.pds_url,
            "plcURL": server.plc_url,
            "allowLoopback": "true",
            **custom,
        },
    }
    store = f"sqlite:///{tmp_path / 'tokens.sqlite3'}"
    app = make_app({"bluesky": block}, SOCIAL_OAUTH2_TOKEN_STORE=store)
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension

    @app.get("/session/<key>")
    def session(key: str) -> Any:
        answer = social.api("bluesky", key).get("xrpc/com.atproto.server.getSession")
        return {"status": answer.status_code, "body": answer.json()}

    return app


def kept_rows(app: Flask) -> list[Any]:
    store = app.extensions["social_oauth2"].runtime.token_store
    with store.engine.connect() as connection:
        return list(connection.execute(store.table.select()).all())


def signed_in(app: Flask) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []

    def on_sign_in(sender: Any, **extra: Any) -> None:
        seen.append(extra)

    signals.authenticated.connect(on_sign_in, app, weak=False)
    return seen


def start(client: Any, handle: str | None) -> Any:
    query = {} if handle is None else {"handle": handle}
    return client.get("/authenticate/bluesky", query_string=query, base_url=BASE_URL)


def test_alice_signs_in_with_bluesky(
    make_app: MakeApp, atproto_server: AtprotoServer, tmp_path: Path
) -> None:
    alice = atproto_server.accounts["alice.test"]
    app = bluesky_app(make_app, atproto_server, tmp_path)
    seen = signed_in(app)
    client = app.test_client()
    started = start(client, "alice.test")
    assert started.status_code == 302, started.text
    location = started.headers["Location"]
    query = dict(parse_qsl(urlsplit(location).query))
    assert set(query) == {"client_id", "request_uri"}
    assert query["client_id"] == "http://localhost?" + urlencode(
        {
            "redirect_uri": "http://127.0.0.1:5000/authenticate/bluesky",
            "scope": "atproto transition:generic",
        }
    )
    callback = sign_in_and_consent(location, "alice.test", alice.password)
    assert dict(parse_qsl(urlsplit(callback).query))["iss"] == atproto_server.pds_url
    finished = client.get(callback_path(callback), base_url=BASE_URL)
    assert finished.status_code == 302, finished.text
    (event,) = seen
    profile, info = event["profile"], event["info"]
    assert profile.provider_key == alice.did
    assert profile.username == "alice.test"
    assert info.token_type == "DPoP"
    assert info.params["did"] == alice.did
    assert info.params["pds"] == atproto_server.pds_url
    assert info.params["issuer"] == atproto_server.pds_url
    (row,) = kept_rows(app)
    assert row.provider_key == alice.did

    answer = client.get(f"/session/{alice.did}", base_url=BASE_URL)
    assert answer.status_code == 200, answer.text
    assert answer.json == {
        "status": 200,
        "body": {"did": alice.did, "handle": "alice.test", "active": True},
    }


def test_an_expired_token_is_refreshed_at_the_accounts_server(
    make_app: MakeApp, atproto_server: AtprotoServer, tmp_path: Path
) -> None:
    alice = atproto_server.accounts["alice.test"]
    app = bluesky_app(make_app, atproto_server, tmp_path)
    client = app.test_client()
    started = start(client, "alice.test")
    callback = sign_in_and_consent(started.headers["Location"], "alice.test", alice.password)
    assert client.get(callback_path(callback), base_url=BASE_URL).status_code == 302
    store = app.extensions["social_oauth2"].runtime.token_store
    with app.app_context():
        info = store.load("bluesky", alice.did)
        store.save("bluesky", alice.did, dataclasses.replace(info, expires_at=time.time() - 1))
    answer = client.get(f"/session/{alice.did}", base_url=BASE_URL)
    assert answer.status_code == 200, answer.text
    body = answer.json
    assert body is not None
    assert body["body"]["did"] == alice.did
    with app.app_context():
        renewed = store.load("bluesky", alice.did)
    assert renewed.access_token != info.access_token
    assert renewed.params["pds"] == atproto_server.pds_url
    assert renewed.token_type == "DPoP"


def test_a_sign_in_without_a_handle_starts_at_the_entryway(
    make_app: MakeApp, atproto_server: AtprotoServer, tmp_path: Path
) -> None:
    bob = atproto_server.accounts["bob.test"]
    app = bluesky_app(make_app, atproto_server, tmp_path)
    seen = signed_in(app)
    client = app.test_client()
    started = start(client, None)
    assert started.status_code == 302, started.text
    callback = sign_in_and_consent(started.headers["Location"], "bob.test", bob.password)
    finished = client.get(callback_path(callback), base_url=BASE_URL)
    assert finished.status_code == 302, finished.text
    (event,) = seen
    assert event["profile"].provider_key == bob.did
    assert event["profile"].username == "bob.test"


def test_consenting_as_another_account_signs_nobody_in(
    make_app: MakeApp, atproto_server: AtprotoServer, tmp_path: Path
) -> None:
    """SECURITY 35: a flow started for alice.test that comes back with bob.test's tokens."""
    bob = atproto_server.accounts["bob.test"]
    app = bluesky_app(make_app, atproto_server, tmp_path)
    seen = signed_in(app)
    failures: list[Exception] = []

    def on_failure(sender: Any, **extra: Any) -> None:
        failures.append(extra["error"])

    signals.authentication_failed.connect(on_failure, app, weak=False)
    client = app.test_client()
    started = start(client, "alice.test")
    assert started.status_code == 302, started.text
    callback = sign_in_and_consent(started.headers["Location"], "bob.test", bob.password)
    finished = client.get(callback_path(callback), base_url=BASE_URL)
    assert 400 <= finished.status_code < 500, finished.text
    assert [type(error) for error in failures] == [StateError]
    assert "another account" in str(failures[0])
    assert seen == []
    assert kept_rows(app) == []


def replace_query(callback: str, **changes: str | None) -> str:
    parts = urlsplit(callback)
    query = dict(parse_qsl(parts.query))
    for name, value in changes.items():
        if value is None:
            query.pop(name, None)
        else:
            query[name] = value
    return callback_path(urlunsplit(parts._replace(query=urlencode(query))))


@pytest.mark.parametrize("iss", [None, "http://127.0.0.1:9/", "https://bsky.social"])
def test_a_callback_without_the_servers_iss_is_refused(
    make_app: MakeApp, atproto_server: AtprotoServer, tmp_path: Path, iss: str | None
) -> None:
    alice = atproto_server.accounts["alice.test"]
    app = bluesky_app(make_app, atproto_server, tmp_path)
    seen = signed_in(app)
    client = app.test_client()
    started = start(client, "alice.test")
    callback = sign_in_and_consent(started.headers["Location"], "alice.test", alice.password)
    finished = client.get(replace_query(callback, iss=iss), base_url=BASE_URL)
    assert 400 <= finished.status_code < 500, finished.text
    assert seen == []
    assert kept_rows(app) == []


@pytest.mark.parametrize("handle", ["not a handle", "-x-.test", "a" * 300, "alice..test", "@"])
def test_a_garbage_handle_is_a_400(
    make_app: MakeApp, atproto_server: AtprotoServer, tmp_path: Path, handle: str
) -> None:
    app = bluesky_app(make_app, atproto_server, tmp_path)
    client = app.test_client()
    answer = start(client, handle)
    assert answer.status_code == 400, answer.text


def test_a_handle_resolving_to_loopback_is_refused_without_allow_loopback(
    make_app: MakeApp, atproto_server: AtprotoServer, tmp_path: Path, fault_server: FaultServer
) -> None:
    """SECURITY 36: without allowLoopback no resolution step reaches a loopback server."""
    app = bluesky_app(
        make_app,
        atproto_server,
        tmp_path,
        handleResolver=fault_server.url,
        allowLoopback="false",
    )
    client = app.test_client()
    answer = start(client, "alice.example.com")
    assert answer.status_code in (400, 502), answer.text
    assert fault_server.count() == 0
