"""The example app in a real headless Chromium (Debian's ``chromium``), driven by Playwright.

Run with ``tox -e browser`` or ``pytest -m browser``. Chromium is not downloaded by Playwright:
the test uses ``/usr/bin/chromium`` (or ``CHROMIUM_PATH``) and fails, never skips, without it.
Each test saves a screenshot of every page under its tmp dir.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import os
import re
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from atproto_server import AtprotoServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from example_app.serve import RunningExample, run_example

pytestmark = pytest.mark.browser

#: This machine's network is closed; without these flags Chromium stalls on background fetches.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_MS = 15_000


def chromium_path() -> str:
    """The Chromium executable: ``CHROMIUM_PATH``, else Debian's ``/usr/bin/chromium``."""
    configured = os.environ.get("CHROMIUM_PATH") or "/usr/bin/chromium"
    found = shutil.which(configured)
    if found is None:
        pytest.fail(
            f"Chromium not found at {configured!r}. Install it with `apt-get install chromium`"
            " (Debian/Ubuntu), or set CHROMIUM_PATH to a Chromium or Chrome executable."
            " Do not run `playwright install`: the test uses the system browser.",
            pytrace=False,
        )
    return found


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless Chromium, shared by the tests of this module."""
    path = chromium_path()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("Playwright is missing: pip install -e '.[browser]'", pytrace=False)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=path, headless=True, args=CHROMIUM_ARGS, timeout=60_000
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def example() -> Iterator[RunningExample]:
    """The example app and its local identity provider on free loopback ports."""
    with run_example(0, 0) as running:
        yield running


class Page:
    """A browser page that records every request and console error, and takes screenshots."""

    def __init__(self, browser: Any, directory: Path) -> None:
        self.context = browser.new_context(viewport={"width": 1000, "height": 760})
        self.page = self.context.new_page()
        self.page.set_default_timeout(TIMEOUT_MS)
        self.directory = directory
        self.hosts: set[str] = set()
        self.console_errors: list[str] = []
        self.page.on("request", lambda request: self.hosts.add(urlsplit(request.url).netloc))
        self.page.on(
            "console",
            lambda message: (
                self.console_errors.append(message.text) if message.type == "error" else None
            ),
        )

    def shot(self, name: str) -> Path:
        path = self.directory / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def page(browser: Any, tmp_path: Path) -> Iterator[Page]:
    opened = Page(browser, tmp_path)
    try:
        yield opened
    finally:
        opened.close()


def only_loopback(page: Page, example: RunningExample) -> None:
    servers = (example.url, example.idp.url, example.idp2.url if example.idp2 else "")
    hosts = {urlsplit(url).netloc for url in servers if url}
    assert page.hosts <= hosts, f"requests left loopback: {sorted(page.hosts)}"
    # A status the test expects (the 403 of a refused sign-in) is logged as "Failed to load
    # resource"; anything else, such as a Content-Security-Policy violation, is a failure.
    errors = [text for text in page.console_errors if not text.startswith("Failed to load")]
    assert errors == [], errors


def approve_at_local_provider(page: Page, button: str, name: str, email: str, url: str) -> None:
    """Click ``button`` (a sign-in or link button), approve at the local identity provider as
    ``name`` with ``email``, and wait for the example's account page (``url`` is the app's)."""
    page.page.click(button)
    page.page.fill("#name", name)
    page.page.fill("#email", email)
    page.page.click("#approve")
    page.page.wait_for_url(f"{url}profile")


def test_sign_in_with_the_local_provider_and_sign_out(page: Page, example: RunningExample) -> None:
    browser_page = page.page
    response = browser_page.goto(example.url)
    assert response is not None
    assert response.status == 200
    assert browser_page.text_content("h1") == "Sign in"
    page.shot("1-sign-in")

    browser_page.click("#provider-local")
    browser_page.wait_for_selector("#name")
    assert browser_page.url.startswith(example.idp.url)
    page.shot("2-local-provider")
    browser_page.fill("#name", "Ada Lovelace")
    browser_page.fill("#email", "ada@example.test")
    browser_page.click("#approve")

    browser_page.wait_for_url(f"{example.url}profile")
    assert browser_page.text_content("#name") == "Ada Lovelace"
    assert browser_page.text_content("#email") == "ada@example.test"
    table = browser_page.text_content("#profile") or ""
    assert "local" in table
    assert "Lovelace" in table
    page.shot("3-signed-in")

    browser_page.click("#sign-out")
    browser_page.wait_for_url(example.url)
    assert browser_page.text_content("h1") == "Sign in"
    page.shot("4-signed-out")
    browser_page.goto(f"{example.url}profile")
    assert browser_page.url == example.url, "the session still held the profile"
    only_loopback(page, example)


def test_a_work_e_mail_signs_in_at_its_companys_own_provider(
    page: Page, example: RunningExample
) -> None:
    """The ready page's work e-mail form: ``bo@globex.test`` belongs to the customer
    ``globex``, a provider the example loads at runtime on its second identity provider, which
    shows the address it was given as ``login_hint``."""
    browser_page = page.page
    browser_page.goto(f"{example.url}sign-in")
    browser_page.fill("#social-email", "bo@globex.test")
    browser_page.click(".social-email-form button[type=submit]")
    browser_page.wait_for_selector("#name")
    assert example.idp2 is not None
    assert browser_page.url.startswith(example.idp2.url)
    assert browser_page.input_value("#email") == "bo@globex.test"  # the login_hint
    page.shot("work-e-mail-provider")
    browser_page.fill("#name", "Bo Globex")
    browser_page.click("#approve")
    browser_page.wait_for_url(f"{example.url}profile")
    assert browser_page.text_content("#name") == "Bo Globex"
    assert "globex" in (browser_page.text_content("#profile") or "")
    only_loopback(page, example)


def test_deny_shows_the_error_page(page: Page, example: RunningExample) -> None:
    browser_page = page.page
    browser_page.goto(example.url)
    browser_page.click("#provider-local")
    browser_page.wait_for_selector("#deny")
    with browser_page.expect_response(lambda r: "/authenticate/local?" in r.url) as answer:
        browser_page.click("#deny")
    assert answer.value.status == 403
    browser_page.wait_for_selector("#error-message")
    assert browser_page.text_content("#error-title") == "Sign-in cancelled"
    assert "cancelled or refused" in (browser_page.text_content("#error-message") or "")
    page.shot("5-denied")
    browser_page.click("#back")
    browser_page.wait_for_url(example.url)
    assert browser_page.text_content("h1") == "Sign in"
    only_loopback(page, example)


def test_client_side_sign_in_with_pkce_made_in_the_browser(
    page: Page, example: RunningExample
) -> None:
    """A provider without authorizationURL: the page's script makes the PKCE pair with
    WebCrypto, runs the redirect to the provider and its state check, and POSTs the code with
    the verifier; the provider checks the pair when the server redeems the code."""
    browser_page = page.page
    posted: list[Any] = []
    browser_page.on(
        "request",
        lambda request: posted.append(request.post_data_json) if request.method == "POST" else None,
    )
    browser_page.goto(example.url)
    browser_page.click("#provider-local-spa")
    browser_page.wait_for_url(f"{example.url}client-side")
    page.shot("6-client-side")
    browser_page.click("#start")
    browser_page.wait_for_selector("#name")
    assert browser_page.url.startswith(example.idp.url)
    (authorization,) = example.idp.authorization_requests
    assert authorization["code_challenge_method"] == "S256"
    assert "authorize" in browser_page.url
    browser_page.fill("#name", "Grace Hopper")
    browser_page.fill("#email", "grace@example.test")
    browser_page.click("#approve")

    browser_page.wait_for_url(f"{example.url}profile")
    assert browser_page.text_content("#name") == "Grace Hopper"
    assert "local-spa" in (browser_page.text_content("#profile") or "")
    page.shot("7-client-side-signed-in")
    posts = [body for body in posted if isinstance(body, dict) and "code_verifier" in body]
    assert len(posts) == 1
    verifier = posts[0]["code_verifier"]
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", verifier)
    (token_request,) = example.idp.token_requests
    assert token_request.status_code == 200
    assert token_request.form["code_verifier"] == verifier
    assert token_request.form["redirect_uri"] == f"{example.url}client-side"
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    assert authorization["code_challenge"] == challenge.rstrip(b"=").decode()
    only_loopback(page, example)


def test_link_call_the_api_across_a_refresh_unlink_and_sign_out(page: Page) -> None:
    """The example as a small real app: sign in, link a second provider, call both APIs, wait
    past the token's short lifetime and call again (a refresh), unlink one, sign out."""
    with run_example(0, 0, token_lifetime=4) as example:
        assert example.idp2 is not None
        browser_page = page.page
        browser_page.goto(example.url)
        approve_at_local_provider(
            page, "#provider-local", "Ada Lovelace", "ada@example.test", example.url
        )
        assert "Your sign-ins (Ada Lovelace)" in (browser_page.text_content("main") or "")

        browser_page.click("#link-local-two")
        browser_page.wait_for_selector("#name")
        assert browser_page.url.startswith(example.idp2.url)
        browser_page.fill("#name", "Ada at work")
        browser_page.fill("#email", "ada@work.example")
        browser_page.click("#approve")
        browser_page.wait_for_url(f"{example.url}profile")
        assert browser_page.is_visible("#identity-local")
        assert browser_page.is_visible("#identity-local-two")
        assert "Your sign-ins (Ada Lovelace)" in (browser_page.text_content("main") or "")
        page.shot("5-two-identities")

        browser_page.click("#call-local-two")
        browser_page.wait_for_selector("#api-answer")
        assert browser_page.text_content("#api-status") == "200"
        assert "ada@work.example" in (browser_page.text_content("#api-body") or "")
        assert not browser_page.is_visible("#api-refreshed")

        time.sleep(3)  # past the refresh point of a 4-second token (half its lifetime)
        browser_page.click("#call-local")
        browser_page.wait_for_selector("#api-answer")
        assert browser_page.text_content("#api-status") == "200"
        assert browser_page.is_visible("#api-refreshed")
        assert "ada@example.test" in (browser_page.text_content("#api-body") or "")
        grants = [request.grant_type for request in example.idp.token_requests]
        assert grants == ["authorization_code", "refresh_token"]
        page.shot("6-api-after-refresh")

        browser_page.click("#unlink-local-two")
        browser_page.wait_for_url(f"{example.url}profile")
        assert not browser_page.is_visible("#identity-local-two")
        assert browser_page.is_visible("#link-local-two")
        assert len(example.idp2.revocation_requests) == 1
        page.shot("7-unlinked")

        browser_page.click("#sign-out")
        browser_page.wait_for_url(example.url)
        assert browser_page.text_content("h1") == "Sign in"
        only_loopback(page, example)


