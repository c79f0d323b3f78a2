"""Fixtures shared by the test modules: apps, clients and the real servers on loopback."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

sys.path.insert(0, str(Path(__file__).parent))

import requests
from fault_server import FaultServer

from flask_social_oauth2 import SocialOAuth2
from flask_social_oauth2.local_idp import LocalIdentityProvider, LocalUser

CLIENT_ID = "test-client"
CLIENT_SECRET = "s3cr3t-client-secret-value"

MakeApp = Callable[..., Flask]


def valid_block(**changes: Any) -> dict[str, Any]:
    """A valid provider block in the specification's keys."""
    block: dict[str, Any] = {
        "authorizationURL": "https://provider.example/authorize",
        "accessTokenURL": "https://provider.example/token",
        "redirectURL": "/authenticate/example",
        "apiURL": "https://provider.example/userinfo",
        "clientID": CLIENT_ID,
        "clientSecret": CLIENT_SECRET,
        "scope": "openid profile email",
    }
    block.update(changes)
    return {key: value for key, value in block.items() if value is not None}


@pytest.fixture(autouse=True)
def _fresh_openid_caches() -> Iterator[None]:
    """OpenID metadata and key sets are cached per process by URL; a later loopback server may
    reuse an earlier one's port, so every test starts with empty caches."""
    from flask_social_oauth2 import oidc

    oidc.clear_caches()
    yield
    oidc.clear_caches()


@pytest.fixture
def make_app() -> MakeApp:
    """Build an app with the extension set up; keyword arguments become config."""

    def make(providers: dict[str, Any] | None = None, **config: Any) -> Flask:
        app = Flask("test_app")
        app.config.update(
            SECRET_KEY="test-secret-key",
            TESTING=True,
            TRUSTED_HOSTS=["localhost", "127.0.0.1"],
            SOCIAL_OAUTH2_PROVIDERS=providers if providers is not None else {},
        )
        app.config.update(config)

        @app.get("/")
        def index() -> str:
            return "index"

        SocialOAuth2(app)
        return app

    return make


@pytest.fixture
def fault_server() -> Iterator[FaultServer]:
    """A real local HTTP server whose answers each test sets."""
    with FaultServer() as server:
        yield server


@pytest.fixture
def captured_logs() -> Iterator[list[logging.LogRecord]]:
    """Every log record of every logger, at DEBUG, while the test runs."""
    records: list[logging.LogRecord] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Collect(level=logging.DEBUG)
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield records
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)


def start_flow(client: Any, provider: str, **query: str) -> dict[str, str]:
    """Start a sign-in with the app's test client; the authorization request's query."""
    from urllib.parse import parse_qsl, urlsplit

    response = client.get(f"/authenticate/{provider}", query_string=query)
    assert response.status_code == 302, response.text
    return dict(parse_qsl(urlsplit(response.headers["Location"]).query))


def code_callback(client: Any, provider: str, code: str = "c") -> Any:
    """Start a sign-in with the test client and come back with ``code`` and the flow's state, as
    the provider would: the app's answer to the callback."""
    query = start_flow(client, provider)
    return client.get(
        f"/authenticate/{provider}", query_string={"code": code, "state": query["state"]}
    )


def fault_app(make_app: MakeApp, server: FaultServer, **config: Any) -> Flask:
    """An app whose provider ``faulty`` has its token and profile addresses on ``server``."""
    block = valid_block(
        redirectURL="/authenticate/faulty",
        accessTokenURL=f"{server.url}/token",
        apiURL=f"{server.url}/userinfo",
    )
    return make_app({"faulty": block}, **config)


ALICE = LocalUser.from_name_email("Alice Example", "alice@example.test")
LOCAL_REDIRECT = "http://localhost/authenticate/local"


@pytest.fixture
def idp() -> Iterator[LocalIdentityProvider]:
    """A real OAuth 2.0 / OpenID Connect authorization server on loopback, approving as Alice."""
    with LocalIdentityProvider() as server:
        server.register_client(
            CLIENT_ID, CLIENT_SECRET, [LOCAL_REDIRECT, "https://localhost/authenticate/local"]
        )
        server.auto_approve = ALICE
        yield server


def idp_block(server: LocalIdentityProvider, **changes: Any) -> dict[str, Any]:
    """The provider block for ``server`` under the name ``local``."""
    block: dict[str, Any] = server.settings_block(CLIENT_ID, CLIENT_SECRET, "/authenticate/local")
    block.update(changes)
    return block


@pytest.fixture
def idp_app(make_app: MakeApp, idp: LocalIdentityProvider) -> Flask:
    """An app with one provider, ``local``, served by :func:`idp`."""
    return make_app({"local": idp_block(idp)})


def follow_to_provider(location: str) -> str:
    """Follow the app's redirect to the provider (auto-approving); the callback URL it returns."""
    answer = requests.get(location, allow_redirects=False, timeout=10)
    assert answer.status_code in (302, 303), answer.text
    callback: str = answer.headers["Location"]
    return callback


def callback_path(callback: str) -> str:
    """The path and query of a callback URL, for the test client."""
    from urllib.parse import urlsplit

    parts = urlsplit(callback)
    return f"{parts.path}?{parts.query}"


def sign_in(client: Any, provider: str = "local", **query: str) -> Any:
    """Run a whole sign-in with the app's test client against the real provider."""
    started = client.get(f"/authenticate/{provider}", query_string=query)
    assert started.status_code == 302, started.text
    return client.get(callback_path(follow_to_provider(started.headers["Location"])))
