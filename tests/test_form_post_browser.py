"""A form-post callback (``customProperties.responseMode: form_post``) in a real headless
Chromium, with panva's oidc-provider on another site.

The app is served on ``http://localhost:<port>``, oidc-provider on ``http://127.0.0.1:<port>``:
different sites, so the provider's form POST to the callback is cross-site and Chromium sends
no ``SameSite=Lax`` cookie with it. The sign-in must still complete, through the same-origin
hop, with the state cookie Lax, and no address the browser visits carries the code.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from flask import Flask, Response, request
from helpers import record_cookies_set
from markupsafe import escape
from oidc_provider_server import OidcProviderServer
from test_browser import TIMEOUT_MS, browser  # noqa: F401 (the fixture)
from test_par import SECRET, op_block

from flask_social_oauth2 import OAuth2Info, SocialOAuth2, SocialProfile, SocialProvider
from flask_social_oauth2.local_idp.serving import LoopbackServer
from flask_social_oauth2.web.form_post import HOP_FIELD

pytestmark = pytest.mark.browser

STATE_COOKIE = "social_oauth2_state"


@dataclass
class Site:
    """The app on localhost, oidc-provider on 127.0.0.1, and the POSTs the app received."""

    url: str
    server: OidcProviderServer
    posts: list[dict[str, Any]]


@pytest.fixture
def site(oidc_provider_factory: Callable[..., OidcProviderServer]) -> Iterator[Site]:
    app = Flask("form_post_browser_app")
    serving = LoopbackServer(app, "localhost", 0)  # no request before the app is set up below
    try:
        url = f"http://localhost:{serving.port}"
        client = {
            "client_id": "app",
            "client_secret": SECRET,
            "token_endpoint_auth_method": "client_secret_post",
            "redirect_uris": [f"{url}/authenticate/op"],
        }
        server = oidc_provider_factory([client], dpop_nonce_required=False)
        posts: list[dict[str, Any]] = []
        app.config.update(
            SECRET_KEY="form-post-browser-test",
            TRUSTED_HOSTS=["localhost"],
            SOCIAL_OAUTH2_PROVIDERS={"op": op_block(server, responseMode="form_post")},
        )
        social = SocialOAuth2(app)

        @app.before_request
        def record() -> None:
            if request.method == "POST":
                posts.append(
                    {
                        "hop": HOP_FIELD in request.form,
                        "state_cookie": any(
                            name.startswith(STATE_COOKIE) for name in request.cookies
                        ),
                        "origin": request.headers.get("Origin"),
                        "code": request.form.get("code"),
                    }
                )

        @social.on_authenticated
        def signed_in(
            provider: SocialProvider, info: OAuth2Info, profile: SocialProfile
        ) -> Response:
            shown = escape(json.dumps({"sub": profile.provider_key, "email": profile.email}))
            page = f"<!doctype html><title>Signed in</title><pre id='profile'>{shown}</pre>"
            return Response(page, mimetype="text/html")

        yield Site(url, server, posts)
    finally:
        serving.stop()


def test_a_form_post_sign_in_across_sites_with_a_lax_state_cookie(
    browser: Any,  # noqa: F811 (the fixture)
    site: Site,
) -> None:
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    urls: list[str] = []
    state_cookies = record_cookies_set(page, STATE_COOKIE)
    page.on("request", lambda sent: urls.append(sent.url))
    try:
        page.goto(f"{site.url}/authenticate/op")
        page.wait_for_selector("#profile")
        assert page.url == f"{site.url}/authenticate/op"  # the hop's POST answered the page
        profile = json.loads(page.text_content("#profile") or "{}")
    finally:
        context.close()

    assert profile == {"sub": "alice", "email": "alice@example.test"}
    # oidc-provider's page posted cross-site, without the Lax state cookie; the hop brought it
    assert [post["hop"] for post in site.posts] == [False, True]
    assert [post["state_cookie"] for post in site.posts] == [False, True]
    assert site.posts[0]["origin"] == site.server.issuer
    assert site.posts[1]["origin"] == "null"  # the hop page sends no referrer
    assert state_cookies
    assert all("SameSite=Lax" in value for value in state_cookies)
    token_requests = [entry for entry in site.server.log() if entry.get("route") == "token"]
    assert [entry["status"] for entry in token_requests] == [200]
    code = site.posts[0]["code"]
    assert code
    assert not any(code in url for url in urls)
