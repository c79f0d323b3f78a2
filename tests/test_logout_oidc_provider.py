"""Sign-out both ways against panva's oidc-provider (a certified OpenID Provider) with its real
``rpInitiatedLogout`` and ``backchannelLogout`` features, the app served over HTTP on loopback:
the provider POSTs its own logout token to the app, and RP-initiated logout makes the whole round
trip through the provider's end-session endpoint."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import pytest
import requests
from flask import Flask, session
from helpers import MakeApp, free_port, live_server, parse_form, query_of
from oidc_provider_server import OidcProviderServer

from flask_social_oauth2 import SocialOAuth2, signals

Factory = Callable[..., OidcProviderServer]
SECRET = "s3cret-value-of-at-least-32-bytes-long"


@contextmanager
def served(
    make_app: MakeApp, factory: Factory, tmp_path: Path
) -> Iterator[tuple[Flask, str, OidcProviderServer]]:
    """The app (provider ``op``: back-channel logout on, a SQLite store, sessions checked on
    every request, ``POST /logout`` and ``GET /me``) served on loopback, and oidc-provider with
    the app registered as client ``app``, its back-channel logout URI included."""
    port = free_port()
    issuer = f"http://127.0.0.1:{port}"
    block = {
        "accessTokenURL": f"{issuer}/token",
        "redirectURL": "/authenticate/op",
        "clientID": "app",
        "clientSecret": SECRET,
        "scope": "openid email",
        "customProperties": {
            "issuer": issuer,
            "pushedAuthorization": "off",
            "backchannelLogout": "true",
        },
    }
    app = make_app(
        {"op": block},
        SOCIAL_OAUTH2_TOKEN_STORE=f"sqlite:///{tmp_path / 'op.sqlite3'}",
        SOCIAL_OAUTH2_SESSION_CHECK_SECONDS=0,
        TRUSTED_HOSTS=["127.0.0.1"],
    )
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension
    ended: list[dict[str, Any]] = []
    app.config["ENDED"] = ended
    signals.provider_logged_out.connect(lambda sender, **seen: ended.append(seen), app, weak=False)

    @app.post("/logout")
    def logout() -> Any:
        return social.logout_redirect("op", next="/bye")

    @app.get("/bye")
    def bye() -> str:
        return "signed out"

    @app.get("/home")
    def home() -> str:
        return '<form method="post" action="/logout"><button id="out">Sign out</button></form>'

    @app.get("/me")
    def me() -> dict[str, Any]:
        return {"identities": session.get("social_oauth2_identities") or {}}

    with live_server(app) as url:
        client = {
            "client_id": "app",
            "client_secret": SECRET,
            "token_endpoint_auth_method": "client_secret_basic",
            "redirect_uris": [f"{url}/authenticate/op"],
            "post_logout_redirect_uris": [f"{url}/authenticate/op/logged-out"],
            "backchannel_logout_uri": f"{url}/authenticate/op/backchannel-logout",
            "backchannel_logout_session_required": True,
        }
        server = factory([client], par_required=False, dpop_nonce_required=False, port=port)
        yield app, url, server


def sign_in_with_a_browser(url: str) -> requests.Session:
    """A browser (cookies for both servers) that signed in at the app through oidc-provider."""
    browser = requests.Session()
    landed = browser.get(f"{url}/authenticate/op", timeout=10)
    assert landed.status_code == 200, landed.text
    assert landed.url == f"{url}/"
    assert browser.get(f"{url}/me", timeout=10).json() == {"identities": {"op": "alice"}}
    return browser


def confirm_sign_out(browser: requests.Session, page: requests.Response) -> requests.Response:
    """Post oidc-provider's sign-out confirmation form as a browser without scripts would."""
    form = parse_form(page.text)
    assert form.action is not None, page.text
    assert form.fields.get("logout") == "yes"
    return browser.post(urljoin(page.url, form.action), data=form.fields, timeout=10)