#: What the account page's layout looks like, measured in the page: how far the page is wider
#: than the window, and on how many lines each label, key and button of the sign-ins is set
#: (the distinct tops of the text's line boxes).
LAYOUT_SCRIPT = """() => {
  const lines = (element) => {
    const range = document.createRange();
    range.selectNodeContents(element);
    return new Set([...range.getClientRects()].map((box) => Math.round(box.top))).size;
  };
  const all = (selector) => [...document.querySelectorAll(selector)].map(lines);
  return {
    overflow: document.documentElement.scrollWidth - window.innerWidth,
    labels: all("#identities .identity-label"),
    keys: all("#identities .identity-key"),
    buttons: all("#identities button"),
  };
}"""


def look_at(page: Page, name: str, *, rows: int) -> None:
    """Screenshot the page at a phone's width (360 px) and a desktop's (1280 px), and check its
    layout at each: nothing wider than the window, and each of the ``rows`` sign-ins' label,
    key and buttons on one line (the screenshots are under the test's tmp dir, to look at)."""
    for width in (360, 1280):
        page.page.set_viewport_size({"width": width, "height": 800})
        layout = page.page.evaluate(LAYOUT_SCRIPT)
        page.shot(f"{name}-{width}")
        assert layout["overflow"] <= 0, (width, layout)
        assert layout["labels"] == [1] * rows, (width, layout)
        assert layout["keys"] == [1] * rows, (width, layout)
        assert set(layout["buttons"]) <= {1}, (width, layout)


