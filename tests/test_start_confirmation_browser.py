"""A sign-in start from another origin's page, in real headless Chromium (SECURITY.md line 37).

The example app and its local identity provider run on loopback; a second app on another
loopback port plays the stranger's page. Chromium marks navigations from it
``Sec-Fetch-Site: same-site`` (same host, another port) or ``cross-site`` (``localhost``
against ``127.0.0.1``), so the app answers its confirmation page: a user who clicks it signs
in; a page that redirects, auto-submits or frames the start gets nowhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from markupsafe import escape
from test_browser import Page, browser, example, page  # noqa: F401  (fixtures)

from example_app.serve import RunningExample
from flask_social_oauth2.local_idp.serving import LoopbackServer

pytestmark = pytest.mark.browser


class Stranger:
    """Another origin's pages, each aimed at the example app's sign-in start."""

    def __init__(self, start: str, host: str) -> None:
        app = Flask("stranger")
        target = escape(start)

        @app.get("/link")
        def link() -> str:
            return f'<!doctype html><title>Offers</title><a id="go" href="{target}">Sign in</a>'

        @app.get("/redirect")
        def redirect() -> str:
            return f'<!doctype html><script>location.href = "{start}";</script>'

        @app.get("/autopost")
        def autopost() -> str:
            return (
                f'<!doctype html><form id="f" method="post" action="{target}">'
                '<input name="start_token" value="forged"></form>'
                '<script>document.getElementById("f").submit();</script>'
            )

        @app.get("/frame")
        def frame() -> str:
            return f'<!doctype html><iframe id="f" src="{target}"></iframe>'

        self.server = LoopbackServer(app, host, 0)
        self.url = f"http://{host}:{self.server.port}"


@pytest.fixture(params=["127.0.0.1", "localhost"], ids=["same-site", "cross-site"])
def stranger(request: Any, example: RunningExample) -> Iterator[Stranger]:  # noqa: F811
    site = Stranger(f"{example.url}authenticate/local?next=/profile", request.param)
    try:
        yield site
    finally:
        site.server.stop()


def test_a_linked_start_asks_and_the_click_signs_in(
    page: Page,  # noqa: F811
    example: RunningExample,  # noqa: F811
    stranger: Stranger,
) -> None:
    browser_page = page.page
    browser_page.goto(f"{stranger.url}/link")
    browser_page.click("#go")
    browser_page.wait_for_selector("text=Continue to")
    assert browser_page.url.startswith(f"{example.url}authenticate/local")
    assert example.idp.authorization_requests == []
    page.shot("1-confirmation")
    browser_page.get_by_role("button", name="Continue to").click()
    browser_page.wait_for_selector("#name")
    assert browser_page.url.startswith(example.idp.url)
    browser_page.fill("#name", "Ada Lovelace")
    browser_page.fill("#email", "ada@example.test")
    browser_page.click("#approve")
    browser_page.wait_for_url(f"{example.url}profile")
    assert browser_page.text_content("#name") == "Ada Lovelace"
    page.shot("2-signed-in")
    assert len(example.idp.authorization_requests) == 1
    csp_errors = [text for text in page.console_errors if "Content Security Policy" in text]
    assert csp_errors == []


def test_a_redirecting_page_gets_only_the_question(
    page: Page,  # noqa: F811
    example: RunningExample,  # noqa: F811
    stranger: Stranger,
) -> None:
    browser_page = page.page
    browser_page.goto(f"{stranger.url}/redirect")
    browser_page.wait_for_selector("text=Continue to")
    assert browser_page.url.startswith(f"{example.url}authenticate/local")
    assert example.idp.authorization_requests == []
    page.shot("3-redirected")


def test_an_auto_submitting_page_is_refused(
    page: Page,  # noqa: F811
    example: RunningExample,  # noqa: F811
    stranger: Stranger,
) -> None:
    browser_page = page.page
    with browser_page.expect_response(lambda r: "/authenticate/local" in r.url) as answer:
        browser_page.goto(f"{stranger.url}/autopost")
    assert answer.value.status == 403
    browser_page.wait_for_selector("#error-message")
    page.shot("4-auto-submitted")
    assert example.idp.authorization_requests == []


def test_a_framing_page_shows_nothing(
    page: Page,  # noqa: F811
    example: RunningExample,  # noqa: F811
    stranger: Stranger,
    tmp_path: Path,
) -> None:
    browser_page = page.page
    with browser_page.expect_response(lambda r: "/authenticate/local" in r.url) as answer:
        browser_page.goto(f"{stranger.url}/frame")
    assert answer.value.status == 200  # the question, which the browser refuses to frame
    frame = browser_page.frame_locator("#f")
    assert frame.get_by_role("button", name="Continue to").count() == 0
    assert example.idp.authorization_requests == []
