"""SECURITY.md lines 24, 25 and 29 and the callback hardening of the outside review, proved
against real authorization servers on loopback (the local identity provider: Authlib's server
classes check PKCE, client authentication and redirect_uri themselves and record every request).

Test names carry the SECURITY.md line (``test_sNN_...``).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from flask import Flask, Response, request
from helpers import (
    ALICE,
    CLIENT_ID,
    CLIENT_SECRET,
    LOCAL_REDIRECT,
    MakeApp,
    browser_code,
    callback_path,
    follow_to_provider,
    idp_block,
    sign_in,
    start_flow,
    state_cookie_name,
)

from flask_social_oauth2 import OAuth2Settings, SocialOAuth2
from flask_social_oauth2.local_idp import LocalIdentityProvider

# -- 24: a code posted by a client-side framework ------------------------------------------------


@pytest.fixture
def spa_app(make_app: MakeApp, idp: LocalIdentityProvider) -> Flask:
    """An app whose provider ``local`` is configured for a client-side framework: no
    ``authorizationURL``, so the browser runs the authorization request and POSTs the code."""
    block = idp_block(idp)
    del block["authorizationURL"]
    return make_app({"local": block})


def new_verifier() -> str:
    return secrets.token_urlsafe(48)


def test_s24_a_posted_code_without_its_verifier_is_refused_before_any_call(
    spa_app: Flask, idp: LocalIdentityProvider
) -> None:
    code = browser_code(idp, new_verifier())
    response = spa_app.test_client().post("/authenticate/local", json={"code": code})
    assert response.status_code == 400
    assert idp.token_requests == []


@pytest.mark.parametrize(
    "verifier",
    ["", "too-short", "x" * 129, "a" * 42 + "!", "a" * 43 + " ", 12345, None],
    ids=["empty", "short", "long", "bad-character", "space", "number", "null"],
)
def test_s24_a_malformed_verifier_is_refused_before_any_call(
    spa_app: Flask, idp: LocalIdentityProvider, verifier: Any
) -> None:
    body = {"code": browser_code(idp, new_verifier()), "code_verifier": verifier}
    response = spa_app.test_client().post("/authenticate/local", json=body)
    assert response.status_code == 400
    assert idp.token_requests == []


@pytest.mark.parametrize(
    "origin",
    ["https://evil.example", "http://localhost.evil.example", "http://localhost:8080", "null"],
)
def test_s24_a_post_from_another_origin_is_refused_before_any_call(
    spa_app: Flask, idp: LocalIdentityProvider, origin: str
) -> None:
    verifier = new_verifier()
    body = {"code": browser_code(idp, verifier), "code_verifier": verifier}
    client = spa_app.test_client()
    response = client.post("/authenticate/local", json=body, headers={"Origin": origin})
    assert response.status_code == 403
    assert idp.token_requests == []


def test_s24_the_right_verifier_from_the_apps_own_origin_signs_in(
    spa_app: Flask, idp: LocalIdentityProvider
) -> None:
    verifier = new_verifier()
    body = {"code": browser_code(idp, verifier), "code_verifier": verifier}
    client = spa_app.test_client()
    response = client.post("/authenticate/local", json=body, headers={"Origin": "http://localhost"})
    assert response.status_code == 200
    assert response.json == {"signed_in": True, "provider": "local", "next": "/"}
    (token_request,) = idp.token_requests
    assert token_request.status_code == 200
    assert token_request.form["code_verifier"] == verifier
    assert token_request.form["redirect_uri"] == LOCAL_REDIRECT
    with client.session_transaction() as session:
        assert session["social_profile"]["provider_key"] == ALICE.sub


def test_s24_a_stolen_code_with_another_verifier_is_refused_by_the_server(
    spa_app: Flask, idp: LocalIdentityProvider
) -> None:
    code = browser_code(idp, new_verifier())  # the victim's code; the thief lacks its verifier
    client = spa_app.test_client()
    response = client.post("/authenticate/local", json={"code": code, "code_verifier": "a" * 43})
    assert response.status_code == 502
    (token_request,) = idp.token_requests
    assert token_request.status_code == 400  # the server checked the PKCE pair
    with client.session_transaction() as session:
        assert "social_profile" not in session


@pytest.mark.parametrize("size", [1_000, 100_000])
def test_s24_a_deeply_nested_json_body_is_a_400_never_a_500(
    spa_app: Flask, idp: LocalIdentityProvider, size: int
) -> None:
    response = spa_app.test_client().post(
        "/authenticate/local", data="[" * size, content_type="application/json"
    )
    assert response.status_code == 400
    assert idp.token_requests == []


# -- 25: a flow is finished only under the settings that started it ------------------------------


@pytest.fixture
def second_idp() -> Iterator[LocalIdentityProvider]:
    """Another tenant's authorization server."""
    with LocalIdentityProvider() as server:
        server.register_client("tenant-b", CLIENT_SECRET, [LOCAL_REDIRECT])
        server.auto_approve = ALICE
        yield server


