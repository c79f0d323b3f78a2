"""Sign in with Apple in a real headless Chromium, with the provider on another site.

The app is served on ``http://localhost:<port>``, the Apple-like server on
``http://127.0.0.1:<port>``: different sites, so the provider's form POST to the callback is
cross-site and Chromium sends no ``SameSite=Lax`` cookie with it. The sign-in must still
complete, through the same-origin hop, with the state cookie Lax; the name comes with the
first sign-in only; and no address the browser visits carries the ``user`` JSON, the code or
the ID token.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from flask import Flask, Response, request
from helpers import record_cookies_set
from markupsafe import escape
from test_browser import CHROMIUM_ARGS, TIMEOUT_MS, chromium_path

from example_app.serve import APPLE_USER, run_example
from flask_social_oauth2 import OAuth2Info, SocialOAuth2, SocialProfile, SocialProvider
from flask_social_oauth2.local_idp import LocalUser
from flask_social_oauth2.local_idp.apple import LocalAppleProvider
from flask_social_oauth2.local_idp.serving import LoopbackServer
from flask_social_oauth2.providers import apple_secret

pytestmark = pytest.mark.browser

SERVICES_ID = "com.example.web"
ADA = LocalUser.from_name_email("Ada Lovelace", "ada@example.test")
STATE_COOKIE = "social_oauth2_state"


class Site:
    """The app on localhost and the Apple server on 127.0.0.1, with what the app saw."""

    def __init__(self, apple: LocalAppleProvider, port: int, seen: list[dict[str, Any]]) -> None:
        self.apple = apple
        self.url = f"http://localhost:{port}"
        self.seen = seen


def make_app(apple: LocalAppleProvider, seen: list[dict[str, Any]]) -> Flask:
    app = Flask("apple_browser_app")
    app.config.update(
        SECRET_KEY="apple-browser-test",
        TRUSTED_HOSTS=["localhost"],
        SOCIAL_OAUTH2_PROVIDERS={"apple": apple.settings_block(SERVICES_ID, "/authenticate/apple")},
    )
    social = SocialOAuth2(app)

    @app.before_request
    def record() -> None:
        if request.method == "POST":
            seen.append(
                {
                    "hop": "social_oauth2_hop" in request.form,
                    "state_cookie": any(name.startswith(STATE_COOKIE) for name in request.cookies),
                    "origin": request.headers.get("Origin"),
                }
            )

    @social.on_authenticated
    def signed_in(provider: SocialProvider, info: OAuth2Info, profile: SocialProfile) -> Response:
        shown = {
            "provider_key": profile.provider_key,
            "first_name": profile.first_name,
            "last_name": profile.last_name,
            "email": profile.email,
            "email_verified": profile.email_verified,
        }
        shown_json = escape(json.dumps(shown))
        page = f"<!doctype html><title>Signed in</title><pre id='profile'>{shown_json}</pre>"
        return Response(page, mimetype="text/html")

    return app


@pytest.fixture
def site() -> Iterator[Site]:
    apple_secret.SECRETS.clear()
    seen: list[dict[str, Any]] = []
    with LocalAppleProvider("127.0.0.1") as apple:
        apple.auto_approve = ADA
        serving = LoopbackServer(make_app(apple, seen), "localhost", 0)
        try:
            apple.register_client(
                SERVICES_ID, [f"http://localhost:{serving.port}/authenticate/apple"]
            )
            yield Site(apple, serving.port, seen)
        finally:
            serving.stop()


@pytest.fixture
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=chromium_path(), headless=True, args=CHROMIUM_ARGS, timeout=60_000
        )
        try:
            yield launched
        finally:
            launched.close()


def sign_in(page: Any, site: Site) -> dict[str, Any]:
    page.goto(f"{site.url}/authenticate/apple")
    page.wait_for_selector("#profile")
    assert page.url == f"{site.url}/authenticate/apple"  # the hop's POST answered the page
    profile: dict[str, Any] = json.loads(page.text_content("#profile") or "{}")
    return profile


def test_apple_sign_in_across_sites_with_a_lax_state_cookie(browser: Any, site: Site) -> None:
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    urls: list[str] = []
    state_cookies = record_cookies_set(page, STATE_COOKIE)
    console_errors: list[str] = []
    page.on("request", lambda sent: urls.append(sent.url))
    page.on(
        "console",
        lambda message: console_errors.append(message.text) if message.type == "error" else None,
    )
    try:
        first = sign_in(page, site)
        second = sign_in(page, site)
    finally:
        context.close()

    assert first["first_name"] == "Ada"
    assert first["last_name"] == "Lovelace"
    assert second["first_name"] is None
    assert second["last_name"] is None
    for profile in (first, second):
        assert profile["provider_key"] == ADA.sub
        assert profile["email"] == ADA.email
        assert profile["email_verified"] is True

    # The state cookie is SameSite=Lax, so the provider's cross-site POST came without it and
    # the hop (same-site) brought it.
    started = [value for value in state_cookies if "Max-Age=0" not in value]
    assert started
    assert all("SameSite=Lax" in value for value in state_cookies)
    posts = site.seen
    assert [post["hop"] for post in posts] == [False, True, False, True]
    assert [post["state_cookie"] for post in posts] == [False, True, False, True]
    assert posts[0]["origin"] == site.apple.url  # the provider's page, another site
    assert posts[1]["origin"] == "null"  # the hop page sends no referrer: Origin is null

    # No address the browser visited carries the user JSON, a code or an ID token.
    assert len(site.apple.id_tokens) == 2
    secrets = [*site.apple.id_tokens, "firstName", "Lovelace"]
    secrets += [form["code"] for form in site.apple.posted_forms]
    for url in urls:
        for secret in secrets:
            assert secret not in url, f"{secret[:12]}... in {url}"
    # The one expected failure is the favicon's 404; a CSP violation would be listed.
    assert [text for text in console_errors if not text.startswith("Failed to load")] == []


def test_the_example_app_with_the_local_apple_server(browser: Any) -> None:
    """``python -m example_app --apple``, opened at ``http://localhost:<port>/`` as its output
    says: the local Apple-like server on 127.0.0.1 is another site."""
    with run_example(0, 0, apple=True) as running:
        app_url = f"http://localhost:{urlsplit(running.url).port}/"
        context = browser.new_context()
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        urls: list[str] = []
        page.on("request", lambda sent: urls.append(sent.url))
        try:
            page.goto(app_url)
            page.click("#provider-apple")
            page.wait_for_url(f"{app_url}profile")
            assert page.text_content("#name") == "Ada Lovelace"
            assert page.text_content("#email") == APPLE_USER.email
            page.click("#sign-out")
            page.wait_for_url(app_url)
            page.click("#provider-apple")
            page.wait_for_url(f"{app_url}profile")
            assert page.text_content("#name") == APPLE_USER.email  # no name the second time
        finally:
            context.close()
    assert running.apple is not None
    for url in urls:
        assert "firstName" not in url
        assert not any(token in url for token in running.apple.id_tokens)