def test_the_providers_logout_token_reaches_the_app_and_the_next_request_is_signed_out(
    make_app: MakeApp, oidc_provider_factory: Factory, tmp_path: Path
) -> None:
    with served(make_app, oidc_provider_factory, tmp_path) as (app, url, server):
        browser = sign_in_with_a_browser(url)
        page = browser.get(f"{server.issuer}/session/end", timeout=10)
        assert page.status_code == 200, page.text
        done = confirm_sign_out(browser, page)
        assert done.status_code == 200, done.text
        deadline = time.monotonic() + 10
        while app.config["ENDED"] == [] and time.monotonic() < deadline:
            if browser.get(f"{url}/me", timeout=10).json() == {"identities": {}}:
                break
            time.sleep(0.1)
        assert browser.get(f"{url}/me", timeout=10).json() == {"identities": {}}, server.stderr()
        (ended,) = app.config["ENDED"]
        assert ended["provider"] == "op"
        assert ended["sub"] == "alice"
        assert ended["sid"]  # oidc-provider's session id, from the ID token and the logout token
        posted = [entry for entry in server.log() if entry["route"] == "end_session_confirm"]
        assert [entry["status"] for entry in posted] == [303]


def test_rp_initiated_logout_makes_the_round_trip_through_the_provider(
    make_app: MakeApp, oidc_provider_factory: Factory, tmp_path: Path
) -> None:
    with served(make_app, oidc_provider_factory, tmp_path) as (_, url, server):
        browser = sign_in_with_a_browser(url)
        started = browser.post(f"{url}/logout", allow_redirects=False, timeout=10)
        assert started.status_code == 302
        location = started.headers["Location"]
        assert location.startswith(f"{server.issuer}/session/end?")
        query = query_of(location)
        assert query["id_token_hint"].count(".") == 2
        assert query["logout_hint"]
        assert query["post_logout_redirect_uri"] == f"{url}/authenticate/op/logged-out"
        assert browser.get(f"{url}/me", timeout=10).json() == {"identities": {}}
        page = browser.get(location, timeout=10)
        assert page.status_code == 200, page.text
        back = confirm_sign_out(browser, page)
        assert back.status_code == 200, back.text
        assert back.url == f"{url}/bye"  # through logged-out, with the provider's state
        hops = [answer.url for answer in back.history]
        assert any(hop.startswith(f"{url}/authenticate/op/logged-out?state=") for hop in hops)
        replay = next(hop for hop in hops if "/logged-out?" in hop)
        assert browser.get(replay, allow_redirects=False, timeout=10).status_code == 400
        posted = [entry for entry in server.log() if entry["route"] == "end_session_confirm"]
        assert [entry["status"] for entry in posted] == [303]


@pytest.mark.browser
def test_rp_initiated_logout_in_chromium(
    make_app: MakeApp, oidc_provider_factory: Factory, tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright
    from test_browser import CHROMIUM_ARGS, chromium_path

    with (
        served(make_app, oidc_provider_factory, tmp_path) as (_, url, server),
        sync_playwright() as playwright,
    ):
        chromium = playwright.chromium.launch(
            executable_path=chromium_path(), headless=True, args=CHROMIUM_ARGS, timeout=60_000
        )
        try:
            page = chromium.new_context().new_page()
            page.set_default_timeout(15_000)
            page.goto(f"{url}/authenticate/op")
            page.wait_for_url(f"{url}/")
            assert page.goto(f"{url}/me") is not None
            assert json.loads(page.text_content("body") or "") == {"identities": {"op": "alice"}}
            page.goto(f"{url}/home")
            page.click("#out")
            page.wait_for_url(f"{server.issuer}/session/end*")
            page.click("button[type=submit]")
            page.wait_for_url(f"{url}/bye")
            assert page.text_content("body") == "signed out"
            page.goto(f"{url}/me")
            assert json.loads(page.text_content("body") or "") == {"identities": {}}
        finally:
            chromium.close()
    confirmed = [entry for entry in server.log() if entry["route"] == "end_session_confirm"]
    assert [entry["status"] for entry in confirmed] == [303]
