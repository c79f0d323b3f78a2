"""Sign-in starts from another origin's page need the user's click (SECURITY.md line 37).

A GET start marked ``Sec-Fetch-Site: cross-site`` or ``same-site`` answers a confirmation page of
the app's own; its form POSTs the start back with a token bound to this browser and provider.
The provider is the real authorization server of the ``idp`` fixture, which records every
authorization and token request it receives.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from flask import Flask
from helpers import (
    CLIENT_ID,
    CLIENT_SECRET,
    LOCAL_REDIRECT,
    MakeApp,
    callback_path,
    follow_to_provider,
    idp_block,
    query_of,
)

from flask_social_oauth2.errors import ConfigurationError
from flask_social_oauth2.local_idp import LocalIdentityProvider

CROSS_SITE = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}
SAME_ORIGIN_POST = {"Sec-Fetch-Site": "same-origin", "Origin": "http://localhost"}
TOKEN = re.compile(r'name="start_token" value="([^"]+)"')
ACTION = re.compile(r'<form method="post" action="([^"]+)"')


def confirmation(client: Any, path: str = "/authenticate/local", **headers: str) -> Any:
    """A cross-site GET start: the confirmation page."""
    page = client.get(path, headers={**CROSS_SITE, **headers})
    assert page.status_code == 200, page.text
    assert "Location" not in page.headers
    return page


def token_of(page: Any) -> str:
    found = TOKEN.search(page.text)
    assert found is not None, page.text
    return found.group(1)


def post_back(client: Any, page: Any, token: str | None = None, **headers: str) -> Any:
    """The confirmation page's form, posted as the browser would."""
    action = ACTION.search(page.text)
    assert action is not None
    path = action.group(1).replace("&amp;", "&")
    form = {"start_token": token if token is not None else token_of(page)}
    return client.post(path, data=form, headers={**SAME_ORIGIN_POST, **headers})


def test_s37_a_cross_site_start_asks_and_sends_nothing(
    idp_app: Flask, idp: LocalIdentityProvider
) -> None:
    page = confirmation(idp_app.test_client())
    assert "Continue to local" in page.text
    assert idp.authorization_requests == []
    assert idp.token_requests == []
    headers = page.headers
    assert headers["Cache-Control"] == "no-store"
    assert headers["Referrer-Policy"] == "same-origin"
    policy = headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in policy
    assert "<script" not in page.text
    # the POST's redirect to the provider is allowed by form-action, nothing else
    assert f"form-action 'self' http://127.0.0.1:{idp.port}" in policy


def test_s37_the_posted_confirmation_starts_and_signs_in(
    idp_app: Flask, idp: LocalIdentityProvider
) -> None:
    client = idp_app.test_client()
    page = confirmation(client, "/authenticate/local?next=/account")
    started = post_back(client, page)
    assert started.status_code == 302
    assert started.headers["Location"].startswith(f"http://127.0.0.1:{idp.port}/")
    assert query_of(started.headers["Location"])["client_id"] == CLIENT_ID
    finished = client.get(callback_path(follow_to_provider(started.headers["Location"])))
    assert finished.status_code == 302
    assert finished.headers["Location"] == "/account"  # the query's next survived the POST
    assert len(idp.token_requests) == 1


