"""DPoP-bound sign-ins (RFC 9449) through the extension: against panva's certified oidc-provider
with PAR, DPoP nonces and private_key_jwt required, and a downgrade from a real local server."""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from fault_server import Behaviour, FaultServer
from flask import Flask
from helpers import (
    MakeApp,
    callback_path,
    faulty_block,
    plain_block,
    sign_in,
    state_cookie_name,
)
from oidc_provider_server import OidcProviderServer

from flask_social_oauth2 import SocialOAuth2, signals
from flask_social_oauth2.config.settings import OAuth2Info, OAuth2Settings
from flask_social_oauth2.oauth import client_auth, dpop

Factory = Callable[..., OidcProviderServer]
REDIRECT = "http://localhost/authenticate/op"
KEY_PEM = (
    ec.generate_private_key(ec.SECP256R1())
    .private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    .decode()
)


@pytest.fixture(autouse=True)
def _fresh_nonces() -> Iterator[None]:
    dpop.nonces.clear()
    yield
    dpop.nonces.clear()


def client_settings() -> OAuth2Settings:
    return OAuth2Settings.from_config(
        {
            "accessTokenURL": "https://op.example/token",
            "redirectURL": "/authenticate/op",
            "clientID": "app",
            "clientSecret": KEY_PEM,
            "customProperties": {"tokenEndpointAuthMethod": "private_key_jwt", "keyID": "k1"},
        }
    )


def op_server(factory: Factory, **options: Any) -> OidcProviderServer:
    jwks = client_auth.public_jwks(client_settings())
    return factory(
        [
            {
                "client_id": "app",
                "token_endpoint_auth_method": "private_key_jwt",
                "token_endpoint_auth_signing_alg": "ES256",
                "jwks": jwks,
                "redirect_uris": [REDIRECT],
                "dpop_bound_access_tokens": True,
            }
        ],
        **options,
    )


def op_app(make_app: MakeApp, server: OidcProviderServer, tmp_path: Path, **custom: str) -> Flask:
    block = {
        "accessTokenURL": f"{server.issuer}/token",
        "redirectURL": "/authenticate/op",
        "clientID": "app",
        "clientSecret": KEY_PEM,
        "scope": "openid email",
        "customProperties": {
            "issuer": server.issuer,
            "tokenEndpointAuthMethod": "private_key_jwt",
            "keyID": "k1",
            "dpop": "true",
            "apiBaseURL": server.issuer,
            **custom,
        },
    }
    store = f"sqlite:///{tmp_path / 'tokens.sqlite3'}"
    app = make_app({"op": block}, SOCIAL_OAUTH2_TOKEN_STORE=store)
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension

    @app.get("/me")
    def me() -> Any:
        answer = social.api("op").get("me")
        return {
            "status": answer.status_code,
            "sub": answer.json().get("sub"),
            "challenge": answer.headers.get("WWW-Authenticate"),
        }

    return app


def signed_in_client(app: Flask, server: OidcProviderServer) -> tuple[Any, str]:
    """A client signed in with the provider ``op`` at ``server``, and the state cookie its
    sign-in carried."""
    client = app.test_client()
    cookies: list[str] = []

    def started(location: str) -> None:
        cookie = client.get_cookie(state_cookie_name(app))
        assert cookie is not None
        cookies.append(cookie.value)

    finished = sign_in(
        client, "op", authorize=lambda url: server.authorize(url, REDIRECT), on_start=started
    )
    assert finished.status_code == 302, finished.text
    return client, cookies[0]


def cookie_payload(value: str) -> str:
    """The readable payload of an itsdangerous cookie (signed, not encrypted)."""
    body = value.split(".")[0]
    compressed = body.startswith(".")
    raw = base64.urlsafe_b64decode(body.lstrip(".") + "=" * (-len(body) % 4))
    return (zlib.decompress(raw) if compressed else raw).decode()


def test_a_dpop_sign_in_with_par_private_key_jwt_and_server_nonces(
    make_app: MakeApp,
    oidc_provider_factory: Factory,
    captured_logs: list[logging.LogRecord],
    tmp_path: Path,
) -> None:
    server = op_server(oidc_provider_factory, par_required=True, dpop_nonce_required=True)
    app = op_app(make_app, server, tmp_path)
    client, state_value = signed_in_client(app, server)
    log = server.log()
    by_route = {entry["route"]: entry for entry in log if entry.get("route")}
    pushed = [entry for entry in log if entry.get("route") == "pushed_authorization_request"]
    assert [entry["status"] for entry in pushed] == [400, 201]  # asked for a nonce, then took it
    assert all(entry["dpop"] for entry in pushed)
    tokens = [entry for entry in log if entry.get("route") == "token"]
    assert [entry["status"] for entry in tokens] == [200]
    assert by_route["userinfo"]["status"] == 200
    assert by_route["userinfo"]["authorization_scheme"] == "DPoP"
    proofs = [entry["dpop_jti"] for entry in log if entry.get("dpop")]
    assertions = [entry["client_assertion_jti"] for entry in log if entry.get("client_assertion")]
    assert len(proofs) == len(set(proofs)) >= 4
    assert len(assertions) == len(set(assertions)) >= 3  # PAR twice, token once: each fresh
    me = client.get("/me").json
    assert me["status"] == 200, me

    with app.app_context():
        store = app.extensions["social_oauth2"].token_store
        (row,) = store.engine.connect().execute(store.table.select()).all()
        info = store.load("op", row.provider_key)
    assert info is not None
    assert info.token_type == "DPoP"
    assert info.dpop_key is not None
    private_d = json.loads(info.dpop_key)["d"]
    assert private_d not in repr(info)
    assert private_d not in cookie_payload(state_value)  # encrypted in the state cookie
    assert private_d not in (row.tokens or "")
    assert all(private_d not in record.getMessage() for record in captured_logs)