def test_the_account_page_at_a_phones_and_a_desktops_width(page: Page) -> None:
    """Two sign-ins on the account page, looked at 360 and 1280 px wide; their tokens expire;
    a GET of the call's address; the identity the header names is unlinked."""
    with run_example(0, 0) as example:
        browser_page = page.page
        browser_page.goto(example.url)
        look_at(page, "account-0-sign-in", rows=0)
        approve_at_local_provider(
            page, "#provider-local", "Ada Lovelace", "ada@example.test", example.url
        )
        approve_at_local_provider(
            page, "#link-local-two", "Ada at work", "ada@work.example", example.url
        )
        assert "Second local identity provider" in (browser_page.text_content(".tag") or "")
        assert (browser_page.text_content("#token-local") or "").startswith(
            "access token valid for "
        )
        look_at(page, "account-1-two-sign-ins", rows=2)

        with example.app.app_context():  # both tokens' lifetimes are over
            store = example.app.extensions["social_oauth2"].token_store
            keys = {}
            for found in example.app.extensions["social_oauth2"].extension.identities("1"):
                token = store.load(found.provider, found.provider_key)
                expired = dataclasses.replace(token, expires_at=time.time() - 1)
                store.save(found.provider, found.provider_key, expired)
                keys[found.provider] = found.provider_key
        browser_page.reload()
        for provider in ("local", "local-two"):
            said = browser_page.text_content(f"#token-{provider}")
            assert said == "access token expired, will refresh on the next call", said
        look_at(page, "account-2-expired", rows=2)

        call = f"{example.url}call/local/{keys['local']}"
        with browser_page.expect_response(call) as typed:
            landed = browser_page.goto(call)  # the address bar's URL after "Call the API"
        assert typed.value.status == 303
        assert landed is not None
        assert landed.status == 200
        assert browser_page.url == f"{example.url}profile"

        browser_page.click("#unlink-local-two")
        browser_page.wait_for_url(f"{example.url}profile")
        assert browser_page.text_content(".tag") == "Signed in"
        assert browser_page.text_content("#name") == "Ada Lovelace"
        assert not browser_page.is_visible("#email")
        assert not browser_page.is_visible("#profile")
        who = browser_page.text_content(".who") or ""
        assert "Ada at work" not in who
        assert "ada@work.example" not in who
        look_at(page, "account-3-unlinked", rows=1)
        only_loopback(page, example)