SettingsChange = Callable[[OAuth2Settings, LocalIdentityProvider], OAuth2Settings]
CHANGES: dict[str, SettingsChange] = {
    "another tenant's server": lambda s, other: s.replace(
        access_token_url=other.token_url, api_url=other.userinfo_url, client_id="tenant-b"
    ),
    "token endpoint": lambda s, other: s.replace(access_token_url=other.token_url),
    "client id": lambda s, other: s.replace(client_id="another-client"),
    "redirect_uri": lambda s, other: s.replace(redirect_url="/tenant/local"),
    "issuer": lambda s, other: s.replace(custom_properties={"issuer": other.issuer}),
    "openid dropped": lambda s, other: s.replace(scope="profile email"),
}


def tenant_app(make_app: MakeApp, idp: LocalIdentityProvider) -> Flask:
    """An app whose ``local`` route derives the provider per tenant (a cookie names it), as a
    multi-tenant view would with ``with_settings``."""
    app = make_app({"local": idp_block(idp)})
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension
    app.config["TENANTS"] = {"a": lambda s: s}

    @app.get("/tenant/<provider>")
    def tenant_view(provider: str) -> Any:
        change = app.config["TENANTS"][request.cookies.get("tenant", "a")]
        result = social.provider(provider).with_settings(change).authenticate()
        return result if isinstance(result, Response) else f"signed in: {result.token_type}"

    return app


@pytest.mark.parametrize("change", list(CHANGES))
def test_s25_a_flow_started_under_one_variant_cannot_finish_under_another(
    make_app: MakeApp,
    idp: LocalIdentityProvider,
    second_idp: LocalIdentityProvider,
    change: str,
) -> None:
    app = tenant_app(make_app, idp)
    app.config["TENANTS"]["b"] = lambda s: CHANGES[change](s, second_idp)
    client = app.test_client()
    started = client.get("/tenant/local")
    assert started.status_code == 302
    callback = follow_to_provider(started.headers["Location"])
    client.set_cookie("tenant", "b")
    response = client.get("/tenant/local?" + callback.split("?", 1)[1])
    assert response.status_code == 400
    assert idp.token_requests == []
    assert second_idp.token_requests == []
    assert second_idp.authorization_requests == []


