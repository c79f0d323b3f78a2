"""Sign in with Bluesky as a published (confidential) client: the client metadata document and
JWK set the extension serves, and whole sign-ins against the real AT Protocol PDS, which
fetches them from the app served over HTTP on loopback (the ``atproto_server_http_clients``
fixture's test seam)."""

from __future__ import annotations

import base64
import dataclasses
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from atproto_server import AtprotoServer, sign_in_and_consent, sign_in_with_handle
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from flask import Flask, request
from helpers import MakeApp, callback_path, live_server
from joserfc.jwk import ECKey

from flask_social_oauth2 import SocialOAuth2, signals
from flask_social_oauth2.cli import social_cli
from flask_social_oauth2.errors import ConfigurationError, UnexpectedResponseError
from flask_social_oauth2.oauth import client_auth, dpop

BASE_URL = "http://127.0.0.1:5000"
DOCUMENT = "/authenticate/bluesky/client-metadata.json"
JWKS = "/authenticate/bluesky/jwks.json"


def pem(key: Any) -> str:
    text: str = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    return text


EC_PEM = pem(ec.generate_private_key(ec.SECP256R1()))
OTHER_EC_PEM = pem(ec.generate_private_key(ec.SECP256R1()))


@pytest.fixture(autouse=True)
def _fresh_nonces() -> Iterator[None]:
    dpop.nonces.clear()
    yield
    dpop.nonces.clear()


def published_block(pds_url: str, **changes: Any) -> dict[str, Any]:
    custom = changes.pop("customProperties", {})
    return {
        "authorizationURL": f"{pds_url}/oauth/authorize",
        "accessTokenURL": f"{pds_url}/oauth/token",
        "redirectURL": "/authenticate/bluesky",
        "clientID": DOCUMENT,
        "clientSecret": EC_PEM,
        "customProperties": {"allowLoopback": "true", **custom},
        **changes,
    }


def thumbprint(key_pem: str) -> str:
    return str(ECKey.import_key(key_pem).thumbprint())


# -- the served documents --------------------------------------------------------------------


def test_the_client_metadata_document_is_served(make_app: MakeApp) -> None:
    app = make_app({"bluesky": published_block("https://bsky.social")})
    answer = app.test_client().get(DOCUMENT, base_url=BASE_URL)
    assert answer.status_code == 200, answer.text
    assert answer.mimetype == "application/json"
    assert answer.headers["Cache-Control"] == "public, max-age=300"
    assert answer.json == {
        "client_id": f"{BASE_URL}{DOCUMENT}",
        "application_type": "web",
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "redirect_uris": [f"{BASE_URL}/authenticate/bluesky"],
        "scope": "atproto transition:generic",
        "dpop_bound_access_tokens": True,
        "token_endpoint_auth_method": "private_key_jwt",
        "token_endpoint_auth_signing_alg": "ES256",
        "jwks_uri": f"{BASE_URL}{JWKS}",
    }
    keys = app.test_client().get(JWKS, base_url=BASE_URL)
    assert keys.status_code == 200
    body: Any = keys.json
    (public,) = body["keys"]
    assert public["kid"] == thumbprint(EC_PEM)  # the AT Protocol wants a kid
    assert public["alg"] == "ES256"
    assert "d" not in public
    printed = app.test_cli_runner().invoke(social_cli, ["keys", "bluesky"])
    assert printed.exit_code == 0, printed.output
    assert json.loads(printed.output) == keys.json


def test_an_absolute_client_id_an_rsa_key_and_display_fields(make_app: MakeApp) -> None:
    client_id = "https://app.example.com/authenticate/bluesky/client-metadata.json"
    rsa_pem = pem(rsa.generate_private_key(public_exponent=65537, key_size=2048))
    display = {
        "clientName": "Example App",
        "clientURI": "https://app.example.com/",
        "logoURI": "https://app.example.com/logo.png",
        "tosURI": "https://app.example.com/terms",
        "policyURI": "https://app.example.com/privacy",
        "keyID": "key-2026",
    }
    block = published_block(
        "https://bsky.social",
        clientID=client_id,
        clientSecret=rsa_pem,
        redirectURL="https://app.example.com/authenticate/bluesky",
        scope="atproto",
        customProperties=display,
    )
    app = make_app({"bluesky": block})
    document: Any = app.test_client().get(DOCUMENT, base_url=BASE_URL).json
    assert document["client_id"] == client_id
    assert document["jwks_uri"] == "https://app.example.com/authenticate/bluesky/jwks.json"
    assert document["redirect_uris"] == ["https://app.example.com/authenticate/bluesky"]
    assert document["scope"] == "atproto"
    assert document["token_endpoint_auth_signing_alg"] == "RS256"
    assert document["client_name"] == "Example App"
    assert document["client_uri"] == "https://app.example.com/"
    assert document["logo_uri"] == "https://app.example.com/logo.png"
    assert document["tos_uri"] == "https://app.example.com/terms"
    assert document["policy_uri"] == "https://app.example.com/privacy"
    served: Any = app.test_client().get(JWKS, base_url=BASE_URL).json
    (public,) = served["keys"]
    assert (public["kid"], public["alg"], public["kty"]) == ("key-2026", "RS256", "RSA")


