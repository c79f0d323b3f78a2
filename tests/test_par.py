"""Pushed Authorization Requests (RFC 9126) against panva's certified oidc-provider with PAR
required, and faults from a real local server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from fault_server import Behaviour, FaultServer
from helpers import CLIENT_ID, CLIENT_SECRET, MakeApp, callback_path, faulty_block
from oidc_provider_server import OidcProviderServer

from flask_social_oauth2.errors import ConfigurationError

Factory = Callable[..., OidcProviderServer]
REDIRECT = "http://localhost/authenticate/op"
SECRET = "a-client-secret-of-some-length"


def op_server(factory: Factory, **options: Any) -> OidcProviderServer:
    return factory(
        [
            {
                "client_id": "app",
                "client_secret": SECRET,
                "token_endpoint_auth_method": "client_secret_post",
                "redirect_uris": [REDIRECT],
            }
        ],
        **options,
    )


def op_block(server: OidcProviderServer, **custom: str) -> dict[str, Any]:
    return {
        "accessTokenURL": f"{server.issuer}/token",
        "redirectURL": "/authenticate/op",
        "clientID": "app",
        "clientSecret": SECRET,
        "scope": "openid email",
        "customProperties": {"issuer": server.issuer, **custom},
    }


def routes(server: OidcProviderServer) -> list[tuple[str, int]]:
    return [(entry["route"], entry["status"]) for entry in server.log() if entry.get("route")]


def test_a_provider_that_offers_par_gets_every_request_pushed(
    make_app: MakeApp, oidc_provider_factory: Factory
) -> None:
    server = op_server(oidc_provider_factory, par_required=True, dpop_nonce_required=False)
    app = make_app({"op": op_block(server)})
    client = app.test_client()
    started = client.get("/authenticate/op")
    assert started.status_code == 302
    location = started.headers["Location"]
    query = parse_qs(urlsplit(location).query)
    assert set(query) == {"client_id", "request_uri"}  # nothing else travels in the URL
    assert query["client_id"] == ["app"]
    (pushed,) = [
        entry for entry in server.log() if entry.get("route") == "pushed_authorization_request"
    ]
    assert pushed["status"] == 201
    callback = server.authorize(location, REDIRECT)
    finished = client.get(callback_path(callback))
    assert finished.status_code == 302, finished.text
    assert ("token", 200) in routes(server)


def test_par_off_at_a_server_that_requires_it_is_a_clear_error_never_a_500(
    make_app: MakeApp, oidc_provider_factory: Factory
) -> None:
    server = op_server(oidc_provider_factory, par_required=True, dpop_nonce_required=False)
    app = make_app({"op": op_block(server, pushedAuthorization="off")})
    client = app.test_client()
    started = client.get("/authenticate/op")
    assert "request_uri" not in started.headers["Location"]
    callback = server.authorize(started.headers["Location"], REDIRECT)
    refused = client.get(callback_path(callback))
    assert 400 <= refused.status_code < 500
    assert all(route != "token" for route, _ in routes(server))


@pytest.mark.parametrize(
    ("behaviour", "status"),
    [
        (Behaviour.respond(500, '{"error": "server_error"}'), 502),
        (Behaviour.respond(400, '{"error": "invalid_request"}'), 502),
        (Behaviour.respond(201, '{"expires_in": 60}'), 502),
        (Behaviour.respond(201, "<html>"), 502),
        (Behaviour.hang(), 504),
    ],
)
def test_a_failing_push_is_a_502_and_never_a_plain_redirect(
    make_app: MakeApp, fault_server: FaultServer, behaviour: Behaviour, status: int
) -> None:
    fault_server.set("/par", behaviour)
    block = faulty_block(fault_server, pushedAuthorizationURL=f"{fault_server.url}/par")
    app = make_app({"faulty": block}, SOCIAL_OAUTH2_TIMEOUT=1)
    answer = app.test_client().get("/authenticate/faulty")
    assert answer.status_code == status
    assert "Location" not in answer.headers
    assert CLIENT_SECRET not in answer.text
    (push,) = fault_server.requests
    assert dict(push.form())["client_secret"] == [CLIENT_SECRET]


def test_a_configured_par_endpoint_without_metadata(
    make_app: MakeApp, fault_server: FaultServer
) -> None:
    fault_server.set(
        "/par",
        Behaviour.respond(
            201, '{"request_uri": "urn:ietf:params:oauth:request_uri:abc", "expires_in": 60}'
        ),
    )
    block = {
        "authorizationURL": f"{fault_server.url}/authorize?tenant=t1",
        "accessTokenURL": f"{fault_server.url}/token",
        "apiURL": f"{fault_server.url}/userinfo",
        "redirectURL": "/authenticate/faulty",
        "clientID": CLIENT_ID,
        "clientSecret": CLIENT_SECRET,
        "scope": "read",
        "authorizationParams": {"prompt": "login"},
        "customProperties": {"pushedAuthorizationURL": f"{fault_server.url}/par"},
    }
    app = make_app({"faulty": block})
    answer = app.test_client().get("/authenticate/faulty")
    assert answer.status_code == 302
    assert answer.headers["Location"] == (
        f"{fault_server.url}/authorize?tenant=t1&client_id={CLIENT_ID}"
        "&request_uri=urn%3Aietf%3Aparams%3Aoauth%3Arequest_uri%3Aabc"
    )
    (push,) = fault_server.requests
    form = push.form()
    assert set(form) >= {
        "response_type",
        "client_id",
        "redirect_uri",
        "scope",
        "state",
        "code_challenge",
        "code_challenge_method",
        "prompt",
        "client_secret",
    }


def test_par_required_without_an_endpoint(make_app: MakeApp, fault_server: FaultServer) -> None:
    block = faulty_block(fault_server, pushedAuthorization="required")
    with pytest.raises(ConfigurationError, match="no pushedAuthorizationURL and no issuer"):
        make_app({"faulty": block})
    with pytest.raises(ConfigurationError, match="must be one of auto, required, off"):
        make_app({"faulty": {**block, "customProperties": {"pushedAuthorization": "yes"}}})
    with pytest.raises(ConfigurationError, match=r"customProperties\.pushedAuthorizationURL"):
        make_app(
            {
                "faulty": {
                    **block,
                    "customProperties": {"pushedAuthorizationURL": "http://par.example/par"},
                }
            }
        )


def test_par_required_where_the_metadata_names_no_endpoint_is_a_503_page(
    make_app: MakeApp, oidc_provider_factory: Factory, fault_server: FaultServer
) -> None:
    from helpers import fake_document

    document = fake_document(fault_server.url)
    document.pop("pushed_authorization_request_endpoint", None)
    fault_server.set("/.well-known/openid-configuration", Behaviour.json(document))
    block = {
        "accessTokenURL": f"{fault_server.url}/token",
        "redirectURL": "/authenticate/faulty",
        "clientID": CLIENT_ID,
        "clientSecret": CLIENT_SECRET,
        "scope": "openid",
        "customProperties": {"issuer": fault_server.url, "pushedAuthorization": "required"},
    }
    app = make_app({"faulty": block})
    answer = app.test_client().get("/authenticate/faulty")
    assert answer.status_code == 503
    assert "Location" not in answer.headers