def test_s25_a_flow_finishes_under_the_variant_that_started_it(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    app = tenant_app(make_app, idp)
    app.config["TENANTS"]["same"] = lambda s: s.replace(
        authorization_params={"prompt": "login"}  # not part of what the flow is bound to
    )
    client = app.test_client()
    client.set_cookie("tenant", "same")
    started = client.get("/tenant/local")
    callback = follow_to_provider(started.headers["Location"])
    response = client.get("/tenant/local?" + callback.split("?", 1)[1])
    assert response.text == "signed in: Bearer"
    assert len(idp.token_requests) == 1


# -- 29: the state cookie is __Host- prefixed on https and scoped to the app ---------------------


def test_s29_on_https_the_state_cookie_is_host_prefixed_with_path_root(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    app = make_app({"local": idp_block(idp)}, SOCIAL_OAUTH2_STATE_COOKIE_PATH="/authenticate")
    client = app.test_client()
    started = client.get("/authenticate/local", base_url="https://localhost")
    header = started.headers["Set-Cookie"]
    assert header.startswith(f"__Host-{state_cookie_name(app)}=")
    assert state_cookie_name(app, secure=True) == f"__Host-{state_cookie_name(app)}"
    assert "; Secure" in header
    assert "; Path=/;" in header
    assert "Domain=" not in header
    callback = follow_to_provider(started.headers["Location"])
    assert callback.startswith("https://localhost/authenticate/local?")
    finished = client.get(callback_path(callback), base_url="https://localhost")
    assert finished.status_code == 302
    assert len(idp.token_requests) == 1
    plain = client.get("/authenticate/local", base_url="http://localhost")
    assert "; Path=/authenticate;" in plain.headers["Set-Cookie"]


def test_s29_a_cookie_planted_without_the_prefix_is_not_read_on_https(
    idp_app: Flask, idp: LocalIdentityProvider
) -> None:
    """A sibling subdomain can set a ``Domain=`` cookie of the plain name (login CSRF: the
    attacker's own flow planted in the victim's browser), never a ``__Host-`` one."""
    attacker = idp_app.test_client()
    started = attacker.get("/authenticate/local", base_url="https://localhost")
    callback = follow_to_provider(started.headers["Location"])
    cookie = attacker.get_cookie(state_cookie_name(idp_app, secure=True))
    assert cookie is not None
    victim = idp_app.test_client()
    victim.set_cookie(state_cookie_name(idp_app), cookie.value)
    response = victim.get(callback_path(callback), base_url="https://localhost")
    assert response.status_code == 400
    assert idp.token_requests == []


def test_s29_another_app_with_the_same_secret_key_cannot_finish_a_flow(
    idp: LocalIdentityProvider,
) -> None:
    apps = []
    for import_name in ("shop", "blog"):
        app = Flask(import_name)
        app.config.update(
            SECRET_KEY="one-key-for-the-whole-host",
            TRUSTED_HOSTS=["localhost"],
            SOCIAL_OAUTH2_PROVIDERS={"local": idp_block(idp)},
        )
        SocialOAuth2(app)
        apps.append(app)
    shop, blog = apps
    assert state_cookie_name(shop) != state_cookie_name(blog)
    client = shop.test_client()
    callback = follow_to_provider(client.get("/authenticate/local").headers["Location"])
    cookie = client.get_cookie(state_cookie_name(shop))
    assert cookie is not None
    other = blog.test_client()
    other.set_cookie(state_cookie_name(blog), cookie.value)  # even under the right name
    response = other.get(callback_path(callback))
    assert response.status_code == 400
    assert idp.token_requests == []
    assert client.get(callback_path(callback)).status_code == 302  # the shop's flow is intact


def test_s29_an_explicit_cookie_name_is_kept(make_app: MakeApp, idp: LocalIdentityProvider) -> None:
    app = make_app({"local": idp_block(idp)}, SOCIAL_OAUTH2_STATE_COOKIE="signin")
    assert state_cookie_name(app) == "signin"
    assert state_cookie_name(app, secure=True) == "__Host-signin"
    assert sign_in(app.test_client()).status_code == 302


# -- 21: iss (RFC 9207) is checked on error callbacks too ----------------------------------------


@pytest.fixture
def iss_app(make_app: MakeApp) -> Iterator[tuple[Flask, LocalIdentityProvider]]:
    with LocalIdentityProvider(iss_parameter=True) as server:
        server.register_client(CLIENT_ID, CLIENT_SECRET, [LOCAL_REDIRECT])
        block = idp_block(server, customProperties={"issuer": server.issuer})
        yield make_app({"local": block}), server


@pytest.mark.parametrize(
    ("iss", "status"),
    [("https://evil.example", 400), (None, 400), ("issuer", 403)],
    ids=["wrong-iss", "missing-iss", "right-iss"],
)
def test_s21_an_error_callback_is_trusted_only_with_the_right_iss(
    iss_app: tuple[Flask, LocalIdentityProvider], iss: str | None, status: int
) -> None:
    app, server = iss_app
    client = app.test_client()
    state = start_flow(client, "local")["state"]
    query = {"error": "access_denied", "state": state}
    if iss is not None:
        query["iss"] = server.issuer if iss == "issuer" else iss
    response = client.get("/authenticate/local", query_string=query)
    assert response.status_code == status  # 400: StateError (mix-up), 403: AccessDeniedError
    assert server.token_requests == []


# -- T10: only a real navigation redeems a code ----------------------------------------------------


def test_s13_a_head_request_on_the_callback_touches_no_flow(
    idp_app: Flask, idp: LocalIdentityProvider
) -> None:
    """Link previews and prefetchers send HEAD: no token request, the state is not used up,
    and the user's own GET still signs in."""
    client = idp_app.test_client()
    callback = follow_to_provider(client.get("/authenticate/local").headers["Location"])
    preview = client.head(callback_path(callback))
    assert preview.status_code == 200
    assert preview.data == b""
    assert "Set-Cookie" not in preview.headers
    assert preview.headers["Cache-Control"] == "no-store"
    assert idp.token_requests == []
    assert client.get(callback_path(callback)).status_code == 302
    assert len(idp.token_requests) == 1


def test_s13_a_head_request_starts_no_flow(idp_app: Flask, idp: LocalIdentityProvider) -> None:
    response = idp_app.test_client().head("/authenticate/local")
    assert response.status_code == 200
    assert "Set-Cookie" not in response.headers
    assert "Location" not in response.headers
    assert idp.authorization_requests == []


def test_s13_a_custom_view_calling_authenticate_is_safe_from_head_too(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    app = tenant_app(make_app, idp)
    client = app.test_client()
    callback = follow_to_provider(client.get("/tenant/local").headers["Location"])
    assert client.head("/tenant/local?" + callback.split("?", 1)[1]).status_code == 200
    assert idp.token_requests == []
    response = client.get("/tenant/local?" + callback.split("?", 1)[1])
    assert response.text == "signed in: Bearer"
