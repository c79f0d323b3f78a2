"""The sign-in buttons (the Jinja globals ``social_sign_in_button`` and
``social_sign_in_buttons``) and the ready sign-in page (``SOCIAL_OAUTH2_SIGN_IN_PAGE``)."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from flask import Flask, g, render_template_string
from helpers import LOCAL_REDIRECT, MakeApp, block_for, example_value, idp_block, query_of, sign_in
from markupsafe import Markup

from flask_social_oauth2 import SocialOAuth2
from flask_social_oauth2.errors import ConfigurationError, SocialOAuth2Error, UnknownProviderError
from flask_social_oauth2.local_idp import LocalIdentityProvider
from flask_social_oauth2.providers.buttons import (
    social_sign_in_button,
    social_sign_in_buttons,
    work_email_form_applies,
)
from flask_social_oauth2.runtime import current_runtime
from flask_social_oauth2.web import buttons

MARKS = Path(buttons.__file__).with_name("brand_marks.json")
BRANDED = ("google", "apple", "microsoft", "github", "facebook", "linkedin", "bluesky")


def apple_block() -> dict[str, Any]:
    return block_for(
        "apple",
        clientSecret=example_value("APPLE_PRIVATE_KEY", ""),
        customProperties={
            "teamID": example_value("APPLE_TEAM_ID", ""),
            "keyID": example_value("APPLE_KEY_ID", ""),
        },
    )


def bluesky_block() -> dict[str, Any]:
    return block_for(
        "bluesky",
        authorizationURL="https://bsky.example/oauth/authorize",
        clientID="http://localhost",
        clientSecret=example_value("BLUESKY_PRIVATE_KEY", ""),
    )


def every_brand() -> dict[str, Any]:
    blocks: dict[str, Any] = {name: block_for(name) for name in BRANDED}
    blocks["apple"] = apple_block()
    blocks["bluesky"] = bluesky_block()
    return blocks


def render(app: Flask, source: str, path: str = "/", **context: Any) -> str:
    with app.test_request_context(path):
        return render_template_string(source, **context)


class Elements(HTMLParser):
    """The start tags of a page, with their attributes, and its text."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        if data.strip():
            self.text.append(data.strip())

    def all(self, tag: str, **wanted: str) -> list[dict[str, str | None]]:
        return [
            attrs
            for name, attrs in self.tags
            if name == tag and all(attrs.get(k) == v for k, v in wanted.items())
        ]


# -- every brand, and the neutral button ----------------------------------------------------------


def test_every_brand_has_its_wording_colour_class_and_its_mark(make_app: MakeApp) -> None:
    app = make_app(every_brand())
    marks = json.loads(MARKS.read_text())["marks"]
    for name in BRANDED:
        html = render(app, "{{ social_sign_in_button(name) }}", name=name)
        page = Elements(html)
        classes = [attrs.get("class") for tag, attrs in page.tags if tag in ("a", "button")]
        assert classes == [f"social-button social-button--{name}"], html
        assert buttons.BRAND_WORDING[name] in page.text, (name, page.text)
        (svg,) = page.all("svg")
        assert svg["aria-hidden"] == "true"
        assert svg["viewbox"] == marks[name]["viewBox"]
        assert marks[name]["body"] in html


def test_the_wording_follows_each_brands_guidelines() -> None:
    assert buttons.BRAND_WORDING == {
        "google": "Sign in with Google",
        "apple": "Sign in with Apple",
        "microsoft": "Sign in with Microsoft",
        "github": "Sign in with GitHub",
        "facebook": "Continue with Facebook",
        "linkedin": "Sign in with LinkedIn",
        "bluesky": "Sign in with Bluesky",
    }


def test_a_button_is_a_link_to_the_route(make_app: MakeApp) -> None:
    app = make_app({"github": block_for("github")})
    html = render(app, "{{ social_sign_in_button('github') }}")
    (link,) = Elements(html).all("a")
    assert link["href"] == "/authenticate/github"
    assert link["data-provider"] == "github"
    assert link["class"] == "social-button social-button--github"
    assert "<script" not in html
    assert "style=" not in html


def test_the_brand_follows_the_provider_class_not_the_blocks_name(make_app: MakeApp) -> None:
    app = make_app(
        {"work": block_for("work")},
        SOCIAL_OAUTH2_PROVIDER_CLASSES={"work": "github"},
    )
    html = render(app, "{{ social_sign_in_button('work') }}")
    (link,) = Elements(html).all("a")
    assert link["class"] == "social-button social-button--github"
    assert link["href"] == "/authenticate/work"