def test_api_calls_follow_a_nonce_that_changes_and_refresh_with_dpop(
    make_app: MakeApp, oidc_provider_factory: Factory, tmp_path: Path
) -> None:
    server = op_server(oidc_provider_factory, par_required=True, dpop_nonce_required=True)
    app = op_app(make_app, server, tmp_path)
    refreshed: list[OAuth2Info] = []

    def on_update(sender: Flask, **data: Any) -> None:
        refreshed.append(data["info"])

    signals.token_updated.connect(on_update, app)
    client, _ = signed_in_client(app, server)
    server.rotate_dpop_nonce()  # the nonce changes mid-session
    server.clear_log()
    me = client.get("/me").json
    assert me is not None
    assert me["status"] == 200
    userinfo = [entry["status"] for entry in server.log() if entry.get("route") == "userinfo"]
    assert userinfo in ([401, 200], [200])  # asked again at most once
    with app.app_context():
        store = app.extensions["social_oauth2"].token_store
        (row,) = store.engine.connect().execute(store.table.select()).all()
        info = store.load("op", row.provider_key)
        assert info is not None
        store.save("op", row.provider_key, dataclasses.replace(info, expires_at=time.time() - 1))
    server.clear_log()
    assert client.get("/me").json["status"] == 200
    (refresh,) = [entry for entry in server.log() if entry.get("route") == "token"][-1:]
    assert refresh["status"] == 200
    assert refresh["dpop"]
    assert refreshed
    assert refreshed[0].token_type == "DPoP"
    assert refreshed[0].dpop_key == info.dpop_key  # the tokens stay bound to the same key


def test_without_par_the_key_is_named_in_the_authorization_request(
    make_app: MakeApp, oidc_provider_factory: Factory, tmp_path: Path
) -> None:
    server = op_server(oidc_provider_factory, par_required=False, dpop_nonce_required=True)
    app = op_app(make_app, server, tmp_path, pushedAuthorization="off")
    client = app.test_client()
    started = client.get("/authenticate/op")
    query = parse_qs(urlsplit(started.headers["Location"]).query)
    assert len(query["dpop_jkt"][0]) == 43  # a SHA-256 thumbprint, base64url
    callback = server.authorize(started.headers["Location"], REDIRECT)
    assert client.get(callback_path(callback)).status_code == 302
    me = client.get("/me").json
    assert me is not None
    assert me["status"] == 200


def test_a_bearer_answer_to_a_dpop_request_is_refused(
    make_app: MakeApp, fault_server: FaultServer
) -> None:
    fault_server.set(
        "/token",
        Behaviour.json({"access_token": "at-1", "token_type": "Bearer", "expires_in": 60}),
    )
    block = faulty_block(fault_server, dpop="true")
    app = make_app({"faulty": block})
    client = app.test_client()
    started = client.get("/authenticate/faulty")
    query = parse_qs(urlsplit(started.headers["Location"]).query)
    answer = client.get(f"/authenticate/faulty?code=c&state={query['state'][0]}")
    assert answer.status_code == 502
    (token_request,) = [r for r in fault_server.requests if r.path == "/token"]
    assert "DPoP" in token_request.headers
    assert not any(r.path == "/userinfo" for r in fault_server.requests)
    with client.session_transaction() as session:
        assert "social_profile" not in session


def test_dpop_must_be_true_or_false(make_app: MakeApp, fault_server: FaultServer) -> None:
    from flask_social_oauth2.errors import ConfigurationError

    block = faulty_block(fault_server, dpop="yes")
    with pytest.raises(ConfigurationError, match=r"customProperties\.dpop"):
        make_app({"faulty": block})


def test_a_dpop_provider_takes_no_posted_code(make_app: MakeApp, fault_server: FaultServer) -> None:
    block = plain_block(fault_server, "spa", dpop="true")
    app = make_app({"spa": block})
    answer = app.test_client().post(
        "/authenticate/spa", json={"code": "c", "code_verifier": "v" * 43}
    )
    assert answer.status_code == 400
    assert fault_server.requests == []
