"""The example app's account page: what it says of each identity's access token, its header
once the identity it names is unlinked, and a ``GET`` of a button's address.

The browser's view of the same page, at a phone's and a desktop's width, is in
tests/test_browser.py.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import time
from pathlib import Path

import pytest
from flask import Flask
from helpers import callback_path, follow_to_provider
from test_example_app import ADA, BOB, account_form, csrf_token, no_credentials, two_local

from flask_social_oauth2 import OAuth2Info
from flask_social_oauth2.local_idp import LocalIdentityProvider
from flask_social_oauth2.testing import sign_in

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from example_app.account import token_status

__all__ = ["no_credentials", "two_local"]  # the fixtures this module uses from the app's tests

TwoLocal = tuple[Flask, LocalIdentityProvider, LocalIdentityProvider]


@pytest.mark.parametrize(
    ("expires_in", "refresh_token", "said"),
    [
        (3600, "r", "access token valid for 3600 s"),
        (0.3, None, "access token valid for 1 s"),  # never "valid for 0 s"
        (10, "r", "access token valid for 10 s, will refresh on the next call"),  # in the leeway
        (-1, "r", "access token expired, will refresh on the next call"),
        (-1, None, "access token expired: sign in with it again to call the API"),
        (None, "r", None),  # a provider that did not say how long it lives
    ],
)
def test_what_the_page_says_of_a_token(
    expires_in: float | None, refresh_token: str | None, said: str | None
) -> None:
    now = 1_000_000.0
    token = OAuth2Info(
        access_token="a",
        expires_in=3600 if expires_in is not None and expires_in > 3000 else 60,
        refresh_token=refresh_token,
        expires_at=None if expires_in is None else now + expires_in,
    )
    with Flask(__name__).app_context():  # the refresh leeway is the app's setting (30 s)
        assert token_status(token, now) == said
    assert token_status(None, now) is None


def expire(app: Flask, provider: str, key: str, **changes: object) -> None:
    """Make the stored token of ``key`` at ``provider`` expired a second ago."""
    with app.app_context():
        store = app.extensions["social_oauth2"].token_store
        token = store.load(provider, key)
        store.save(provider, key, dataclasses.replace(token, expires_at=time.time() - 1, **changes))


def token_line(page: str, provider: str) -> str:
    match = re.search(rf'id="token-{re.escape(provider)}">([^<]*)<', page)
    assert match is not None, page
    return match.group(1)


def test_an_expired_token_is_called_expired_never_valid_for_0_s(two_local: TwoLocal) -> None:
    app, _, _ = two_local
    client = app.test_client()
    sign_in(client, "local", ADA)
    sign_in(client, "local-two", BOB)
    page = client.get("/profile").get_data(as_text=True)
    assert token_line(page, "local") == "access token valid for 60 s"
    expire(app, "local", ADA.sub)
    expire(app, "local-two", BOB.sub, refresh_token=None)
    page = client.get("/profile").get_data(as_text=True)
    assert token_line(page, "local") == "access token expired, will refresh on the next call"
    assert token_line(page, "local-two") == (
        "access token expired: sign in with it again to call the API"
    )
    assert "valid for 0 s" not in page


def header(page: str) -> str:
    """The page's header: the tag, the name and the e-mail address above the sign-ins."""
    start = page.index('<span class="tag"')
    return page[start : page.index("</div>\n</div>", start)]


def test_unlinking_the_identity_the_header_shows_takes_it_off_the_page(
    two_local: TwoLocal,
) -> None:
    app, _, idp2 = two_local
    client = app.test_client()
    sign_in(client, "local", ADA)
    started = client.get("/authenticate/local-two", query_string={"next": "/profile"})
    idp2.auto_approve = BOB  # the last sign-in: the header shows Bob's identity
    callback = callback_path(follow_to_provider(started.headers["Location"]))
    assert client.get(callback).headers["Location"] == "/profile"
    shown = header(client.get("/profile").get_data(as_text=True))
    assert "Signed in with Second local identity provider" in shown
    assert "Bob Builder" in shown

    unlink = f"/unlink/local-two/{BOB.sub}"
    page = client.post(unlink, data=account_form(client, unlink), follow_redirects=True).text
    assert len(idp2.revocation_requests) == 1
    shown = header(page)
    assert '<span class="tag" id="signed-in-with">Signed in</span>' in shown
    assert '<h1 id="name">Ada Lovelace</h1>' in shown  # the user, not an identity
    for gone in ("Second local identity provider", "Bob Builder", BOB.email or "?"):
        assert gone not in shown
    assert "Second local identity provider is unlinked." in page
    assert BOB.sub not in page  # nor the last sign-in's profile table
    assert 'id="profile"' not in page
    assert 'id="identity-local"' in page  # Ada's own identity stays, signed in
    assert client.get("/").headers["Location"] == "/profile"
    assert client.get(callback).headers["Location"] == "/profile"  # Back: still signed in

    unlink = f"/unlink/local/{ADA.sub}"  # an identity the header does not show
    sign_in(client, "local-two", BOB)
    client.post(unlink, data=account_form(client, unlink))
    assert "Bob Builder" in header(client.get("/profile").get_data(as_text=True))


def test_a_get_of_a_buttons_address_goes_to_the_account_page(two_local: TwoLocal) -> None:
    """The address bar shows the call's address after "Call the API": typing it again, or a
    bookmark, is a GET that does nothing and lands on the account page, never a bare 405."""
    app, idp, _ = two_local
    client = app.test_client()
    sign_in(client, "local", ADA)
    for address in (f"/call/local/{ADA.sub}", f"/unlink/local/{ADA.sub}"):
        answer = client.get(address)
        assert answer.status_code == 303, address
        assert answer.headers["Location"] == "/profile"
    assert 'id="identity-local"' in client.get("/profile").text  # nothing was unlinked
    assert [request.grant_type for request in idp.token_requests] == ["authorization_code"]
    assert idp.revocation_requests == []

    sign_out = client.get("/sign-out")  # another form's address: the app's own 405 page
    assert sign_out.status_code == 405
    assert "POST" in sign_out.headers["Allow"]
    assert '<h1 id="error-title">Use the page&#39;s button</h1>' in sign_out.text
    assert 'href="/"' in sign_out.text
    assert client.get("/profile", follow_redirects=False).status_code == 200  # still signed in
    assert csrf_token(client)