def test_no_document_for_the_loopback_client_or_another_provider(make_app: MakeApp) -> None:
    loopback = published_block("https://bsky.social", clientID="http://localhost")
    loopback["clientSecret"] = "unused"
    github = {
        "authorizationURL": "https://github.com/login/oauth/authorize",
        "accessTokenURL": "https://github.com/login/oauth/access_token",
        "redirectURL": "/authenticate/github",
        "clientID": "i",
        "clientSecret": "s",
    }
    app = make_app({"bluesky": loopback, "github": github})
    client = app.test_client()
    for path in (
        DOCUMENT,
        JWKS,
        "/authenticate/github/client-metadata.json",
        "/authenticate/nobody/client-metadata.json",
    ):
        assert client.get(path, base_url=BASE_URL).status_code == 404, path


@pytest.mark.parametrize(
    ("changes", "key", "words"),
    [
        ({"clientSecret": "not a key"}, "clientSecret", "private_key_jwt"),
        ({"clientSecret": OTHER_EC_PEM.replace("PRIVATE", "PUBLIC")}, "clientSecret", "private"),
        (
            {"customProperties": {"tokenEndpointAuthMethod": "client_secret_post"}},
            "customProperties.tokenEndpointAuthMethod",
            "must be private_key_jwt for a published client",
        ),
        ({"clientID": "my-bluesky-app"}, "clientID", "client metadata document"),
        (
            {"clientID": "https://app.example.com/a/client-metadata.json"}
            | {"customProperties": {"clientURI": "https://other.example.com/"}},
            "customProperties.clientURI",
            "origin",
        ),
        (
            {
                "clientID": "http://localhost",
                "customProperties": {"tokenEndpointAuthMethod": "private_key_jwt"},
            },
            "customProperties.tokenEndpointAuthMethod",
            "must be none for the loopback client",
        ),
    ],
)
def test_a_published_client_that_cannot_sign_is_a_configuration_error(
    make_app: MakeApp, changes: dict[str, Any], key: str, words: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        make_app({"bluesky": published_block("https://bsky.social", **changes)})
    problems = [(p.provider, p.key) for p in raised.value.problems]
    assert ("bluesky", key) in problems, raised.value
    assert words in str(raised.value)
    assert "BEGIN" not in str(raised.value)


# -- against the real PDS --------------------------------------------------------------------


def published_app(
    make_app: MakeApp, server: AtprotoServer, tmp_path: Path
) -> tuple[Flask, list[str]]:
    """The app with a published bluesky client, and the paths the PDS fetched from it."""
    block = published_block(
        server.pds_url,
        customProperties={"handleResolver": server.pds_url, "plcURL": server.plc_url},
    )
    store = f"sqlite:///{tmp_path / 'tokens.sqlite3'}"
    app = make_app({"bluesky": block}, SOCIAL_OAUTH2_TOKEN_STORE=store)
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension
    fetched: list[str] = []

    @app.before_request
    def count_fetches() -> None:
        if request.path in (DOCUMENT, JWKS):
            fetched.append(request.path)

    @app.get("/session/<key>")
    def session(key: str) -> Any:
        answer = social.api("bluesky", key).get("xrpc/com.atproto.server.getSession")
        return {"status": answer.status_code, "body": answer.json()}

    return app, fetched


def assertions(monkeypatch: pytest.MonkeyPatch) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The header and claims of every client assertion made (a spy: they are sent as made)."""
    made: list[tuple[dict[str, Any], dict[str, Any]]] = []
    original = client_auth.credentials

    def spy(*args: Any, **kwargs: Any) -> client_auth.ClientCredentials:
        credentials = original(*args, **kwargs)
        fields = dict(credentials.fields)
        if "client_assertion" in fields:
            header, claims, _ = fields["client_assertion"].split(".")
            made.append((decoded(header), decoded(claims)))
        return credentials

    monkeypatch.setattr(client_auth, "credentials", spy)
    return made


def decoded(part: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    return value


@pytest.mark.atproto
def test_a_published_client_signs_in_with_private_key_jwt(
    make_app: MakeApp,
    atproto_server_http_clients: AtprotoServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = atproto_server_http_clients
    alice = server.accounts["alice.test"]
    made = assertions(monkeypatch)
    app, fetched = published_app(make_app, server, tmp_path)
    seen: list[dict[str, Any]] = []
    signals.authenticated.connect(lambda sender, **extra: seen.append(extra), app, weak=False)
    with live_server(app) as base_url:
        client = app.test_client()
        started = client.get("/authenticate/bluesky?handle=alice.test", base_url=base_url)
        assert started.status_code == 302, started.text
        query = dict(parse_qsl(urlsplit(started.headers["Location"]).query))
        assert query["client_id"] == f"{base_url}{DOCUMENT}"
        assert set(fetched) == {DOCUMENT, JWKS}  # the PDS read both to take the push
        callback = sign_in_and_consent(started.headers["Location"], "alice.test", alice.password)
        finished = client.get(callback_path(callback), base_url=base_url)
        assert finished.status_code == 302, finished.text
        (event,) = seen
        assert event["profile"].provider_key == alice.did
        assert event["profile"].username == "alice.test"
        info = event["info"]
        assert info.token_type == "DPoP"
        assert info.params["client_id"] == f"{base_url}{DOCUMENT}"
        answer = client.get(f"/session/{alice.did}", base_url=base_url)
        assert answer.status_code == 200, answer.text
        assert answer.json == {
            "status": 200,
            "body": {"did": alice.did, "handle": "alice.test", "active": True},
        }
    # the push (and its retry with the server's DPoP nonce) and the token request, each with
    # its own assertion for the bound issuer
    assert len(made) >= 2
    assert len({claims["jti"] for _, claims in made}) == len(made)
    for header, claims in made:
        assert (header["alg"], header["kid"]) == ("ES256", thumbprint(EC_PEM))
        assert claims["aud"] == server.pds_url
        assert claims["iss"] == claims["sub"] == f"{base_url}{DOCUMENT}"


@pytest.mark.atproto
def test_a_published_clients_token_is_refreshed_with_a_fresh_assertion(
    make_app: MakeApp,
    atproto_server_http_clients: AtprotoServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = atproto_server_http_clients
    alice = server.accounts["alice.test"]
    made = assertions(monkeypatch)
    app, _ = published_app(make_app, server, tmp_path)
    store = app.extensions["social_oauth2"].token_store
    with live_server(app) as base_url:
        client = app.test_client()
        finished = sign_in_with_handle(client, "alice.test", alice.password, base_url)
        assert finished.status_code == 302, finished.text
        with app.app_context():
            info = store.load("bluesky", alice.did)
            store.save("bluesky", alice.did, dataclasses.replace(info, expires_at=time.time() - 1))
        signed_in = len(made)
        answer = client.get(f"/session/{alice.did}", base_url=base_url)
        assert answer.status_code == 200, answer.text
        assert answer.json is not None
        assert answer.json["body"]["did"] == alice.did
        with app.app_context():
            renewed = store.load("bluesky", alice.did)
    assert renewed.access_token != info.access_token
    assert renewed.refresh_token != info.refresh_token
    assert renewed.params["client_id"] == f"{base_url}{DOCUMENT}"
    assert len(made) == signed_in + 1  # the refresh's own
    assert len({claims["jti"] for _, claims in made}) == len(made)
    assert made[-1][1]["aud"] == server.pds_url


@pytest.mark.atproto
def test_a_jwk_set_without_the_signing_key_fails_the_push(
    make_app: MakeApp, atproto_server_http_clients: AtprotoServer, tmp_path: Path
) -> None:
    """The PDS checks the assertion with the keys it fetched from the app: another key there
    (as after a botched key rotation) and the push is refused: a 502, nobody signed in."""
    server = atproto_server_http_clients
    app, fetched = published_app(make_app, server, tmp_path)
    other = ECKey.import_key(OTHER_EC_PEM).as_dict(private=False)
    failures: list[Exception] = []
    signals.authentication_failed.connect(
        lambda sender, **extra: failures.append(extra["error"]), app, weak=False
    )

    @app.before_request
    def serve_another_key() -> Any:
        if request.path == JWKS:  # the kid it signs with, but not its key
            return {"keys": [{**other, "kid": thumbprint(EC_PEM), "alg": "ES256", "use": "sig"}]}
        return None

    with live_server(app) as base_url:
        started = app.test_client().get(
            "/authenticate/bluesky?handle=alice.test", base_url=base_url
        )
    assert started.status_code == 502, started.text
    assert JWKS in fetched
    assert [type(error) for error in failures] == [UnexpectedResponseError]
    assert "pushed authorization request failed: HTTP 400, error 'invalid_client'" in str(
        failures[0]
    )