def test_azure_gets_microsofts_button(make_app: MakeApp) -> None:
    html = render(make_app({"azure": block_for("azure")}), "{{ social_sign_in_button('azure') }}")
    assert "social-button--microsoft" in html
    assert "Sign in with Microsoft" in html


def test_the_neutral_button_says_the_title(make_app: MakeApp) -> None:
    app = make_app(
        {
            "acme": block_for("acme", customProperties={"title": "Acme Corp"}),
            "plain-idp": block_for("plain-idp"),
            "gitlab": block_for("gitlab"),
        }
    )
    texts = {
        name: Elements(render(app, "{{ social_sign_in_button(n) }}", n=name)).text
        for name in ("acme", "plain-idp", "gitlab")
    }
    assert texts == {
        "acme": ["Sign in with Acme Corp"],
        "plain-idp": ["Sign in with plain-idp"],
        "gitlab": ["Sign in with GitLab"],  # a built-in's own title
    }
    html = render(app, "{{ social_sign_in_button('acme') }}")
    assert "social-button--neutral" in html
    assert "<svg" not in html


def test_text_replaces_the_wording(make_app: MakeApp) -> None:
    app = make_app({"google": block_for("google")})
    html = render(app, "{{ social_sign_in_button('google', text='Sign up with Google') }}")
    assert Elements(html).text == ["Sign up with Google"]


# -- escaping ------------------------------------------------------------------------------------


def test_titles_and_text_are_escaped(make_app: MakeApp) -> None:
    evil = '<img src=x onerror="alert(1)">'
    app = make_app({"acme": block_for("acme", customProperties={"title": evil})})
    html = render(app, "{{ social_sign_in_button('acme') }}")
    assert "<img" not in html
    assert "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in html
    html = render(app, "{{ social_sign_in_button('acme', text=t) }}", t=evil)
    assert "<img" not in html
    assert len(Elements(html).tags) == 2  # the link and its span


def test_the_result_is_markup_that_jinja_does_not_escape_again(make_app: MakeApp) -> None:
    app = make_app({"github": block_for("github")})
    with app.test_request_context("/"):
        button = social_sign_in_button("github")
        assert isinstance(button, Markup)
        assert isinstance(social_sign_in_buttons(), Markup)
    assert render(app, "{{ social_sign_in_button('github') }}") == str(button)


# -- next ----------------------------------------------------------------------------------------


def test_next_is_encoded_into_the_link(make_app: MakeApp) -> None:
    app = make_app({"github": block_for("github")})
    html = render(app, "{{ social_sign_in_button('github', next=n) }}", n='/a b?x=1&y="2"')
    # a space is no same-origin path the route would take: left out
    assert Elements(html).all("a")[0]["href"] == "/authenticate/github"
    html = render(app, "{{ social_sign_in_button('github', next=n) }}", n="/account?tab=1&x=%3C")
    href = Elements(html).all("a")[0]["href"] or ""
    assert query_of(href) == {"next": "/account?tab=1&x=%3C"}
    assert href.startswith("/authenticate/github?next=")
    assert "&" not in href  # the path's own & is encoded: one query parameter


@pytest.mark.parametrize(
    "target",
    ["https://evil.example/", "//evil.example", "/\\evil.example", "javascript:alert(1)", "/\t/x"],
)
def test_a_foreign_next_is_left_out(make_app: MakeApp, target: str) -> None:
    app = make_app({"github": block_for("github"), "bluesky": bluesky_block()})
    html = render(app, "{{ social_sign_in_buttons(next=n) }}", n=target)
    page = Elements(html)
    assert page.all("a")[0]["href"] == "/authenticate/github"
    assert page.all("input", name="next") == []
    assert "evil" not in html


