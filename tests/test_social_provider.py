"""SocialProvider / OAuth2Provider: authenticate() in the app's own views, with_settings over
both halves of a flow, the client-side code POST, hooks and signals."""

from __future__ import annotations

from typing import Any

import pytest
from fault_server import Behaviour, FaultServer
from flask import Flask, Response
from helpers import (
    ALICE,
    CLIENT_ID,
    CLIENT_SECRET,
    MakeApp,
    callback_path,
    follow_to_provider,
    idp_block,
    sign_in,
    valid_block,
)

from flask_social_oauth2 import OAuth2Info, SocialOAuth2, SocialProfile, SocialProvider, signals
from flask_social_oauth2.errors import AuthenticationError
from flask_social_oauth2.local_idp import LocalIdentityProvider

#: A well-formed PKCE verifier (RFC 7636 4.1), as a browser app would post it.
VERIFIER = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"


def custom_view_app(make_app: MakeApp, idp: LocalIdentityProvider) -> Flask:
    """An app whose own view runs the flow with settings changed for one use."""
    app = make_app({"local": idp_block(idp, redirectURL="/login/local")})
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension

    @app.get("/login/<provider>")
    def login(provider: str) -> Any:
        derived = social.provider(provider).with_settings(
            lambda s: s.replace(
                scope="openid email",
                access_token_params={"resource": "https://api.example"},
                authorization_params={"prompt": "consent"},
            )
        )
        result = derived.authenticate()
        if isinstance(result, Response):
            return result
        profile = derived.retrieve_profile(result)
        return {"key": profile.provider_key, "next": social.next_url("/home")}

    return app


def test_with_settings_applies_to_both_halves(make_app: MakeApp) -> None:
    with LocalIdentityProvider() as server:
        server.register_client(CLIENT_ID, CLIENT_SECRET, ["http://localhost/login/local"])
        server.auto_approve = ALICE
        app = custom_view_app(make_app, server)
        client = app.test_client()
        started = client.get("/login/local")
        response = client.get(callback_path(follow_to_provider(started.headers["Location"])))
        assert response.status_code == 200
        assert response.json == {"key": ALICE.sub, "next": "/home"}
        (authorization,) = server.authorization_requests
        assert authorization["scope"] == "openid email"
        assert authorization["prompt"] == "consent"
        (token,) = server.token_requests
        assert token.form["resource"] == "https://api.example"
        assert token.form["redirect_uri"] == authorization["redirect_uri"]
        with app.app_context():
            social: SocialOAuth2 = app.extensions["social_oauth2"].extension
            assert social.provider("local").settings.scope == "openid profile email"
            assert dict(social.provider("local").settings.access_token_params) == {}


