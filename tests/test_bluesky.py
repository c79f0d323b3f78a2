"""Sign in with Bluesky through the extension, against the real AT Protocol PDS and PLC on
loopback (the ``atproto_server`` fixture), with the loopback development client."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest
from atproto_server import (
    AtprotoServer,
    reject_authorization,
    sign_in_and_consent,
    sign_in_and_consent_by_form_post,
    sign_in_with_handle,
)
from fault_server import Behaviour, FaultServer
from flask import Flask
from helpers import MakeApp, assert_not_logged, callback_path, parse_form

from flask_social_oauth2 import OAuth2Info, SocialOAuth2, signals
from flask_social_oauth2.errors import AccessDeniedError, StateError
from flask_social_oauth2.oauth import dpop
from flask_social_oauth2.providers.bluesky import BlueskyProvider

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
    store = app.extensions["social_oauth2"].token_store
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


def test_alice_signs_in_with_bluesky_by_form_post(
    make_app: MakeApp, atproto_server: AtprotoServer, tmp_path: Path
) -> None:
    """``customProperties.responseMode: form_post``: the pushed request asks for it, the PDS's
    page POSTs the callback, and the hop ends it as a GET callback would."""
    alice = atproto_server.accounts["alice.test"]
    app = bluesky_app(make_app, atproto_server, tmp_path, responseMode="form_post")
    seen = signed_in(app)
    client = app.test_client()
    started = start(client, "alice.test")
    assert started.status_code == 302, started.text
    fields = sign_in_and_consent_by_form_post(
        started.headers["Location"], "alice.test", alice.password
    )
    assert set(fields) == {"code", "state", "iss"}
    hop = client.post("/authenticate/bluesky", data=fields, base_url=BASE_URL)
    assert hop.status_code == 200, hop.text
    finished = client.post(
        "/authenticate/bluesky", data=parse_form(hop.text).fields, base_url=BASE_URL
    )
    assert finished.status_code == 302, finished.text
    (event,) = seen
    assert event["profile"].provider_key == alice.did
    assert event["info"].token_type == "DPoP"


def test_an_expired_token_is_refreshed_at_the_accounts_server(
    make_app: MakeApp, atproto_server: AtprotoServer, tmp_path: Path
) -> None:
    alice = atproto_server.accounts["alice.test"]
    app = bluesky_app(make_app, atproto_server, tmp_path)
    client = app.test_client()
    finished = sign_in_with_handle(client, "alice.test", alice.password, BASE_URL)
    assert finished.status_code == 302, finished.text
    store = app.extensions["social_oauth2"].token_store
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


def test_unlinking_revokes_the_tokens_at_the_accounts_server(
    make_app: MakeApp, atproto_server: AtprotoServer, tmp_path: Path
) -> None:
    alice = atproto_server.accounts["alice.test"]
    app = bluesky_app(make_app, atproto_server, tmp_path)
    client = app.test_client()
    finished = sign_in_with_handle(client, "alice.test", alice.password, BASE_URL)
    assert finished.status_code == 302, finished.text
    store = app.extensions["social_oauth2"].token_store
    with app.app_context():
        info = store.load("bluesky", alice.did)
    assert info.params["revocation_endpoint"] == f"{atproto_server.pds_url}/oauth/revoke"
    assert session_status(app, atproto_server.pds_url, info) == 200
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension
    with app.test_request_context():
        social.unlink("bluesky", alice.did)
    assert kept_rows(app) == []
    assert session_status(app, atproto_server.pds_url, info) == 401


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


def issued_tokens(monkeypatch: pytest.MonkeyPatch) -> list[OAuth2Info]:
    """Every token a code exchange of the bluesky provider receives, as the sign-in reads it
    (with its DPoP key): a spy, the answers are the server's."""
    seen: list[OAuth2Info] = []
    original = BlueskyProvider.received_token

    def spy(self: BlueskyProvider, info: OAuth2Info) -> OAuth2Info:
        seen.append(info)
        return original(self, info)

    monkeypatch.setattr(BlueskyProvider, "received_token", spy)
    return seen


