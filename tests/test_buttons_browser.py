"""The ready sign-in page (``SOCIAL_OAUTH2_SIGN_IN_PAGE``) in real headless Chromium: every
brand's button and a neutral one at a phone's and a desktop's width (screenshots in the test's
tmp dir), no sideways scrolling, the tab order, the contrast of every button's text, and a
click that reaches the loopback identity provider.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask
from helpers import ALICE, CLIENT_ID, CLIENT_SECRET, free_port, idp_block
from test_browser import (  # noqa: F401  (fixtures)
    Page,
    approve_at_local_provider,
    browser,
    example,
    only_loopback,
    page,
)
from test_buttons import every_brand

from example_app.serve import RunningExample
from flask_social_oauth2 import SocialOAuth2
from flask_social_oauth2.local_idp import LocalIdentityProvider
from flask_social_oauth2.local_idp.serving import LoopbackServer

pytestmark = pytest.mark.browser

#: The WCAG 2.1 contrast ratio of each button's text on its background, and the nearest
#: opaque background of the text of labels and notes on the page.
CONTRASTS_JS = """() => {
  const rgb = (text) => text.match(/[\\d.]+/g).map(Number);
  const luminance = ([r, g, b]) => {
    const c = [r, g, b].map((v) => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
  };
  const background = (element) => {
    for (let e = element; e; e = e.parentElement) {
      const color = rgb(getComputedStyle(e).backgroundColor);
      if (color.length < 4 || color[3] === 1) return color;
    }
    return [255, 255, 255];
  };
  const ratio = (a, b) => {
    const [x, y] = [luminance(a), luminance(b)].sort((p, q) => q - p);
    return (x + 0.05) / (y + 0.05);
  };
  const placeholders = Array.from(document.querySelectorAll("input[placeholder]")).map((e) => {
    const style = getComputedStyle(e, "::placeholder");
    return {text: e.placeholder, ratio: ratio(rgb(style.color), background(e)), large: false};
  });
  const texts = document.querySelectorAll(
    ".social-button__text, label, .social-message, .social-or, h1");
  return placeholders.concat(Array.from(texts).map((e) => {
    const style = getComputedStyle(e);
    const size = parseFloat(style.fontSize);
    const bold = parseInt(style.fontWeight, 10) >= 700;
    return {
      text: e.textContent.trim(),
      ratio: ratio(rgb(style.color), background(e)),
      large: size >= 24 || (bold && size >= 18.66),
    };
  }));
}"""


class SignInSite:
    """An app with the sign-in page, every brand's block, a neutral one and ``local`` (the
    loopback identity provider, approving as Alice), on a free loopback port."""

    def __init__(self, idp: LocalIdentityProvider) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        idp.register_client(CLIENT_ID, CLIENT_SECRET, [f"{self.url}/authenticate/local"])
        self.blocks = {
            **every_brand(),
            "acme": {**idp_block(idp), "redirectURL": "/authenticate/acme"},
            "local": idp_block(idp),
        }
        self.blocks["acme"]["customProperties"] = {"title": "Acme Corporation Single Sign-On"}
        app = Flask("sign_in_site")
        app.config.update(
            SECRET_KEY="browser-test-key",
            TRUSTED_HOSTS=["127.0.0.1"],
            SOCIAL_OAUTH2_PROVIDERS=self.blocks,
            SOCIAL_OAUTH2_SIGN_IN_PAGE="/sign-in",
        )

        @app.get("/done")
        def done() -> str:
            return "<!doctype html><title>Done</title><h1 id='done'>Signed in</h1>"

        SocialOAuth2(app)
        self.server = LoopbackServer(app, "127.0.0.1", port)


@pytest.fixture
def site() -> Iterator[tuple[SignInSite, LocalIdentityProvider]]:
    with LocalIdentityProvider() as idp:
        idp.auto_approve = ALICE
        running = SignInSite(idp)
        try:
            yield running, idp
        finally:
            running.server.stop()


@pytest.mark.parametrize(("width", "height"), [(360, 740), (1280, 800)])
def test_the_page_at_a_phones_and_a_desktops_width(
    page: Page,  # noqa: F811
    site: tuple[SignInSite, LocalIdentityProvider],
    width: int,
    height: int,
) -> None:
    running, _ = site
    browser_page = page.page
    browser_page.set_viewport_size({"width": width, "height": height})
    browser_page.goto(f"{running.url}/sign-in?next=/done")
    shot = page.shot(f"sign-in-{width}")
    assert shot.stat().st_size > 10_000  # a picture of the page, not a blank one
    widths = browser_page.evaluate(
        "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    assert widths[0] <= widths[1], f"the page scrolls sideways at {width} px: {widths}"
    controls = browser_page.locator(".social-button, .social-handle-form__input")
    assert controls.count() == len(running.blocks) + 1  # Bluesky: its field and its button
    for index in range(controls.count()):
        control = controls.nth(index)
        assert control.is_visible()
        box = control.bounding_box()
        assert box is not None
        assert box["x"] >= 0
        assert box["x"] + box["width"] <= width, (index, box)
        assert box["height"] >= 40  # a finger's target
    # The marks are drawn: each brand's svg has a size on the page.
    for mark in browser_page.locator(".social-mark").all():
        mark_box = mark.bounding_box()
        assert mark_box is not None
        assert mark_box["width"] == 20
    csp_errors = [text for text in page.console_errors if "Content Security Policy" in text]
    assert csp_errors == []


def test_tab_reaches_every_button_in_the_pages_order(
    page: Page,  # noqa: F811
    site: tuple[SignInSite, LocalIdentityProvider],
) -> None:
    running, _ = site
    browser_page = page.page
    browser_page.goto(f"{running.url}/sign-in")
    expected = []
    for name in running.blocks:
        expected += ["bluesky:handle", "bluesky"] if name == "bluesky" else [name]
    reached = []
    for _ in expected:
        browser_page.keyboard.press("Tab")
        reached.append(
            browser_page.evaluate(
                """() => {
                  const e = document.activeElement;
                  if (e.name === "handle") return e.form.dataset.provider + ":handle";
                  return e.dataset.provider || (e.form && e.form.dataset.provider) || e.tagName;
                }"""
            )
        )
    assert reached == expected
    # The focused button shows it: an outline of 3 px.
    outline = browser_page.evaluate("() => getComputedStyle(document.activeElement).outlineWidth")
    assert outline == "3px"
    page.shot("focused-last")


def test_every_text_on_the_page_meets_wcag_aa_contrast(
    page: Page,  # noqa: F811
    site: tuple[SignInSite, LocalIdentityProvider],
) -> None:
    running, _ = site
    browser_page = page.page
    # A failed sign-in's page shows the message too.
    browser_page.goto(f"{running.url}/authenticate/local?error=access_denied&state=forged")
    assert browser_page.locator(".social-message").is_visible()
    page.shot("with-message")
    contrasts: list[dict[str, Any]] = browser_page.evaluate(CONTRASTS_JS)
    texts = [item["text"] for item in contrasts]
    for wording in ("alice.bsky.social", "Sign in with Google", "Continue with Facebook"):
        assert any(text.startswith(wording) for text in texts), texts
    assert len(contrasts) >= len(running.blocks) + 3  # the buttons, the heading, label, message
    low = [
        (item["text"], round(item["ratio"], 2))
        for item in contrasts
        if item["ratio"] < (3.0 if item["large"] else 4.5)
    ]
    assert low == []


def test_a_button_reaches_the_loopback_provider_and_signs_in(
    page: Page,  # noqa: F811
    site: tuple[SignInSite, LocalIdentityProvider],
) -> None:
    running, idp = site
    browser_page = page.page
    browser_page.goto(f"{running.url}/sign-in?next=/done")
    with browser_page.expect_request(lambda r: r.url.startswith(idp.authorization_url)):
        browser_page.click(".social-button[data-provider=local]")
    browser_page.wait_for_url(f"{running.url}/done")
    assert browser_page.text_content("#done") == "Signed in"
    assert len(idp.authorization_requests) == 1


def test_the_examples_ready_page_at_a_phones_width_signs_in(
    page: Page,  # noqa: F811
    example: RunningExample,  # noqa: F811
) -> None:
    """The example app's ready page (its own template around the extension's buttons), in
    its light and dark colours: no sideways scrolling, readable labels, and a sign-in."""
    browser_page = page.page
    browser_page.set_viewport_size({"width": 360, "height": 740})
    for scheme in ("dark", "light"):
        browser_page.emulate_media(color_scheme=scheme)
        browser_page.goto(f"{example.url}sign-in")
        page.shot(f"example-ready-page-{scheme}")
        widths = browser_page.evaluate(
            "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
        )
        assert widths[0] <= widths[1], widths
        contrasts: list[dict[str, Any]] = browser_page.evaluate(CONTRASTS_JS)
        low = [(c["text"], round(c["ratio"], 2)) for c in contrasts if c["ratio"] < 4.5]
        assert low == [], scheme
    assert browser_page.locator(".social-button").count() >= 3  # local, local-two, Bluesky
    approve_at_local_provider(
        page,
        ".social-button[data-provider=local]",
        "Ada Lovelace",
        "ada@example.test",
        example.url,
    )
    assert browser_page.text_content("#name") == "Ada Lovelace"
    only_loopback(page, example)