def bluesky_environ(server: AtprotoServer) -> dict[str, str]:
    """The example's Bluesky variables for the local PDS (its handles resolve through it)."""
    return {
        "BLUESKY_ENTRYWAY": server.pds_url,
        "BLUESKY_PLC_URL": server.plc_url,
        "BLUESKY_ALLOW_LOOPBACK": "true",
    }


def bluesky_to_consent(page: Page, example: RunningExample, server: AtprotoServer) -> Any:
    """Type alice.test into the example's handle form and sign in on the PDS's own sign-in page
    (a React app: found by roles and labels); returns its consent page's Authorize button."""
    browser_page = page.page
    browser_page.goto(example.url)
    browser_page.get_by_role("textbox", name="Sign in with Bluesky").fill("alice.test")
    page.shot("bluesky-1-handle-form")
    browser_page.get_by_role("button", name="Continue").click()
    browser_page.wait_for_url(f"{server.pds_url}/oauth/authorize?*")
    # The handle arrived as login_hint: the account is filled in.
    username = browser_page.get_by_role("textbox", name="Username or Email")
    assert username.input_value() == "alice.test"
    password = browser_page.get_by_role("textbox", name="Password", exact=True)
    password.fill(server.accounts["alice.test"].password)
    page.shot("bluesky-2-pds-sign-in")
    browser_page.get_by_role("button", name="Sign in", exact=True).click()
    authorize = browser_page.get_by_role("button", name="Authorize", exact=True)
    authorize.wait_for()
    assert "Grant access to your account:alice.test" in (browser_page.text_content("body") or "")
    page.shot("bluesky-3-pds-consent")
    return authorize


