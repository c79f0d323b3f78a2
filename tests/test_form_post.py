"""Form-post callbacks for any provider (``customProperties.responseMode: form_post``): against
panva's oidc-provider, whose page POSTs ``code``, ``state`` and ``iss`` (or ``error``) to the
callback, answered with the same one same-origin hop as Apple's; and the settings that choose it.

The real Chromium proof (provider on another site, state cookie Lax) is
test_form_post_browser.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner
from flask import Flask, Response
from flask.cli import ScriptInfo
from helpers import MakeApp, block_for, example_value, parse_form, query_of, watch
from oidc_provider_server import OidcProviderServer
from test_par import REDIRECT, op_block, op_server, routes

from flask_social_oauth2 import OAuth2Provider, OAuth2Settings, SocialOAuth2
from flask_social_oauth2.cli import social_cli
from flask_social_oauth2.errors import ConfigurationError
from flask_social_oauth2.web.form_post import HOP_FIELD

Factory = Callable[..., OidcProviderServer]
ROUTE = "/authenticate/op"


def token_requests(server: OidcProviderServer) -> list[tuple[str, int]]:
    return [(route, status) for route, status in routes(server) if route == "token"]


def hop(client: Any, fields: dict[str, str]) -> dict[str, str]:
    """POST the provider's fields as its page does; the fields of the app's hop page, which
    must post them back unchanged to the same route."""
    answer = client.post(ROUTE, data=fields)
    assert answer.status_code == 200, answer.text
    assert "form-action 'self'" in answer.headers["Content-Security-Policy"]
    assert "no-store" in answer.headers["Cache-Control"]
    page = parse_form(answer.text)
    assert page.action == ROUTE
    assert page.fields == {**fields, HOP_FIELD: "1"}
    return page.fields


def provider(app: Flask, name: str = "op") -> OAuth2Provider:
    found: OAuth2Provider = app.extensions["social_oauth2"].providers[name]
    return found


@pytest.mark.parametrize(
    "form_post_block",
    [
        {"customProperties": {"responseMode": "form_post"}},
        {"authorizationParams": {"response_mode": "form_post"}},
    ],
    ids=["responseMode", "authorizationParams"],
)
def test_a_whole_sign_in_by_form_post_without_par(
    make_app: MakeApp, oidc_provider_factory: Factory, form_post_block: dict[str, Any]
) -> None:
    server = op_server(oidc_provider_factory, par_required=False, dpop_nonce_required=False)
    block = op_block(server, pushedAuthorization="off")
    custom = {**block["customProperties"], **form_post_block.get("customProperties", {})}
    block.update({**form_post_block, "customProperties": custom})
    app = make_app({"op": block})
    assert provider(app).uses_form_post()
    outcome = watch(app)
    client = app.test_client()
    started = client.get(f"{ROUTE}?next=/account")
    location = started.headers["Location"]
    assert location.count("response_mode=") == 1
    assert query_of(location)["response_mode"] == "form_post"
    fields = server.authorize_form_post(location, REDIRECT)
    assert set(fields) == {"code", "state", "iss"}
    assert fields["iss"] == server.issuer
    hopped = hop(client, fields)
    assert token_requests(server) == []  # the provider's POST itself redeems nothing
    done = client.post(ROUTE, data=hopped)
    assert done.status_code == 302, done.text
    assert token_requests(server) == [("token", 200)]
    (profile,) = outcome.profiles
    assert profile.provider_key == "alice"
    assert profile.email == "alice@example.test"
    (info,) = outcome.infos
    assert info.id_token_claims is not None
    assert info.id_token_claims["sub"] == "alice"


def test_a_whole_sign_in_by_form_post_with_the_request_pushed(
    make_app: MakeApp, oidc_provider_factory: Factory
) -> None:
    server = op_server(oidc_provider_factory, par_required=True, dpop_nonce_required=False)
    app = make_app({"op": op_block(server, responseMode="form_post")})
    outcome = watch(app)
    client = app.test_client()
    started = client.get(ROUTE)
    location = started.headers["Location"]
    assert set(query_of(location)) == {"client_id", "request_uri"}  # response_mode was pushed
    fields = server.authorize_form_post(location, REDIRECT)  # a form: the mode arrived
    done = client.post(ROUTE, data=hop(client, fields))
    assert done.status_code == 302, done.text
    assert [profile.email for profile in outcome.profiles] == ["alice@example.test"]
    assert ("userinfo", 200) in routes(server)


def test_an_access_denied_form_post_ends_as_a_get_would(
    make_app: MakeApp, oidc_provider_factory: Factory
) -> None:
    server = op_server(oidc_provider_factory, par_required=False, dpop_nonce_required=False)
    block = op_block(server, responseMode="form_post", pushedAuthorization="off")
    block["authorizationParams"] = {"login_hint": "deny"}  # the test account says no
    app = make_app({"op": block})
    outcome = watch(app)
    client = app.test_client()
    location = client.get(ROUTE).headers["Location"]
    fields = server.authorize_form_post(location, REDIRECT)
    assert fields["error"] == "access_denied"
    assert "code" not in fields
    refused = client.post(
        ROUTE, data=hop(client, {k: v for k, v in fields.items() if k != "error_description"})
    )
    assert refused.status_code == 403
    assert type(outcome.error).__name__ == "AccessDeniedError"
    assert token_requests(server) == []


def test_a_form_post_with_a_wrong_state_redeems_nothing(
    make_app: MakeApp, oidc_provider_factory: Factory
) -> None:
    server = op_server(oidc_provider_factory, par_required=False, dpop_nonce_required=False)
    app = make_app({"op": op_block(server, responseMode="form_post", pushedAuthorization="off")})
    outcome = watch(app)
    client = app.test_client()
    location = client.get(ROUTE).headers["Location"]
    fields = server.authorize_form_post(location, REDIRECT)

    forged = client.post(ROUTE, data=hop(client, {**fields, "state": "s" * 32}))
    assert 400 <= forged.status_code < 500
    elsewhere = app.test_client()  # another browser: no state cookie at all
    stolen = elsewhere.post(ROUTE, data=hop(elsewhere, fields))
    assert 400 <= stolen.status_code < 500
    assert [type(error).__name__ for error in outcome.errors] == ["StateError", "StateError"]
    assert token_requests(server) == []

    # the flow is still there for its own callback
    assert client.post(ROUTE, data=hop(client, fields)).status_code == 302
    assert token_requests(server) == [("token", 200)]


# -- the settings ---------------------------------------------------------------------------------


def test_a_post_to_a_query_block_is_what_it_was(make_app: MakeApp) -> None:
    app = make_app({"example": block_for("example")})
    assert not provider(app, "example").uses_form_post()
    client = app.test_client()
    query = client.get("/authenticate/example").headers["Location"]
    assert "response_mode" not in query
    state = query_of(query)["state"]
    # a form POST is not a callback here: the route takes only a client-side framework's JSON
    answer = client.post("/authenticate/example", data={"code": "c", "state": state})
    assert answer.status_code == 405
    assert "state" in query_of(client.get("/authenticate/example").headers["Location"])


def test_a_form_post_block_takes_only_a_form(make_app: MakeApp) -> None:
    app = make_app(
        {"example": block_for("example", customProperties={"responseMode": "form_post"})}
    )
    answer = app.test_client().post("/authenticate/example", json={"code": "c", "state": "s"})
    assert answer.status_code == 415


@pytest.mark.parametrize(
    ("changes", "key", "message"),
    [
        (
            {"customProperties": {"responseMode": "fragment"}},
            "customProperties.responseMode",
            "must be one of query, form_post",
        ),
        (
            {"customProperties": {"responseMode": "FORM_POST"}},
            "customProperties.responseMode",
            "must be one of query, form_post",
        ),
        (
            {
                "customProperties": {"responseMode": "form_post"},
                "authorizationParams": {"response_mode": "query"},
            },
            "authorizationParams.response_mode",
            "is 'query' but customProperties.responseMode is 'form_post'",
        ),
    ],
)
def test_a_wrong_response_mode_is_a_configuration_error(
    make_app: MakeApp, changes: dict[str, Any], key: str, message: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        make_app({"example": block_for("example", **changes)})
    assert f"provider 'example', key '{key}': {message}" in str(raised.value)


def test_apple_always_posts_its_callback(make_app: MakeApp) -> None:
    apple = block_for(
        "apple",
        clientSecret=example_value("APPLE_PRIVATE_KEY", ""),
        customProperties={"teamID": "ABCDE12345", "keyID": "FGHIJ67890"},
    )
    app = make_app({"apple": apple})
    assert provider(app, "apple").uses_form_post()
    with pytest.raises(ConfigurationError, match="this provider always uses form_post"):
        make_app(
            {
                "apple": {
                    **apple,
                    "customProperties": {**apple["customProperties"], "responseMode": "query"},
                }
            }
        )


def with_mode(mode: str | None) -> Callable[[OAuth2Settings], OAuth2Settings]:
    def change(settings: OAuth2Settings) -> OAuth2Settings:
        custom = {k: v for k, v in settings.custom_properties.items() if k != "responseMode"}
        return settings.replace(
            custom_properties=custom if mode is None else {**custom, "responseMode": mode}
        )

    return change


def test_with_settings_variants_follow_their_settings(make_app: MakeApp) -> None:
    app = make_app({"example": block_for("example")})
    registered = provider(app, "example")
    posting = registered.with_settings(with_mode("form_post"))
    assert posting.uses_form_post()
    assert not registered.uses_form_post()
    assert not posting.with_settings(with_mode(None)).uses_form_post()
    assert not posting.with_settings(with_mode("query")).uses_form_post()
    with app.test_request_context("/authenticate/example"):
        started = posting.authenticate()
        assert isinstance(started, Response)
        assert query_of(started.headers["Location"])["response_mode"] == "form_post"
    with pytest.raises(ConfigurationError, match=r"customProperties\.responseMode"):
        registered.with_settings(with_mode("web_message"))


def test_flask_social_check_names_a_wrong_response_mode() -> None:
    def create_app() -> Flask:
        app = Flask("form_post_check")
        block = block_for("example", customProperties={"responseMode": "post"})
        app.config.update(SECRET_KEY="k", SOCIAL_OAUTH2_PROVIDERS={"example": block})
        SocialOAuth2(app)
        return app

    result = CliRunner().invoke(social_cli, ["check"], obj=ScriptInfo(create_app=create_app))
    assert result.exit_code == 1
    assert (
        "error: provider 'example', key 'customProperties.responseMode':"
        " must be one of query, form_post" in result.stderr.splitlines()
    )


def test_the_mode_named_in_both_places_is_sent_once(make_app: MakeApp) -> None:
    block = block_for(
        "example",
        customProperties={"responseMode": "form_post"},
        authorizationParams={"response_mode": "form_post"},
    )
    app = make_app({"example": block})
    assert provider(app, "example").uses_form_post()
    location = app.test_client().get("/authenticate/example").headers["Location"]
    assert location.count("response_mode=form_post") == 1


def test_the_hop_posts_back_under_the_apps_prefix(make_app: MakeApp) -> None:
    app = make_app(
        {"example": block_for("example", customProperties={"responseMode": "form_post"})}
    )
    base = "http://localhost/mounted"  # SCRIPT_NAME=/mounted, as a proxy's prefix sets it
    answer = app.test_client().post(
        "/authenticate/example", data={"code": "c", "state": "s"}, base_url=base
    )
    assert answer.status_code == 200
    assert parse_form(answer.text).action == "/mounted/authenticate/example"
