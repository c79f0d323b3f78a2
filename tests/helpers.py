"""Helpers the test modules share: provider blocks, flow steps and sign-ins.

Fixtures live in conftest.py; everything a test imports by name lives here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

import requests
from flask import Flask

from flask_social_oauth2.local_idp import LocalIdentityProvider, LocalUser

if TYPE_CHECKING:
    from fault_server import FaultServer

CLIENT_ID = "test-client"
CLIENT_SECRET = "s3cr3t-client-secret-value"
ALICE = LocalUser.from_name_email("Alice Example", "alice@example.test")
LOCAL_REDIRECT = "http://localhost/authenticate/local"

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


def block_for(name: str, **changes: Any) -> dict[str, Any]:
    """A valid block for the provider ``name``, its ``redirectURL`` on the default route."""
    return valid_block(**{"redirectURL": f"/authenticate/{name}", **changes})


def query_of(url: str) -> dict[str, str]:
    """The query parameters of ``url``."""
    return dict(parse_qsl(urlsplit(url).query))


def start_flow(client: Any, provider: str, **query: str) -> dict[str, str]:
    """Start a sign-in with the app's test client; the authorization request's query."""
    response = client.get(f"/authenticate/{provider}", query_string=query)
    assert response.status_code == 302, response.text
    return query_of(response.headers["Location"])


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


def idp_block(server: LocalIdentityProvider, **changes: Any) -> dict[str, Any]:
    """The provider block for ``server`` under the name ``local``."""
    block: dict[str, Any] = server.settings_block(CLIENT_ID, CLIENT_SECRET, "/authenticate/local")
    block.update(changes)
    return block


def follow_to_provider(location: str) -> str:
    """Follow the app's redirect to the provider (auto-approving); the callback URL it returns."""
    answer = requests.get(location, allow_redirects=False, timeout=10)
    assert answer.status_code in (302, 303), answer.text
    callback: str = answer.headers["Location"]
    return callback


def callback_path(callback: str) -> str:
    """The path and query of a callback URL, for the test client."""
    parts = urlsplit(callback)
    return f"{parts.path}?{parts.query}"


def sign_in(client: Any, provider: str = "local", **query: str) -> Any:
    """Run a whole sign-in with the app's test client against the auto-approving provider of
    the ``idp`` fixture (for apps under test with a chosen user, use
    :func:`flask_social_oauth2.testing.sign_in`)."""
    started = client.get(f"/authenticate/{provider}", query_string=query)
    assert started.status_code == 302, started.text
    return client.get(callback_path(follow_to_provider(started.headers["Location"])))