@pytest.mark.atproto
def test_sign_in_with_bluesky_through_the_handle_form(
    page: Page, atproto_server: AtprotoServer
) -> None:
    """The example's handle form against the real AT Protocol PDS on loopback: type alice.test,
    sign in and consent on the PDS's own pages, land on the account page as alice.test, call
    the API (getSession on her PDS, with the DPoP-bound token), link the local provider to the
    same user, sign out."""
    alice = atproto_server.accounts["alice.test"]
    with run_example(0, 0, environ=bluesky_environ(atproto_server)) as example:
        browser_page = page.page
        bluesky_to_consent(page, example, atproto_server).click()

        browser_page.wait_for_url(f"{example.url}profile")
        assert browser_page.text_content("#name") == "alice.test"
        assert "Signed in with Bluesky" in (browser_page.text_content("main") or "")
        assert "Your sign-ins (alice.test)" in (browser_page.text_content("main") or "")
        assert alice.did in (browser_page.text_content("#identity-bluesky") or "")
        table = browser_page.text_content("#profile") or ""
        assert alice.did in table
        assert "alice.test" in table
        page.shot("bluesky-4-signed-in")

        browser_page.click("#call-bluesky")
        browser_page.wait_for_selector("#api-answer")
        assert browser_page.text_content("#api-status") == "200"
        body = browser_page.text_content("#api-body") or ""
        assert f'"did": "{alice.did}"' in body
        assert '"handle": "alice.test"' in body
        page.shot("bluesky-5-api")

        approve_at_local_provider(  # another provider, linked to the same user
            page, "#link-local", "Alice Liddell", "alice@example.test", example.url
        )
        assert browser_page.is_visible("#identity-bluesky")
        assert browser_page.is_visible("#identity-local")
        assert "Your sign-ins (alice.test)" in (browser_page.text_content("main") or "")
        page.shot("bluesky-6-linked")

        browser_page.click("#sign-out")
        browser_page.wait_for_url(example.url)
        assert browser_page.text_content("h1") == "Sign in"
        app_host = urlsplit(example.url).netloc
        servers = {urlsplit(url).netloc for url in (example.idp.url, atproto_server.pds_url)}
        assert page.hosts <= {app_host, *servers}, sorted(page.hosts)


@pytest.mark.atproto
def test_denying_access_on_the_pds_shows_the_cancelled_page(
    page: Page, atproto_server: AtprotoServer
) -> None:
    with run_example(0, 0, environ=bluesky_environ(atproto_server)) as example:
        browser_page = page.page
        bluesky_to_consent(page, example, atproto_server)
        with browser_page.expect_response(lambda r: "/authenticate/bluesky?" in r.url) as answer:
            browser_page.get_by_role("button", name="Deny access").click()
        assert answer.value.status == 403
        browser_page.wait_for_selector("#error-message")
        assert browser_page.text_content("#error-title") == "Sign-in cancelled"
        assert "cancelled or refused" in (browser_page.text_content("#error-message") or "")
        page.shot("bluesky-denied")
        browser_page.click("#back")
        browser_page.wait_for_url(example.url)
        assert browser_page.is_visible("#bluesky-form")