def test_the_route_takes_the_next_the_button_carries(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    app = make_app({"local": idp_block(idp)})
    href = Elements(render(app, "{{ social_sign_in_button('local', next='/after?x=1') }}")).all(
        "a"
    )[0]["href"]
    assert href is not None
    client = app.test_client()
    done = sign_in(client, "local", next=query_of(href)["next"])
    assert done.status_code == 302
    assert done.headers["Location"] == "/after?x=1"
    assert LOCAL_REDIRECT.endswith(href.partition("?")[0])


# -- Bluesky's handle form -------------------------------------------------------------------------


def test_bluesky_is_a_labelled_handle_form(make_app: MakeApp) -> None:
    app = make_app({"bluesky": bluesky_block()})
    html = render(app, "{{ social_sign_in_button('bluesky', next='/home') }}")
    page = Elements(html)
    (form,) = page.all("form")
    assert form["method"] == "get"
    assert form["action"] == "/authenticate/bluesky"
    (label,) = page.all("label")
    (field,) = page.all("input", name="handle")
    assert label["for"] == field["id"]
    assert "Your Bluesky handle" in page.text
    assert page.all("input", type="hidden", name="next", value="/home")
    (button,) = page.all("button")
    assert button["type"] == "submit"
    assert "social-button--bluesky" in (button["class"] or "")
    assert "Sign in with Bluesky" in page.text


def test_the_handle_form_starts_the_bluesky_route_with_the_handle(make_app: MakeApp) -> None:
    """The form's fields are what the route reads: ``handle`` (here malformed, so the route
    answers its 400 before it resolves anything) and ``next``."""
    app = make_app({"bluesky": bluesky_block()})
    answer = app.test_client().get(
        "/authenticate/bluesky", query_string={"handle": "not a handle!", "next": "/home"}
    )
    assert answer.status_code == 400
    assert "handle" in answer.text.lower()


# -- ID-token sign-in (Google's markup) ----------------------------------------------------------


def test_an_id_token_block_gets_googles_markup(make_app: MakeApp) -> None:
    app = make_app(
        {"google": block_for("google", customProperties={"idTokenSignIn": "true"})},
    )
    with app.test_request_context("/", base_url="https://localhost"):
        g.csp_nonce = "n0nce-for-csp"
        html = str(social_sign_in_button("google"))
    page = Elements(html)
    (onload,) = page.all("div", id="g_id_onload")
    assert onload["data-client_id"] == "test-client"
    assert onload["data-login_uri"] == "https://localhost/authenticate/google"
    assert onload["data-use_fedcm_for_prompt"] == "true"
    (script,) = page.all("script")
    assert script["src"] == "https://accounts.google.com/gsi/client"
    assert script["nonce"] == "n0nce-for-csp"
    assert page.all("div", **{"class": "g_id_signin social-google-button"})


def test_the_page_issues_this_browser_an_id_token_nonce_for_googles_markup(
    make_app: MakeApp,
) -> None:
    app = make_app(
        {"google": block_for("google", customProperties={"idTokenSignIn": "true"})},
        SOCIAL_OAUTH2_SIGN_IN_PAGE="/sign-in",
    )
    browser = app.test_client()
    answer = browser.get("/sign-in?next=/after")
    (onload,) = Elements(answer.text).all("div", id="g_id_onload")
    nonce = onload["data-nonce"]
    assert nonce is not None
    assert len(nonce) >= 22
    cookies = [c for c in answer.headers.getlist("Set-Cookie") if "_nonce=" in c]
    assert len(cookies) == 1
    assert "HttpOnly" in cookies[0]
    assert nonce not in cookies[0]  # signed, kept as its digest: the page alone cannot replay it
    second = Elements(browser.get("/sign-in?next=/after").text).all("div", id="g_id_onload")[0]
    assert second["data-nonce"] == nonce  # reused while fresh: one nonce per browser
    assert (
        Elements(app.test_client().get("/sign-in").text).all("div", id="g_id_onload")[0][
            "data-nonce"
        ]
        != nonce
    )  # another browser, another nonce


def test_googles_markup_carries_the_id_token_nonce_and_escapes() -> None:
    html = str(buttons.one_tap_markup('a"b', "https://app.example/x?a=1&b=2", "n<1>", None))
    page = Elements(html)
    (onload,) = page.all("div", id="g_id_onload")
    assert onload["data-client_id"] == 'a"b'
    assert onload["data-login_uri"] == "https://app.example/x?a=1&b=2"
    assert onload["data-nonce"] == "n<1>"
    assert "n<1>" not in html
    assert page.all("script")[0].get("nonce") is None


# -- bad names -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["nope", "", "GitHub"])
def test_an_unknown_name_is_a_clear_error(make_app: MakeApp, name: str) -> None:
    app = make_app({"github": block_for("github")})
    with pytest.raises(UnknownProviderError, match=r"unknown provider .*configured: github"):
        render(app, "{{ social_sign_in_button(n) }}", n=name)


def test_a_name_that_is_not_a_string_is_a_clear_error(make_app: MakeApp) -> None:
    app = make_app({"github": block_for("github")})
    with pytest.raises(UnknownProviderError, match="unknown provider '3'"):
        render(app, "{{ social_sign_in_button(3) }}")


# -- every button --------------------------------------------------------------------------------


def test_every_button_in_configuration_order(make_app: MakeApp) -> None:
    blocks = every_brand()
    blocks["acme"] = block_for("acme", customProperties={"title": "Acme"})
    app = make_app(blocks)
    html = render(app, "{{ social_sign_in_buttons(next='/x') }}")
    page = Elements(html)
    assert page.all("div", **{"class": "social-buttons"})
    shown = [attrs["data-provider"] for _, attrs in page.tags if "data-provider" in attrs]
    assert shown == list(blocks)
    assert [a["href"] for a in page.all("a")] == [
        f"/authenticate/{name}?next=/x" for name in blocks if name != "bluesky"
    ]


def test_no_provider_renders_an_empty_list(make_app: MakeApp) -> None:
    assert render(make_app({}), "{{ social_sign_in_buttons() }}") == (
        '<div class="social-buttons"></div>'
    )


# -- the vendored marks ----------------------------------------------------------------------------


def test_the_marks_name_their_cc0_source_and_hold_only_paths() -> None:
    document = json.loads(MARKS.read_text())
    assert "CC0-1.0" in document["licence"]
    assert document["made_by"] == "tests/vendor_brand_marks.py"
    assert set(document["marks"]) == set(BRANDED)
    for brand, mark in document["marks"].items():
        assert re.fullmatch(r"(simple-icons|@iconify-json/logos)@[\d.]+ [a-z-]+", mark["source"])
        assert re.fullmatch(r"0 0 [\d.]+ [\d.]+", mark["viewBox"]), brand
        # nothing but <path fill=... d=.../> elements: no script, style, link or event handler
        assert re.fullmatch(r'(<path fill="[#\w]+" d="[-\d.,a-zA-Z ]+"/>)+', mark["body"]), brand


def test_the_vendoring_script_reads_both_icon_sets_as_they_ship() -> None:
    import vendor_brand_marks as script

    svg = (
        '<svg role="img" viewBox="0 0 24 24" xmlns="http://www.w3.org/2000/svg">'
        '<title>GitHub</title><path d="M12 0z"/></svg>'
    )
    assert script.simple_icon(svg) == ("0 0 24 24", '<path fill="currentColor" d="M12 0z"/>')
    icon_set = {"width": 16, "icons": {"x": {"height": 20, "body": '<path d="M0 0"/>'}}}
    assert script.iconify_icon(icon_set, "x") == ("0 0 16 20", '<path d="M0 0"/>')
    with pytest.raises(ValueError, match="not a simple-icons SVG"):
        script.simple_icon("<p>")
    marks = json.loads(MARKS.read_text())["marks"]
    assert {brand: marks[brand]["source"].split()[1] for brand in marks} == {
        brand: icon for brand, (_, icon) in script.SOURCES.items()
    }


# -- the sign-in page ----------------------------------------------------------------------------


def test_the_page_is_off_by_default(make_app: MakeApp) -> None:
    app = make_app({"github": block_for("github")})
    assert app.test_client().get("/sign-in").status_code == 404
    assert "social_oauth2.sign_in_page" not in app.view_functions


def test_the_page_shows_every_button_and_its_headers(make_app: MakeApp) -> None:
    blocks = every_brand()
    app = make_app(blocks, SOCIAL_OAUTH2_SIGN_IN_PAGE="/sign-in")
    answer = app.test_client().get("/sign-in", query_string={"next": "/home"})
    assert answer.status_code == 200
    page = Elements(answer.text)
    shown = [attrs["data-provider"] for _, attrs in page.tags if "data-provider" in attrs]
    assert shown == list(blocks)
    assert all((a["href"] or "").endswith("?next=/home") for a in page.all("a"))
    assert page.all("meta", name="viewport")
    assert page.all("html", lang="en")
    policy = answer.headers["Content-Security-Policy"]
    (style,) = page.all("style")
    assert f"style-src 'nonce-{style['nonce']}'" in policy
    assert "form-action 'self' https:" in policy  # the handle form's start goes to the PDS
    assert "script-src" not in policy
    assert answer.headers["Cache-Control"] == "no-store"
    assert "social-button--google" in answer.text.split("</style>")[0]  # the buttons' CSS


def test_the_page_allows_googles_script_for_an_id_token_block(make_app: MakeApp) -> None:
    app = make_app(
        {"google": block_for("google", customProperties={"idTokenSignIn": "true"})},
        SOCIAL_OAUTH2_SIGN_IN_PAGE="/sign-in",
    )
    answer = app.test_client().get("/sign-in")
    (script,) = Elements(answer.text).all("script")
    policy = answer.headers["Content-Security-Policy"]
    assert f"script-src 'nonce-{script['nonce']}' https://accounts.google.com/gsi/client" in policy
    assert "frame-src https://accounts.google.com/gsi/" in policy
    assert "form-action 'self';" in policy


def test_a_failed_sign_in_lands_on_the_page_with_its_message(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    app = make_app({"local": idp_block(idp)}, SOCIAL_OAUTH2_SIGN_IN_PAGE="/sign-in")
    answer = sign_in(app.test_client(), "local", callback={"error": "access_denied"})
    assert answer.status_code == 403
    page = Elements(answer.text)
    (alert,) = page.all("p", role="alert")
    assert any("cancel" in text.lower() or "denied" in text.lower() for text in page.text)
    assert alert["class"] == "social-message"
    assert page.all("a", href="/authenticate/local")  # try again from here
    assert answer.headers["Cache-Control"] == "no-store"


def test_without_the_page_a_failure_is_the_plain_error_page(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    app = make_app({"local": idp_block(idp)})
    answer = sign_in(app.test_client(), "local", callback={"error": "access_denied"})
    assert answer.status_code == 403
    assert "Sign-in failed" in answer.text
    assert "social-button" not in answer.text


def test_an_app_template_replaces_the_page(make_app: MakeApp, tmp_path: Path) -> None:
    folder = tmp_path / "templates" / "social_oauth2"
    folder.mkdir(parents=True)
    (folder / "sign_in.html").write_text(
        "<h1>Our own page</h1>{{ social_sign_in_button('github', next=next) }}"
        "{% if message %}<p>{{ message }}</p>{% endif %}"
    )
    app = make_app({"github": block_for("github")}, SOCIAL_OAUTH2_SIGN_IN_PAGE="/login")
    app.template_folder = str(tmp_path / "templates")
    answer = app.test_client().get("/login?next=/x")
    assert answer.status_code == 200
    assert answer.text.startswith("<h1>Our own page</h1>")
    assert Elements(answer.text).all("a")[0]["href"] == "/authenticate/github?next=/x"


def test_the_buttons_css_can_be_included_in_an_apps_own_style(make_app: MakeApp) -> None:
    app = make_app({"github": block_for("github")})
    html = render(app, '<style>{% include "social_oauth2/buttons.css" %}</style>')
    assert ".social-button--github{" in html
    assert "--social-button-radius" in html


@pytest.mark.parametrize(
    "value", ["sign-in", "", 3, "/a b", "/sign-in/<name>", "/ünicode", b"/sign-in"]
)
def test_a_bad_page_setting_is_a_configuration_error(make_app: MakeApp, value: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"SOCIAL_OAUTH2_SIGN_IN_PAGE.*must be a path"):
        make_app({}, SOCIAL_OAUTH2_SIGN_IN_PAGE=value)


def test_the_work_email_form_waits_for_domain_lookup(make_app: MakeApp) -> None:
    """The page's e-mail form needs ``social.provider_for_email`` and a block's ``domains``
    (or a domain loader); without the lookup, a block's ``domains`` alone shows none."""
    app = make_app(
        {"github": block_for("github", customProperties={"domains": "example.com"})},
        SOCIAL_OAUTH2_SIGN_IN_PAGE="/sign-in",
    )
    with app.app_context():
        runtime = current_runtime()
        applies = work_email_form_applies(runtime)
        assert applies is hasattr(runtime.extension, "provider_for_email")
    answer = app.test_client().get("/sign-in")
    assert ('name="email"' in answer.text) is applies


# -- the work e-mail form ------------------------------------------------------------------------


class FindsProvidersByDomain(SocialOAuth2):
    """Stands in for the extension's ``provider_for_email`` (home realm discovery): a block's
    ``customProperties.domains``."""

    def provider_for_email(self, address: str) -> str | None:
        local, at, domain = address.rpartition("@")
        if not at or not local or not domain:
            raise ValueError(f"not an e-mail address: {address!r}")
        for name, provider in self.providers.items():
            if domain in provider.settings.custom_properties.get("domains", "").split():
                return name
        return None


def domains_app(idp: LocalIdentityProvider) -> Flask:
    app = Flask("domains")
    app.config.update(
        SECRET_KEY="test-secret-key",
        TRUSTED_HOSTS=["localhost"],
        SOCIAL_OAUTH2_SIGN_IN_PAGE="/sign-in",
        SOCIAL_OAUTH2_PROVIDERS={
            "local": idp_block(idp, customProperties={"domains": "example.test"})
        },
    )
    FindsProvidersByDomain(app)
    return app


def test_the_work_email_form_starts_the_domains_provider_with_a_login_hint(
    idp: LocalIdentityProvider,
) -> None:
    app = domains_app(idp)
    client = app.test_client()
    page = Elements(client.get("/sign-in?next=/x").text)
    (field,) = page.all("input", name="email")
    assert [attrs for attrs in page.all("label") if attrs["for"] == field["id"]]
    assert "Sign in with your work e-mail" in page.text
    assert field["type"] == "email"
    assert page.all("input", type="hidden", name="next", value="/x")
    (form,) = page.all("form", **{"class": "social-email-form"})
    assert (form["method"], form["action"]) == ("get", "/sign-in")
    started = client.get("/sign-in", query_string={"email": "ada@example.test", "next": "/x"})
    assert started.status_code == 302
    assert started.headers["Location"].startswith(idp.authorization_url)
    assert query_of(started.headers["Location"])["login_hint"] == "ada@example.test"
    done = client.get(callback_path_of(started.headers["Location"]))
    assert done.status_code == 302
    assert done.headers["Location"] == "/x"


def callback_path_of(authorization_url: str) -> str:
    from helpers import callback_path, follow_to_provider

    return callback_path(follow_to_provider(authorization_url))


@pytest.mark.parametrize(
    ("query", "status", "said"),
    [
        ({"email": "ada@elsewhere.example"}, 404, "No sign-in is set up for that e-mail"),
        ({"email": "not an address"}, 400, "That is not an e-mail address."),
        ({"email": "ada@example.test", "code": "c", "state": "s"}, 400, "This page does not take"),
    ],
)
def test_a_work_email_without_a_provider_is_said_on_the_page(
    idp: LocalIdentityProvider, query: dict[str, str], status: int, said: str
) -> None:
    answer = domains_app(idp).test_client().get("/sign-in", query_string=query)
    assert answer.status_code == status
    page = Elements(answer.text)
    assert page.all("p", role="alert")
    assert any(text.startswith(said) for text in page.text), page.text
    assert page.all("a", href="/authenticate/local")  # the buttons are still there
    assert idp.authorization_requests == []


def test_an_email_start_from_another_site_is_confirmed_first(idp: LocalIdentityProvider) -> None:
    client = domains_app(idp).test_client()
    address = "/sign-in?email=ada%40example.test"
    asked = client.get(address, headers={"Sec-Fetch-Site": "cross-site"})
    assert asked.status_code == 200
    page = Elements(asked.text)
    (form,) = page.all("form")
    assert form["method"] == "post"
    assert form["action"] == address
    (token,) = page.all("input", name="start_token")
    started = client.post(
        address,
        data={"start_token": token["value"]},
        headers={"Origin": "http://localhost", "Sec-Fetch-Site": "same-origin"},
    )
    assert started.status_code == 302
    assert query_of(started.headers["Location"])["login_hint"] == "ada@example.test"


def test_a_post_to_the_page_without_an_email_is_refused(make_app: MakeApp) -> None:
    app = make_app({}, SOCIAL_OAUTH2_SIGN_IN_PAGE="/sign-in")
    assert app.test_client().post("/sign-in").status_code == 405


def test_a_client_side_block_has_no_button(make_app: MakeApp) -> None:
    app = make_app(
        {
            "spa": block_for("spa", authorizationURL=None, scope="profile"),
            "github": block_for("github"),
            # no authorizationURL, but an issuer whose discovery document names one
            "google": block_for("google", authorizationURL=None),
        }
    )
    html = render(app, "{{ social_sign_in_buttons() }}")
    shown = [attrs["data-provider"] for _, attrs in Elements(html).tags if "data-provider" in attrs]
    assert shown == ["github", "google"]
    with pytest.raises(SocialOAuth2Error, match="'spa' has no sign-in button: it has no author"):
        render(app, "{{ social_sign_in_button('spa') }}")
