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

from fault_server import FaultServer  # noqa: E402

from flask_social_oauth2 import SocialOAuth2  # noqa: E402

CLIENT_ID = "test-client"
CLIENT_SECRET = "s3cr3t-client-secret-value"  # noqa: S105 - a test secret, searched for in logs

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


def fault_app(make_app: MakeApp, server: FaultServer, **config: Any) -> Flask:
    """An app whose provider ``faulty`` has its token and profile addresses on ``server``."""
    block = valid_block(
        redirectURL="/authenticate/faulty",
        accessTokenURL=f"{server.url}/token",
        apiURL=f"{server.url}/userinfo",
    )
    return make_app({"faulty": block}, **config)