def session_status(app: Flask, pds: str, info: OAuth2Info) -> int:
    """The PDS's answer to getSession with ``info``'s access token and DPoP key."""
    provider = app.extensions["social_oauth2"].providers["bluesky"]
    with app.app_context():
        answer = provider.request_answer("GET", f"{pds}/xrpc/com.atproto.server.getSession", info)
    status: int = answer.status
    return status


def test_consenting_as_another_account_signs_nobody_in(
    make_app: MakeApp,
    atproto_server: AtprotoServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SECURITY 35: a flow started for alice.test that comes back with bob.test's tokens; the
    dropped tokens are revoked at the PDS, so they no longer work."""
    bob = atproto_server.accounts["bob.test"]
    tokens = issued_tokens(monkeypatch)
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
    (dropped,) = tokens
    assert dropped.params["sub"] == bob.did
    assert (
        session_status(app, atproto_server.pds_url, dropped) == 401
    )  # revoked: without the revocation, 200


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


def test_an_account_the_plc_directory_does_not_know_is_a_400_saying_so(
    make_app: MakeApp, atproto_server: AtprotoServer, tmp_path: Path, fault_server: FaultServer
) -> None:
    """A handle naming a DID the (real) PLC directory answers 404 for, or that DID typed: the
    person's mistake, so a 400 page that says no account was found, and no flow started."""
    unknown = "did:plc:aaaaaaaaaaaaaaaaaaaaaaaa"
    fault_server.set("/xrpc/com.atproto.identity.resolveHandle", Behaviour.json({"did": unknown}))
    app = bluesky_app(make_app, atproto_server, tmp_path, handleResolver=fault_server.url)
    client = app.test_client()
    for typed in ("carol.test", unknown):
        answer = start(client, typed)
        assert answer.status_code == 400, answer.text
        assert "No account was found for that handle or DID." in answer.text
        assert "Set-Cookie" not in answer.headers


def test_a_failing_plc_directory_stays_a_502(
    make_app: MakeApp, atproto_server: AtprotoServer, tmp_path: Path, fault_server: FaultServer
) -> None:
    alice = atproto_server.accounts["alice.test"]
    fault_server.set(f"/{alice.did}", Behaviour.json({"error": "oops"}, status=503))
    app = bluesky_app(make_app, atproto_server, tmp_path, plcURL=fault_server.url)
    answer = start(app.test_client(), "alice.test")
    assert answer.status_code == 502, answer.text
    assert "No account was found" not in answer.text


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


TOKEN_ANSWER: dict[str, Any] = {
    "access_token": "fault-access-token",
    "token_type": "DPoP",
    "refresh_token": "fault-refresh-token",
    "expires_in": 3600,
    "sub": "did:plc:ewvi7nxzyoun6zhxrhs64oiz",
}


def fault_entryway(server: FaultServer, token: dict[str, Any], revoke: Behaviour) -> None:
    """``server`` as an AT Protocol authorization server (the entryway of a flow started
    without a handle): its metadata, a PAR endpoint that accepts, ``token`` as its token
    answer and ``revoke`` as its revocation endpoint."""
    server.set(
        "/.well-known/oauth-authorization-server",
        Behaviour.json(
            {
                "issuer": server.url,
                "authorization_endpoint": f"{server.url}/authorize",
                "token_endpoint": f"{server.url}/token",
                "pushed_authorization_request_endpoint": f"{server.url}/par",
                "revocation_endpoint": f"{server.url}/revoke",
                "code_challenge_methods_supported": ["S256"],
                "dpop_signing_alg_values_supported": ["ES256"],
                "authorization_response_iss_parameter_supported": True,
            }
        ),
    )
    server.set(
        "/par",
        Behaviour.json(
            {"request_uri": "urn:ietf:params:oauth:request_uri:r", "expires_in": 60}, 201
        ),
    )
    server.set("/token", Behaviour.json(token))
    server.set("/revoke", revoke)


def fault_app(make_app: MakeApp, server: FaultServer, tmp_path: Path) -> Flask:
    block = {
        "authorizationURL": f"{server.url}/authorize",
        "accessTokenURL": f"{server.url}/token",
        "redirectURL": "/authenticate/bluesky",
        "clientID": "http://localhost",
        "clientSecret": "unused",
        "customProperties": {"allowLoopback": "true"},
    }
    store = f"sqlite:///{tmp_path / 'tokens.sqlite3'}"
    return make_app({"bluesky": block}, SOCIAL_OAUTH2_TOKEN_STORE=store)


def finish_at_fault_server(client: Any, server: FaultServer) -> Any:
    """Start without a handle (at ``server``), then come back with a code and the state and
    ``iss`` the server would send."""
    started = start(client, None)
    assert started.status_code == 302, started.text
    (pushed,) = [request for request in server.requests if request.path == "/par"]
    state = pushed.form()["state"][0]
    query = {"code": "fault-code", "state": state, "iss": server.url}
    return client.get("/authenticate/bluesky", query_string=query, base_url=BASE_URL)


@pytest.mark.parametrize("scope", [None, "transition:generic", "atprotocol transition:generic", ""])
def test_a_token_without_the_atproto_scope_is_refused_and_revoked(
    make_app: MakeApp, fault_server: FaultServer, tmp_path: Path, scope: str | None
) -> None:
    """The AT Protocol requires ``atproto`` in the granted scope: without it the answer is
    not an AT Protocol token (502, nobody signed in), and the tokens dropped are revoked."""
    token = TOKEN_ANSWER if scope is None else {**TOKEN_ANSWER, "scope": scope}
    fault_entryway(fault_server, token, Behaviour.json({}))
    app = fault_app(make_app, fault_server, tmp_path)
    seen = signed_in(app)
    finished = finish_at_fault_server(app.test_client(), fault_server)
    assert finished.status_code == 502, finished.text
    assert "fault-access-token" not in finished.text
    assert seen == []
    assert kept_rows(app) == []
    (revocation,) = [request for request in fault_server.requests if request.path == "/revoke"]
    form = revocation.form()
    assert form["token"] == ["fault-refresh-token"]
    assert form["client_id"][0].startswith("http://localhost?")
    assert "DPoP" in revocation.headers


def test_a_failed_revocation_of_dropped_tokens_is_a_warning(
    make_app: MakeApp,
    fault_server: FaultServer,
    tmp_path: Path,
    captured_logs: list[logging.LogRecord],
) -> None:
    fault_entryway(fault_server, TOKEN_ANSWER, Behaviour.json({"error": "server_error"}, 500))
    app = fault_app(make_app, fault_server, tmp_path)
    finished = finish_at_fault_server(app.test_client(), fault_server)
    assert finished.status_code == 502, finished.text
    assert fault_server.count("/revoke") == 1
    warnings = [
        record.getMessage()
        for record in captured_logs
        if record.levelno == logging.WARNING and "could not be revoked" in record.getMessage()
    ]
    assert len(warnings) == 1, warnings
    assert_not_logged(captured_logs, ["fault-access-token", "fault-refresh-token", "fault-code"])


@pytest.mark.parametrize("right_iss", [True, False])
def test_a_denied_sign_in_without_a_handle_checks_the_entryways_iss(
    make_app: MakeApp, atproto_server: AtprotoServer, tmp_path: Path, right_iss: bool
) -> None:
    """The user denies at the entryway (the PDS's own page): the error callback's ``iss``
    must be the entryway's issuer bound in the flow; then the denied page, else a
    ``StateError``."""
    app = bluesky_app(make_app, atproto_server, tmp_path)
    failures: list[Exception] = []

    def on_failure(sender: Any, **extra: Any) -> None:
        failures.append(extra["error"])

    signals.authentication_failed.connect(on_failure, app, weak=False)
    client = app.test_client()
    started = start(client, None)
    assert started.status_code == 302, started.text
    callback = reject_authorization(started.headers["Location"])
    query = dict(parse_qsl(urlsplit(callback).query))
    assert query["error"] == "access_denied"
    assert query["iss"] == atproto_server.pds_url
    if not right_iss:
        callback = replace_query(callback, iss="http://127.0.0.1:9")
    else:
        callback = callback_path(callback)
    finished = client.get(callback, base_url=BASE_URL)
    if right_iss:
        assert finished.status_code == 403, finished.text
        assert [type(error) for error in failures] == [AccessDeniedError]
    else:
        assert finished.status_code == 400, finished.text
        assert [type(error) for error in failures] == [StateError]
        assert "another issuer" in str(failures[0])