def test_a_variant_with_another_redirect_url_cannot_finish_the_flow(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    """The resolved redirect_uri is bound to the flow (SECURITY.md 25): a view that derives
    another ``redirectURL`` for the callback is refused before the token request."""
    app = make_app({"local": idp_block(idp)})
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension

    @app.get("/custom-callback")
    def custom_callback() -> Any:
        derived = social.provider("local").with_settings(
            lambda s: s.replace(redirect_url="/elsewhere")
        )
        return derived.authenticate()

    client = app.test_client()
    callback = follow_to_provider(client.get("/authenticate/local").headers["Location"])
    response = client.get("/custom-callback?" + callback.split("?", 1)[1])
    assert response.status_code == 400
    assert idp.token_requests == []


def test_default_success_keeps_the_profile_in_the_session(idp_app: Flask) -> None:
    client = idp_app.test_client()
    response = sign_in(client, next="/after")
    assert response.headers["Location"] == "/after"
    with client.session_transaction() as session:
        profile = SocialProfile.from_dict(session["social_profile"])
    assert profile.provider_id == "local"
    assert profile.provider_key == ALICE.sub
    assert profile.full_name == "Alice Example"
    assert profile.first_name == "Alice"
    assert profile.last_name == "Example"
    assert profile.email == "alice@example.test"
    assert profile.email_verified is True
    assert profile.username == "alice"
    assert profile.avatar_url is not None
    assert profile.avatar_url.startswith("http://127.0.0.1:")


def test_signals_are_sent(idp_app: Flask, idp: LocalIdentityProvider) -> None:
    seen: list[tuple[str, Any]] = []

    def on_success(sender: Flask, **extra: Any) -> None:
        seen.append(("ok", extra["profile"].provider_key))

    def on_failure(sender: Flask, **extra: Any) -> None:
        seen.append(("failed", type(extra["error"]).__name__))

    with (
        signals.authenticated.connected_to(on_success, idp_app),
        signals.authentication_failed.connected_to(on_failure, idp_app),
    ):
        client = idp_app.test_client()
        sign_in(client)
        idp.deny_next()
        sign_in(client)
    assert seen == [("ok", ALICE.sub), ("failed", "AccessDeniedError")]


def test_handler_return_values_are_responses(idp_app: Flask, idp: LocalIdentityProvider) -> None:
    social: SocialOAuth2 = idp_app.extensions["social_oauth2"].extension

    @social.on_authenticated
    def done(provider: SocialProvider, info: OAuth2Info, profile: SocialProfile) -> Any:
        return {"provider": provider.name, "key": profile.provider_key}, 201

    @social.on_error
    def failed(provider_name: str, error: AuthenticationError) -> Any:
        return {"error": type(error).__name__}, error.status_code

    client = idp_app.test_client()
    ok = sign_in(client)
    assert (ok.status_code, ok.json) == (201, {"provider": "local", "key": ALICE.sub})
    assert ok.headers["Referrer-Policy"] == "no-referrer"
    bad = client.get("/authenticate/local?code=c&state=nope")
    assert (bad.status_code, bad.json) == (400, {"error": "StateError"})


def test_authentication_error_in_an_app_view_is_a_4xx_page(idp_app: Flask) -> None:
    social: SocialOAuth2 = idp_app.extensions["social_oauth2"].extension

    @idp_app.get("/mine")
    def mine() -> Any:
        social.provider("local").authenticate()
        return "unreachable"

    response = idp_app.test_client().get("/mine?code=c&state=s")
    assert response.status_code == 400
    assert "Sign-in failed" in response.text


# -- providers used with a client-side framework ------------------------------------------------


def client_side_app(make_app: MakeApp, server: FaultServer) -> Flask:
    block = valid_block(
        authorizationURL=None,
        redirectURL="/authenticate/spa",
        accessTokenURL=f"{server.url}/token",
        apiURL=f"{server.url}/userinfo",
    )
    return make_app({"spa": block})


def test_client_side_code_is_posted_as_json(make_app: MakeApp, fault_server: FaultServer) -> None:
    fault_server.set("/token", Behaviour.json({"access_token": "at", "token_type": "bearer"}))
    fault_server.set("/userinfo", Behaviour.json({"sub": "42", "name": "Spa User"}))
    app = client_side_app(make_app, fault_server)
    client = app.test_client()
    response = client.post(
        "/authenticate/spa", json={"code": "from-the-browser", "code_verifier": VERIFIER}
    )
    assert response.status_code == 200
    assert response.json == {"signed_in": True, "provider": "spa", "next": "/"}
    token = next(r for r in fault_server.requests if r.path == "/token")
    form = token.form()
    assert form["code"] == ["from-the-browser"]
    assert form["redirect_uri"] == ["http://localhost/authenticate/spa"]
    assert form["code_verifier"] == [VERIFIER]
    with client.session_transaction() as session:
        assert session["social_profile"]["provider_key"] == "42"


@pytest.mark.parametrize(
    ("kwargs", "status"),
    [
        ({"data": "code=x", "content_type": "application/x-www-form-urlencoded"}, 415),
        ({"data": "code=x", "content_type": "text/plain"}, 415),
        ({"json": {"code": 5}}, 400),
        ({"json": ["code"]}, 400),
        ({"json": {"code": "x" * 3000}}, 400),
        ({"data": "{not json", "content_type": "application/json"}, 400),
    ],
)
def test_client_side_post_refuses_anything_but_a_json_code(
    make_app: MakeApp, fault_server: FaultServer, kwargs: dict[str, Any], status: int
) -> None:
    app = client_side_app(make_app, fault_server)
    response = app.test_client().post("/authenticate/spa", **kwargs)
    assert response.status_code == status
    assert fault_server.count("/token") == 0


def test_bare_code_without_server_state_is_refused(
    make_app: MakeApp, fault_server: FaultServer
) -> None:
    app = client_side_app(make_app, fault_server)
    response = app.test_client().get("/authenticate/spa?code=stolen")
    assert response.status_code == 400
    assert fault_server.count("/token") == 0


def test_no_authorization_url_cannot_start_on_the_server(
    make_app: MakeApp, fault_server: FaultServer, caplog: pytest.LogCaptureFixture
) -> None:
    app = client_side_app(make_app, fault_server)
    response = app.test_client().get("/authenticate/spa")
    assert response.status_code == 400
    assert "Location" not in response.headers
    assert any("has no authorizationURL" in record.getMessage() for record in caplog.records)


def test_post_is_refused_for_server_side_providers(
    idp_app: Flask, idp: LocalIdentityProvider
) -> None:
    response = idp_app.test_client().post("/authenticate/local", json={"code": "x"})
    assert response.status_code == 405
    assert idp.token_requests == []


def test_an_app_views_callback_page_sends_no_referrer(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    app = make_app({"local": idp_block(idp)})
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension

    @app.get("/mine/callback")
    def mine() -> Any:
        result = social.provider("local").authenticate()
        return "signed in" if isinstance(result, OAuth2Info) else result

    client = app.test_client()
    started = client.get("/authenticate/local")
    assert started.headers["Referrer-Policy"] == "no-referrer"
    assert started.headers["Cache-Control"] == "no-store"
    callback = follow_to_provider(started.headers["Location"])
    response = client.get("/mine/callback?" + callback.split("?", 1)[1])
    assert response.text == "signed in"
    assert response.headers["Referrer-Policy"] == "no-referrer"
    assert response.headers["Cache-Control"] == "no-store"


def test_derived_issuer_follows_with_settings(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    app = make_app({"local": idp_block(idp)})
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension
    with app.app_context():
        provider = social.provider("local")
        assert provider.issuer is None  # type: ignore[attr-defined]
        derived = provider.with_settings(
            lambda s: s.replace(custom_properties={"issuer": idp.issuer})
        )
        assert derived.issuer == idp.issuer  # type: ignore[attr-defined]
        assert provider.issuer is None  # type: ignore[attr-defined]