@pytest.mark.parametrize(
    "spoil",
    ["missing", "forged", "other browser", "other provider", "cross-site post", "foreign origin"],
)
def test_s37_a_foreign_or_missing_token_is_403_and_nothing_reaches_the_provider(
    make_app: MakeApp, idp: LocalIdentityProvider, spoil: str
) -> None:
    app = make_app(
        {"local": idp_block(idp), "other": idp_block(idp, redirectURL="/authenticate/other")}
    )
    client = app.test_client()
    page = confirmation(client)
    token = token_of(page)
    headers: dict[str, str] = {}
    if spoil == "missing":
        answer = client.post(
            "/authenticate/local", data={"start_token": ""}, headers=SAME_ORIGIN_POST
        )
    else:
        if spoil == "forged":
            token = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
        elif spoil == "other browser":
            client = app.test_client()  # its own cookie jar: another browser
            confirmation(client)  # which has a browser cookie of its own
        elif spoil == "other provider":
            page = confirmation(client, "/authenticate/other")
            token = token_of(page)
            page = confirmation(client)  # posted to local
        elif spoil == "cross-site post":
            headers = {"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}
        elif spoil == "foreign origin":
            headers = {"Sec-Fetch-Site": "same-origin", "Origin": "https://evil.example"}
        answer = post_back(client, page, token, **headers)
    assert answer.status_code == 403
    assert "Location" not in answer.headers
    assert "confirmation is invalid or has expired" in answer.text
    assert idp.authorization_requests == []
    assert idp.token_requests == []


def test_s37_an_expired_token_is_403(
    idp_app: Flask, idp: LocalIdentityProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = idp_app.test_client()
    page = confirmation(client)
    import time as time_module

    later = time_module.time() + 601
    monkeypatch.setattr(time_module, "time", lambda: later)  # itsdangerous reads time.time()
    assert post_back(client, page).status_code == 403
    assert idp.authorization_requests == []


@pytest.mark.parametrize(
    "headers",
    [
        {},  # a browser that sends no Sec-Fetch-Site, or a plain HTTP client
        {"Sec-Fetch-Site": "same-origin"},
        {"Sec-Fetch-Site": "none"},  # typed, bookmarked
    ],
)
def test_same_origin_links_and_typed_urls_start_at_once(
    idp_app: Flask, idp: LocalIdentityProvider, headers: dict[str, str]
) -> None:
    started = idp_app.test_client().get("/authenticate/local", headers=headers)
    assert started.status_code == 302
    assert started.headers["Location"].startswith(f"http://127.0.0.1:{idp.port}/")


def test_a_same_site_start_from_a_sibling_origin_asks_too(idp_app: Flask) -> None:
    page = confirmation(idp_app.test_client(), **{"Sec-Fetch-Site": "same-site"})
    assert "start_token" in page.text


def test_allow_restores_the_one_click_start(make_app: MakeApp, idp: LocalIdentityProvider) -> None:
    app = make_app({"local": idp_block(idp)}, SOCIAL_OAUTH2_CROSS_SITE_START="allow")
    started = app.test_client().get("/authenticate/local", headers=CROSS_SITE)
    assert started.status_code == 302


def test_a_wrong_setting_is_named(make_app: MakeApp) -> None:
    with pytest.raises(ConfigurationError, match=r"SOCIAL_OAUTH2_CROSS_SITE_START.*'confirm' or"):
        make_app({}, SOCIAL_OAUTH2_CROSS_SITE_START="ask")


def test_callbacks_are_untouched_by_the_check(idp_app: Flask, idp: LocalIdentityProvider) -> None:
    """A provider's redirect back is itself cross-site: it carries a state and is never held."""
    client = idp_app.test_client()
    started = client.get("/authenticate/local")
    callback = callback_path(follow_to_provider(started.headers["Location"]))
    finished = client.get(callback, headers=CROSS_SITE)
    assert finished.status_code == 302
    assert len(idp.token_requests) == 1


def test_two_confirmation_pages_in_two_tabs_both_work(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    app = make_app({"local": idp_block(idp)})
    client = app.test_client()
    first = confirmation(client)
    second = confirmation(client)
    assert post_back(client, first).status_code == 302
    assert post_back(client, second).status_code == 302


def test_the_browser_cookie_is_httponly_lax_and_host_prefixed_on_https(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    block = idp_block(idp, redirectURL="https://localhost/authenticate/local")
    app = make_app({"local": block})
    page = app.test_client().get(
        "/authenticate/local", base_url="https://localhost", headers=CROSS_SITE
    )
    assert page.status_code == 200
    cookie = page.headers["Set-Cookie"]
    assert cookie.startswith("__Host-social_oauth2_start_")
    assert "HttpOnly" in cookie
    assert "SameSite=Lax" in cookie
    assert "Secure" in cookie
    assert "Path=/" in cookie


def test_the_page_escapes_the_query_it_posts_back(idp_app: Flask) -> None:
    page = confirmation(idp_app.test_client(), '/authenticate/local?next="><script>x</script>')
    assert "<script>" not in page.text


def test_a_provider_without_a_server_start_says_so_without_asking(make_app: MakeApp) -> None:
    block = {
        "accessTokenURL": "https://provider.example/token",
        "redirectURL": LOCAL_REDIRECT,
        "apiURL": "https://provider.example/me",
        "clientID": CLIENT_ID,
        "clientSecret": CLIENT_SECRET,
    }
    app = make_app({"local": block})
    answer = app.test_client().get("/authenticate/local", headers=CROSS_SITE)
    assert answer.status_code == 400
    assert "start_token" not in answer.text


def test_a_form_post_block_starts_from_the_posted_confirmation(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    """A POST to a form-post block is its callback, unless it is the confirmation's."""
    app = make_app({"local": idp_block(idp, customProperties={"responseMode": "form_post"})})
    client = app.test_client()
    started = post_back(client, confirmation(client))
    assert started.status_code == 302
    assert query_of(started.headers["Location"])["response_mode"] == "form_post"
    assert idp.token_requests == []
