"""The token exchange against a real local HTTP server that answers as each test says."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from fault_server import Behaviour, FaultServer, refused_url
from helpers import CLIENT_SECRET, MakeApp, fault_app, sign_in

from flask_social_oauth2 import SocialOAuth2
from flask_social_oauth2.oauth import client_auth, flow

USERINFO = {"sub": "u-1", "name": "Ada Lovelace", "email": "ada@example.org"}


def finish(make_app: MakeApp, server: FaultServer, token: Behaviour, **config: Any) -> Any:
    server.set("/token", token)
    server.set("/userinfo", Behaviour.json(USERINFO))
    app = fault_app(make_app, server, **config)
    return sign_in(app.test_client(), "faulty", code="the-code")


def test_json_token_response(make_app: MakeApp, fault_server: FaultServer) -> None:
    token = Behaviour.json({"access_token": "at", "token_type": "Bearer", "expires_in": 60})
    response = finish(make_app, fault_server, token)
    assert response.status_code == 302
    (profile_request,) = [r for r in fault_server.requests if r.path == "/userinfo"]
    assert profile_request.headers["Authorization"] == "Bearer at"
    assert "at" not in profile_request.target


def test_form_encoded_token_response(make_app: MakeApp, fault_server: FaultServer) -> None:
    token = Behaviour.form({"access_token": "at", "token_type": "bearer", "scope": "user"})
    assert finish(make_app, fault_server, token).status_code == 302


def test_token_request_is_a_proper_form_post(make_app: MakeApp, fault_server: FaultServer) -> None:
    token = Behaviour.json({"access_token": "at", "token_type": "bearer"})
    finish(make_app, fault_server, token)
    (request,) = [r for r in fault_server.requests if r.path == "/token"]
    form = {key: value for key, (value,) in request.form().items()}
    assert request.method == "POST"
    assert request.headers["Accept"] == "application/json"
    assert request.headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert form["grant_type"] == "authorization_code"
    assert form["code"] == "the-code"
    assert form["redirect_uri"] == "http://localhost/authenticate/faulty"
    assert form["client_id"] == "test-client"
    assert form["client_secret"] == CLIENT_SECRET
    assert len(form["code_verifier"]) >= 43
    assert "Authorization" not in request.headers
    assert "Cookie" not in request.headers


def test_basic_client_authentication_on_request(
    make_app: MakeApp, fault_server: FaultServer
) -> None:
    fault_server.set("/token", Behaviour.json({"access_token": "at"}))
    fault_server.set("/userinfo", Behaviour.json(USERINFO))
    from helpers import valid_block

    block = valid_block(
        redirectURL="/authenticate/faulty",
        accessTokenURL=f"{fault_server.url}/token",
        apiURL=f"{fault_server.url}/userinfo",
        customProperties={"tokenEndpointAuthMethod": "client_secret_basic"},
        accessTokenParams={"audience": "api://x"},
    )
    app = make_app({"faulty": block})
    client = app.test_client()
    sign_in(client, "faulty", code="c")
    (request,) = [r for r in fault_server.requests if r.path == "/token"]
    assert request.headers["Authorization"] == client_auth.basic_credentials(
        "test-client", CLIENT_SECRET
    )
    assert "client_secret" not in request.form()
    assert request.form()["audience"] == ["api://x"]


@pytest.mark.parametrize(
    ("behaviour", "status", "message"),
    [
        (Behaviour.json({"error": "bad_verification_code"}), 502, "error 'bad_verification_code'"),
        (Behaviour.json({"error": "invalid_grant"}, status=400), 502, "HTTP 400, error"),
        (Behaviour.json({"token_type": "bearer"}), 502, "answered no access_token"),
        (Behaviour.json({"access_token": "at", "token_type": "mac"}), 502, "token_type 'mac'"),
        (Behaviour.json([{"access_token": "at"}]), 502, "answered a JSON array"),
        (Behaviour.html("<html>login</html>"), 502, "answered an HTML page"),
        (Behaviour.respond(status=503, body=b"busy"), 502, "HTTP 503"),
        (Behaviour.truncated_json(), 502, "answered no JSON object"),
        (Behaviour.respond(status=200, body=b"", content_type="application/json"), 502, "no JSON"),
    ],
)
def test_bad_token_responses(
    make_app: MakeApp,
    fault_server: FaultServer,
    behaviour: Behaviour,
    status: int,
    message: str,
    captured_logs: list[Any],
) -> None:
    response = finish(make_app, fault_server, behaviour)
    assert response.status_code == status
    assert "Sign-in failed" in response.text
    assert response.headers["Referrer-Policy"] == "no-referrer"
    failures = [r.getMessage() for r in captured_logs if "sign-in failed" in r.getMessage()]
    assert len(failures) == 1
    assert message in failures[0]
    assert "provider 'faulty'" in failures[0]
    assert fault_server.count("/userinfo") == 0


@pytest.mark.parametrize("expires_in", ["3600", 3600, 3600.0])
def test_expires_in_as_string_or_number(
    make_app: MakeApp, fault_server: FaultServer, expires_in: Any
) -> None:
    app = fault_app(make_app, fault_server)
    seen: list[Any] = []
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension

    @social.on_authenticated
    def done(provider: Any, info: Any, profile: Any) -> str:
        seen.append(info)
        return "ok"

    fault_server.set(
        "/token",
        Behaviour.json({"access_token": "at", "expires_in": expires_in, "id_token": "x"}),
    )
    fault_server.set("/userinfo", Behaviour.json(USERINFO))
    client = app.test_client()
    response = sign_in(client, "faulty", code="c")
    assert response.text == "ok"
    (info,) = seen
    assert info.expires_in == 3600
    assert info.token_type == "Bearer"
    assert dict(info.params) == {"id_token": "x"}


def test_timeout_gives_504_within_timeout_plus_one_second(
    make_app: MakeApp, fault_server: FaultServer
) -> None:
    started = time.monotonic()
    response = finish(make_app, fault_server, Behaviour.hang(), SOCIAL_OAUTH2_TIMEOUT=0.5)
    assert response.status_code == 504
    assert time.monotonic() - started < 1.5


def test_slow_drip_is_cut_at_the_overall_deadline(
    make_app: MakeApp, fault_server: FaultServer
) -> None:
    body = json.dumps({"access_token": "at", "padding": "x" * 100}).encode()
    started = time.monotonic()
    response = finish(
        make_app, fault_server, Behaviour.drip(body, interval=0.1), SOCIAL_OAUTH2_TIMEOUT=0.5
    )
    assert response.status_code == 504
    assert time.monotonic() - started < 1.5


def test_huge_body_is_refused(make_app: MakeApp, fault_server: FaultServer) -> None:
    response = finish(make_app, fault_server, Behaviour.huge(50 * 1024 * 1024))
    assert response.status_code == 502


def test_endless_body_is_refused(make_app: MakeApp, fault_server: FaultServer) -> None:
    response = finish(make_app, fault_server, Behaviour.endless_chunked())
    assert response.status_code == 502


def test_connection_refused_gives_502(make_app: MakeApp) -> None:
    from helpers import valid_block

    app = make_app(
        {
            "faulty": valid_block(
                redirectURL="/authenticate/faulty", accessTokenURL=refused_url("/token")
            )
        }
    )
    client = app.test_client()
    response = sign_in(client, "faulty", code="c")
    assert response.status_code == 502


def test_profile_failure_is_a_profile_retrieval_error(
    make_app: MakeApp, fault_server: FaultServer, captured_logs: list[Any]
) -> None:
    fault_server.set("/token", Behaviour.json({"access_token": "at"}))
    fault_server.set("/userinfo", Behaviour.json({"message": "Bad credentials"}, status=401))
    app = fault_app(make_app, fault_server)
    client = app.test_client()
    response = sign_in(client, "faulty", code="c")
    assert response.status_code == 502
    assert "profile could not be read" in response.text
    assert any("profile request failed: HTTP 401" in r.getMessage() for r in captured_logs)


@pytest.mark.parametrize("body", [{"name": "no id"}, ["a"], "text"])
def test_profile_without_user_id(make_app: MakeApp, fault_server: FaultServer, body: Any) -> None:
    fault_server.set("/token", Behaviour.json({"access_token": "at"}))
    fault_server.set("/userinfo", Behaviour.json(body))
    app = fault_app(make_app, fault_server)
    client = app.test_client()
    response = sign_in(client, "faulty", code="c")
    assert response.status_code == 502


def test_code_challenge_is_s256_of_the_verifier() -> None:
    from oauthlib.oauth2 import WebApplicationClient

    reference = WebApplicationClient("x")
    for _ in range(20):
        verifier = flow.new_verifier()
        assert len(verifier) >= 43
        assert flow.code_challenge(verifier) == reference.create_code_challenge(verifier, "S256")


def test_deeply_nested_json_is_a_bad_answer_not_a_500(
    make_app: MakeApp, fault_server: FaultServer
) -> None:
    nested = b"[" * 200_000 + b"]" * 200_000
    token = Behaviour.respond(status=200, body=nested, content_type="application/json")
    assert finish(make_app, fault_server, token).status_code == 502
    fault_server.set("/token", Behaviour.json({"access_token": "at"}))
    fault_server.set(
        "/userinfo", Behaviour.respond(status=200, body=nested, content_type="application/json")
    )
    app = fault_app(make_app, fault_server)
    client = app.test_client()
    response = sign_in(client, "faulty", code="c")
    assert response.status_code == 502


@pytest.mark.parametrize(
    ("body", "key"),
    [
        (b'{"sub": 1' + b"0" * 400 + b', "name": "Big"}', "1" + "0" * 400),
        (b'{"sub": NaN, "id": "fallback"}', "fallback"),
    ],
)
def test_numeric_user_ids_become_exact_strings(
    make_app: MakeApp, fault_server: FaultServer, body: bytes, key: str
) -> None:
    fault_server.set("/token", Behaviour.json({"access_token": "at"}))
    fault_server.set(
        "/userinfo", Behaviour.respond(status=200, body=body, content_type="application/json")
    )
    app = fault_app(make_app, fault_server)
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension
    keys: list[str] = []

    @social.on_authenticated
    def done(provider: Any, info: Any, profile: Any) -> str:
        keys.append(profile.provider_key)
        return "ok"

    client = app.test_client()
    sign_in(client, "faulty", code="c")
    assert keys == [key]


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"scope": "read:user user:email"},
        {"scope": None},
        {"authorizationParams": {"prompt": "consent select_account", "hd": "ex&ample.org"}},
        {"clientID": "id with spaces/+&="},
        {"authorizationURL": "https://p.example/auth%20x/authorize"},
    ],
)
def test_authorization_url_is_byte_for_byte_what_oauthlib_builds(changes: dict[str, Any]) -> None:
    from helpers import valid_block
    from oauthlib.common import add_params_to_uri

    from flask_social_oauth2 import OAuth2Settings

    settings = OAuth2Settings.from_config(valid_block(**changes))
    redirect_uri = "https://app.example/authenticate/x?a=b c"
    state, verifier, nonce = flow.new_state(), flow.new_verifier(), flow.new_nonce()
    built = flow.authorization_url(
        settings, redirect_uri=redirect_uri, state=state, verifier=verifier, nonce=nonce
    )
    params = [
        ("response_type", "code"),
        ("client_id", settings.client_id),
        ("redirect_uri", redirect_uri),
    ]
    if settings.scope:
        params.append(("scope", settings.scope))
    params += [
        ("state", state),
        ("code_challenge", flow.code_challenge(verifier)),
        ("code_challenge_method", "S256"),
        ("nonce", nonce),
        *settings.authorization_params.items(),
    ]
    assert built == add_params_to_uri(settings.authorization_url, params)


@pytest.mark.parametrize(
    ("changes", "client_fields", "verifier"),
    [
        ({}, [], "v" * 43),
        ({}, [("client_secret", "s3cr\u00e9t &=+")], "v" * 43),
        ({}, [("client_secret", "")], None),
        ({"clientID": "id with spaces/+&="}, [], None),
        ({"accessTokenParams": {"resource": "https://api.example/", "empty": ""}}, [], "x" * 43),
        ({"accessTokenParams": {"scope": "a b"}}, [], "x" * 43),
        ({}, [("client_assertion_type", "urn:x"), ("client_assertion", "a.b.c")], "x" * 43),
    ],
)
def test_token_request_body_is_byte_for_byte_what_oauthlib_builds(
    changes: dict[str, Any], client_fields: list[tuple[str, str]], verifier: str | None
) -> None:
    from helpers import valid_block
    from oauthlib.oauth2.rfc6749.parameters import prepare_token_request

    from flask_social_oauth2 import OAuth2Settings

    settings = OAuth2Settings.from_config(valid_block(**changes))
    redirect_uri = "https://app.example/authenticate/x?a=b c&d=\u00e9"
    code = "code/with+odd chars\u00e9"
    built = flow.token_request_body(
        settings,
        code=code,
        redirect_uri=redirect_uri,
        verifier=verifier,
        client_fields=client_fields,
    )
    assert built == prepare_token_request(
        "authorization_code",
        code=code,
        redirect_uri=redirect_uri,
        code_verifier=verifier,
        client_id=settings.client_id,
        include_client_id=True,
        **{**settings.access_token_params, **dict(client_fields)},
    )
