"""The local identity provider, exercised over real HTTP on loopback."""

from __future__ import annotations

import ast
import base64
import hashlib
import json
import logging
import os
import secrets
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import requests
from authlib.oidc.discovery import OpenIDProviderMetadata
from helpers import child_process, stop_process
from joserfc import jwt
from joserfc.errors import BadSignatureError
from joserfc.jwk import KeySet
from joserfc.jwt import JWTClaimsRegistry

from flask_social_oauth2 import local_idp
from flask_social_oauth2.local_idp import (
    LocalIdentityProvider,
    LocalUser,
    ManualClock,
    create_idp_app,
)

CLIENT_ID = "test-app"
CLIENT_SECRET = "idp-test-secret-value-42"
REDIRECT_URI = "http://127.0.0.1:9/authenticate/local"
ADA = LocalUser.from_name_email("Ada Lovelace", "ada@example.test")
TIMEOUT = 10


# --------------------------------------------------------------------- helpers


def pkce_pair() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


class Flow:
    """One authorization code flow, built by hand."""

    def __init__(
        self, idp: LocalIdentityProvider | str, client_id: str = CLIENT_ID, **params: str
    ) -> None:
        base = idp if isinstance(idp, str) else idp.url
        self.authorization_url = f"{base}/authorize"
        self.token_url = f"{base}/token"
        self.verifier, challenge = pkce_pair()
        self.state = secrets.token_urlsafe(20)
        self.nonce = secrets.token_urlsafe(16)
        self.params: dict[str, str] = {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": REDIRECT_URI,
            "scope": "openid profile email",
            "state": self.state,
            "nonce": self.nonce,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
        }
        self.params.update(params)
        self.params = {k: v for k, v in self.params.items() if v != ""}

    @property
    def url(self) -> str:
        return f"{self.authorization_url}?{urlencode(self.params)}"

    def authorize(self) -> requests.Response:
        return requests.get(self.url, allow_redirects=False, timeout=TIMEOUT)

    def code(self) -> str:
        response = self.authorize()
        assert response.status_code == 302, response.text
        return code_from(response, self.state)

    def token(
        self,
        code: str,
        *,
        basic: bool = False,
        extra: Mapping[str, str | None] | None = None,
        **changes: str | None,
    ) -> requests.Response:
        data: dict[str, str | None] = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT_URI,
            "code_verifier": self.verifier,
        }
        auth = None
        if basic:
            auth = (CLIENT_ID, CLIENT_SECRET)
        else:
            data.update(client_id=CLIENT_ID, client_secret=CLIENT_SECRET)
        data.update(extra or {})
        data.update(changes)
        form = {k: v for k, v in data.items() if v is not None}
        return requests.post(self.token_url, data=form, auth=auth, timeout=TIMEOUT)


def redirect_query(response: requests.Response) -> dict[str, str]:
    location = response.headers["Location"]
    assert location.startswith(REDIRECT_URI + "?"), location
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


def code_from(response: requests.Response, state: str) -> str:
    query = redirect_query(response)
    assert query["state"] == state
    return query["code"]


def refresh(idp: LocalIdentityProvider, refresh_token: str) -> requests.Response:
    return requests.post(
        idp.token_url,
        data={
            "grant_type": "refresh_token",
            "refresh_token": refresh_token,
            "client_id": CLIENT_ID,
            "client_secret": CLIENT_SECRET,
        },
        timeout=TIMEOUT,
    )


def userinfo(idp: LocalIdentityProvider, access_token: str) -> requests.Response:
    return requests.get(
        idp.userinfo_url, headers={"Authorization": f"Bearer {access_token}"}, timeout=TIMEOUT
    )


class FormParser(HTMLParser):
    """Collects the inputs and buttons of the consent page."""

    def __init__(self) -> None:
        super().__init__()
        self.hidden: list[tuple[str, str]] = []
        self.ids: set[str] = set()
        self.form_action: str | None = None
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {k: v or "" for k, v in attrs}
        if "id" in attributes:
            self.ids.add(attributes["id"])
        if tag == "form":
            self.form_action = attributes.get("action")
        if tag == "input" and attributes.get("type") == "hidden":
            self.hidden.append((attributes["name"], attributes["value"]))
        for name in ("src", "href"):
            if name in attributes:
                self.links.append(attributes[name])


def parse_form(page: str) -> FormParser:
    parser = FormParser()
    parser.feed(page)
    return parser


def submit_form(idp: LocalIdentityProvider, page: str, **fields: str) -> requests.Response:
    form = parse_form(page)
    assert form.form_action == "/authorize"
    return requests.post(
        idp.authorization_url,
        data=[*form.hidden, *fields.items()],
        allow_redirects=False,
        timeout=TIMEOUT,
    )


# -------------------------------------------------------------------- fixtures


@pytest.fixture
def idp() -> Iterator[LocalIdentityProvider]:
    """A started provider with one client (client_secret_post) and no auto-approval."""
    with LocalIdentityProvider() as provider:
        provider.register_client(CLIENT_ID, CLIENT_SECRET, [REDIRECT_URI])
        yield provider


@pytest.fixture
def auto_idp(idp: LocalIdentityProvider) -> LocalIdentityProvider:
    """The same provider, approving every request for Ada."""
    idp.auto_approve = ADA
    return idp


def make_idp(**options: Any) -> LocalIdentityProvider:
    provider = LocalIdentityProvider(**options)
    provider.register_client(CLIENT_ID, CLIENT_SECRET, [REDIRECT_URI])
    provider.auto_approve = ADA
    return provider


# ---------------------------------------------------------------- construction


@pytest.mark.parametrize(
    "host",
    ["0.0.0.0", "10.0.0.1", "localhost.evil.test", "::", "example.com", "127.0.0.1.nip.io", ""],
)
def test_refuses_non_loopback_host(host: str) -> None:
    with pytest.raises(ValueError, match="loopback"):
        LocalIdentityProvider(host)


def test_accepts_loopback_hosts() -> None:
    assert LocalIdentityProvider("::1", 5001).url == "http://[::1]:5001"
    assert LocalIdentityProvider("127.0.0.2", 5001).issuer == "http://127.0.0.2:5001"
    with LocalIdentityProvider("localhost") as provider:
        assert provider.url.startswith("http://localhost:")
        discovery = requests.get(provider.discovery_url, timeout=TIMEOUT)
        assert discovery.json()["issuer"] == provider.url


def test_url_needs_a_port_before_start() -> None:
    provider = LocalIdentityProvider()
    with pytest.raises(RuntimeError, match="start"):
        _ = provider.url


def test_port_zero_picks_a_free_port_and_stop_closes_it() -> None:
    provider = LocalIdentityProvider().start()
    assert provider.running
    assert provider.port > 0
    assert requests.get(provider.jwks_url, timeout=TIMEOUT).status_code == 200
    provider.stop()
    provider.stop()  # harmless twice
    assert not provider.running
    with pytest.raises(requests.ConnectionError):
        requests.get(provider.jwks_url, timeout=TIMEOUT)
    with pytest.raises(RuntimeError, match="already started"):
        provider.start()


def test_a_taken_port_raises_oserror() -> None:
    with LocalIdentityProvider() as first:
        second = LocalIdentityProvider(port=first.port)
        with pytest.raises(OSError, match="in use"):
            second.start()
        assert not second.running
        assert requests.get(first.jwks_url, timeout=TIMEOUT).status_code == 200


def test_register_client_validates() -> None:
    provider = LocalIdentityProvider()
    with pytest.raises(ValueError, match="token_endpoint_auth_method"):
        provider.register_client("a", "b", [REDIRECT_URI], token_endpoint_auth_method="none")
    with pytest.raises(ValueError, match="redirect URI"):
        provider.register_client("a", "b", [])
    with pytest.raises(ValueError, match="sequence"):
        provider.register_client("a", "b", REDIRECT_URI)
    with pytest.raises(ValueError, match="fragment"):
        provider.register_client("a", "b", ["http://127.0.0.1/cb#x"])


def test_local_user_from_name_email() -> None:
    user = LocalUser.from_name_email("  Ada   King Lovelace ", "Ada@Example.test")
    assert user.name == "Ada King Lovelace"
    assert (user.given_name, user.family_name) == ("Ada", "King Lovelace")
    assert user.sub == LocalUser.from_name_email("Other Name", "ada@example.test ").sub
    assert len(user.sub) == 16
    int(user.sub, 16)
    single = LocalUser.from_name_email("Plato", "plato@example.test")
    assert (single.given_name, single.family_name) == ("Plato", None)
    assert single.sub != user.sub
    with pytest.raises(ValueError, match="name"):
        LocalUser.from_name_email(" ", "x@example.test")


def test_settings_block(idp: LocalIdentityProvider) -> None:
    block = idp.settings_block(CLIENT_ID, CLIENT_SECRET, "/authenticate/local")
    assert block == {
        "authorizationURL": f"{idp.url}/authorize",
        "accessTokenURL": f"{idp.url}/token",
        "redirectURL": "/authenticate/local",
        "apiURL": f"{idp.url}/userinfo",
        "clientID": CLIENT_ID,
        "clientSecret": CLIENT_SECRET,
        "scope": "openid profile email",
    }


# ------------------------------------------------------------------ code flow


def test_full_code_flow_by_hand(auto_idp: LocalIdentityProvider) -> None:
    flow = Flow(auto_idp)
    response = flow.authorize()
    assert response.status_code == 302
    assert response.headers["Referrer-Policy"] == "no-referrer"
    query = redirect_query(response)
    assert set(query) == {"code", "state"}
    assert query["state"] == flow.state

    token = flow.token(query["code"])
    assert token.status_code == 200, token.text
    assert token.headers["Content-Type"].startswith("application/json")
    assert token.headers["Cache-Control"] == "no-store"
    body = token.json()
    assert body["token_type"] == "Bearer"
    assert body["expires_in"] == 3600
    assert body["scope"] == "openid profile email"
    assert body["refresh_token"]
    assert body["id_token"].count(".") == 2

    info = userinfo(auto_idp, body["access_token"])
    assert info.status_code == 200
    assert info.json() == {
        "sub": ADA.sub,
        "name": "Ada Lovelace",
        "given_name": "Ada",
        "family_name": "Lovelace",
        "email": "ada@example.test",
        "email_verified": True,
        "preferred_username": "ada",
        "picture": f"{auto_idp.url}/avatar/{ADA.sub}.svg",
    }
    avatar = requests.get(info.json()["picture"], timeout=TIMEOUT)
    assert avatar.headers["Content-Type"].startswith("image/svg+xml")
    assert ">AL</text>" in avatar.text


def test_userinfo_claims_follow_scope(auto_idp: LocalIdentityProvider) -> None:
    flow = Flow(auto_idp, scope="openid email")
    body = flow.token(flow.code()).json()
    assert body["scope"] == "openid email"
    claims = userinfo(auto_idp, body["access_token"]).json()
    assert claims == {"sub": ADA.sub, "email": "ada@example.test", "email_verified": True}


def test_scope_is_limited_to_the_client(auto_idp: LocalIdentityProvider) -> None:
    flow = Flow(auto_idp, scope="openid admin email")
    assert flow.token(flow.code()).json()["scope"] == "openid email"


def test_userinfo_requires_a_valid_bearer_token(auto_idp: LocalIdentityProvider) -> None:
    missing = requests.get(auto_idp.userinfo_url, timeout=TIMEOUT)
    assert missing.status_code == 401
    assert missing.headers["WWW-Authenticate"].lower().startswith("bearer")
    assert userinfo(auto_idp, "not-a-token").status_code == 401

    flow = Flow(auto_idp)
    access_token = flow.token(flow.code()).json()["access_token"]
    assert userinfo(auto_idp, access_token).status_code == 200
    auto_idp.revoke_access_tokens()
    assert userinfo(auto_idp, access_token).status_code == 401


def test_access_token_expires() -> None:
    clock = ManualClock()
    with make_idp(access_token_ttl=60, clock=clock) as provider:
        flow = Flow(provider)
        body = flow.token(flow.code()).json()
        assert body["expires_in"] == 60
        clock.advance(59.9)
        assert userinfo(provider, body["access_token"]).status_code == 200
        clock.advance(0.1)
        assert userinfo(provider, body["access_token"]).status_code == 401


def test_protected_api_answers_the_token_user_until_it_expires() -> None:
    clock = ManualClock()
    with make_idp(access_token_ttl=60, clock=clock) as provider:
        flow = Flow(provider)
        access_token = flow.token(flow.code()).json()["access_token"]
        url = f"{provider.api_base_url}me"
        answer = requests.get(url, headers={"Authorization": f"Bearer {access_token}"}, timeout=10)
        assert answer.status_code == 200
        assert answer.json()["sub"] == ADA.sub
        assert answer.headers["Cache-Control"] == "no-store"
        assert requests.get(url, timeout=10).status_code == 401
        clock.advance(60)
        expired = requests.get(url, headers={"Authorization": f"Bearer {access_token}"}, timeout=10)
        assert expired.status_code == 401
        assert len(provider.api_requests) == 3


# ------------------------------------------------------------- consent page


def test_consent_page_approve(idp: LocalIdentityProvider) -> None:
    flow = Flow(idp, login_hint="grace@example.test")
    page = flow.authorize()
    assert page.status_code == 200
    assert page.headers["Content-Type"].startswith("text/html")
    assert page.headers["Referrer-Policy"] == "no-referrer"
    assert page.headers["X-Frame-Options"] == "DENY"
    csp = page.headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp
    assert "frame-ancestors 'none'" in csp
    assert "form-action 'self' http://127.0.0.1:9" in csp
    form = parse_form(page.text)
    assert {"name", "email", "approve", "deny"} <= form.ids
    assert form.links == ["/favicon.ico"]  # nothing loaded from anywhere else
    assert dict(form.hidden)["state"] == flow.state
    assert 'value="grace@example.test"' in page.text

    response = submit_form(
        idp, page.text, name="Grace Hopper", email="grace@example.test", decision="approve"
    )
    assert response.status_code == 302
    code = code_from(response, flow.state)
    access_token = flow.token(code).json()["access_token"]
    claims = userinfo(idp, access_token).json()
    assert claims["sub"] == LocalUser.from_name_email("Grace Hopper", "grace@example.test").sub
    assert claims["name"] == "Grace Hopper"


def test_consent_page_deny(idp: LocalIdentityProvider) -> None:
    flow = Flow(idp)
    page = flow.authorize()
    response = submit_form(idp, page.text, name="", email="", decision="deny")
    assert response.status_code == 302
    query = redirect_query(response)
    assert query["error"] == "access_denied"
    assert query["state"] == flow.state
    assert "code" not in query


@pytest.mark.parametrize(
    ("name", "email", "message"),
    [
        ("", "ada@example.test", "Enter a name."),
        ("Ada", "", "Enter an e-mail address."),
        ("Ada", "not-an-address", "Enter an e-mail address such as"),
        ("Ada\x00", "ada@example.test", "printable characters"),
    ],
)
def test_consent_form_is_validated(
    idp: LocalIdentityProvider, name: str, email: str, message: str
) -> None:
    page = Flow(idp).authorize()
    response = submit_form(idp, page.text, name=name, email=email, decision="approve")
    assert response.status_code == 400
    assert "Location" not in response.headers
    assert message in response.text
    assert {"name", "email", "approve"} <= parse_form(response.text).ids


def test_consent_form_needs_the_providers_token(idp: LocalIdentityProvider) -> None:
    flow = Flow(idp)
    idp.deny_next()
    forged = requests.post(
        idp.authorization_url,
        data={**flow.params, "name": "Eve", "email": "eve@example.test", "decision": "approve"},
        allow_redirects=False,
        timeout=TIMEOUT,
    )
    assert forged.status_code == 400
    assert "Location" not in forged.headers
    # The forged POST changed nothing: the pending denial is still there.
    assert redirect_query(flow.authorize())["error"] == "access_denied"

    # The token is bound to the request: changing a parameter invalidates it.
    page = flow.authorize()
    assert page.status_code == 200
    hidden = [(k, "forged" if k == "state" else v) for k, v in parse_form(page.text).hidden]
    tampered = requests.post(
        idp.authorization_url,
        data=[*hidden, ("name", "Eve"), ("email", "eve@example.test"), ("decision", "approve")],
        allow_redirects=False,
        timeout=TIMEOUT,
    )
    assert tampered.status_code == 400
    assert "Location" not in tampered.headers
    # A query string on the POST is refused too (it would bypass the token).
    with_query = requests.post(
        f"{idp.authorization_url}?redirect_uri=x",
        data=[*parse_form(page.text).hidden, ("name", "Eve"), ("email", "e@x.test")],
        allow_redirects=False,
        timeout=TIMEOUT,
    )
    assert with_query.status_code == 400
    assert "Location" not in with_query.headers


def test_consent_page_escapes_what_it_echoes(idp: LocalIdentityProvider) -> None:
    evil_client = '<script>alert("c")</script>'
    idp.register_client(evil_client, CLIENT_SECRET, [REDIRECT_URI])
    flow = Flow(idp, client_id=evil_client, state='"><img src=x onerror=alert(1)>')
    page = flow.authorize()
    assert page.status_code == 200
    assert "<script>" not in page.text
    assert "<img" not in page.text
    assert "&lt;script&gt;" in page.text
    assert dict(parse_form(page.text).hidden)["state"] == flow.params["state"]


def test_prompt_none_without_a_session_is_login_required(idp: LocalIdentityProvider) -> None:
    flow = Flow(idp, prompt="none")
    query = redirect_query(flow.authorize())
    assert query["error"] == "login_required"
    assert query["state"] == flow.state


# ------------------------------------------------- invalid authorization requests


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"client_id": "unknown-client"}, "invalid_client"),
        ({"client_id": ""}, "invalid_client"),
        ({"redirect_uri": "http://127.0.0.1:9/elsewhere"}, "invalid_request"),
        ({"redirect_uri": REDIRECT_URI + "/"}, "invalid_request"),
        ({"redirect_uri": ""}, "invalid_request"),
        ({"redirect_uri": 'http://127.0.0.1:9/"quoted"'}, "invalid_request"),
    ],
)
def test_unverifiable_requests_show_an_error_page(
    auto_idp: LocalIdentityProvider, changes: dict[str, str], error: str
) -> None:
    response = Flow(auto_idp, **changes).authorize()
    assert response.status_code == 400
    assert "Location" not in response.headers
    assert response.headers["Content-Type"].startswith("text/html")
    assert error in response.text
    assert '"quoted"' not in response.text


@pytest.mark.parametrize(
    "changes",
    [
        {"code_challenge": ""},
        {"code_challenge_method": ""},
        {"code_challenge_method": "plain"},
        {"code_challenge": "too-short"},
    ],
)
def test_pkce_s256_is_required(auto_idp: LocalIdentityProvider, changes: dict[str, str]) -> None:
    flow = Flow(auto_idp, **changes)
    response = flow.authorize()
    assert response.status_code == 302
    query = redirect_query(response)
    assert query["error"] == "invalid_request"
    assert query["state"] == flow.state
    assert "code" not in query


def test_response_type_must_be_code(auto_idp: LocalIdentityProvider) -> None:
    query = redirect_query(Flow(auto_idp, response_type="token").authorize())
    assert query["error"] == "unsupported_response_type"


def test_repeated_authorization_parameters_are_refused(auto_idp: LocalIdentityProvider) -> None:
    flow = Flow(auto_idp)
    url = f"{flow.url}&state=second"
    response = requests.get(url, allow_redirects=False, timeout=TIMEOUT)
    assert response.status_code == 400
    assert "Location" not in response.headers
    assert "Multiple" in response.text


def test_foreign_host_header_is_refused(auto_idp: LocalIdentityProvider) -> None:
    response = requests.get(
        auto_idp.discovery_url, headers={"Host": "evil.example"}, timeout=TIMEOUT
    )
    assert response.status_code == 400


# ------------------------------------------------------------- token endpoint


def test_wrong_verifier_is_rejected(auto_idp: LocalIdentityProvider) -> None:
    flow = Flow(auto_idp)
    other_verifier, _ = pkce_pair()
    response = flow.token(flow.code(), code_verifier=other_verifier)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_grant"


def test_missing_verifier_is_rejected(auto_idp: LocalIdentityProvider) -> None:
    flow = Flow(auto_idp)
    response = flow.token(flow.code(), code_verifier=None)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"


@pytest.mark.parametrize("redirect_uri", ["http://127.0.0.1:9/other", REDIRECT_URI + "?x=1", None])
def test_wrong_redirect_uri_at_token_is_rejected(
    auto_idp: LocalIdentityProvider, redirect_uri: str | None
) -> None:
    flow = Flow(auto_idp)
    response = flow.token(flow.code(), redirect_uri=redirect_uri)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_grant"


def test_code_reuse_is_rejected_and_revokes_its_tokens(auto_idp: LocalIdentityProvider) -> None:
    flow = Flow(auto_idp)
    code = flow.code()
    first = flow.token(code)
    assert first.status_code == 200
    access_token = first.json()["access_token"]
    assert userinfo(auto_idp, access_token).status_code == 200

    second = flow.token(code)
    assert second.status_code == 400
    assert second.json()["error"] == "invalid_grant"
    assert userinfo(auto_idp, access_token).status_code == 401
    assert refresh(auto_idp, first.json()["refresh_token"]).json()["error"] == "invalid_grant"


def test_code_is_single_use_under_concurrency(auto_idp: LocalIdentityProvider) -> None:
    flow = Flow(auto_idp)
    code = flow.code()
    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = sorted(pool.map(lambda _: flow.token(code).status_code, range(8)))
    assert statuses == [200] + [400] * 7


def test_code_expires() -> None:
    clock = ManualClock()
    with make_idp(code_ttl=30, clock=clock) as provider:
        flow = Flow(provider)
        code = flow.code()
        clock.advance(30)
        response = flow.token(code)
        assert response.status_code == 400
        assert response.json()["error"] == "invalid_grant"


def test_code_is_bound_to_its_client(auto_idp: LocalIdentityProvider) -> None:
    auto_idp.register_client("other-app", CLIENT_SECRET, [REDIRECT_URI])
    flow = Flow(auto_idp)
    response = flow.token(flow.code(), client_id="other-app")
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_grant"


@pytest.mark.parametrize(
    ("changes", "status"),
    [
        ({"client_secret": "wrong-secret"}, 401),
        ({"client_secret": None}, 401),
        ({"client_id": "unknown-client"}, 400),  # RFC 6749 5.2: 401 only with Basic
    ],
)
def test_bad_client_credentials_are_rejected(
    auto_idp: LocalIdentityProvider, changes: dict[str, str | None], status: int
) -> None:
    flow = Flow(auto_idp)
    response = flow.token(flow.code(), extra=changes)
    assert response.status_code == status
    assert response.json()["error"] == "invalid_client"


@pytest.mark.parametrize(
    ("method", "basic_ok", "post_ok"),
    [
        ("client_secret_post", False, True),
        ("client_secret_basic", True, False),
        ("any", True, True),
    ],
)
def test_client_authentication_methods(method: str, basic_ok: bool, post_ok: bool) -> None:
    with LocalIdentityProvider() as provider:
        provider.register_client(
            CLIENT_ID, CLIENT_SECRET, [REDIRECT_URI], token_endpoint_auth_method=method
        )
        provider.auto_approve = ADA
        for basic, expected in ((True, basic_ok), (False, post_ok)):
            flow = Flow(provider)
            response = flow.token(flow.code(), basic=basic)
            assert (response.status_code == 200) is expected, (basic, response.text)
            if not expected:
                assert response.json()["error"] == "invalid_client"
        recorded = [r.auth_method for r in provider.token_requests]
        assert recorded == ["client_secret_basic", "client_secret_post"]


def test_two_authentication_methods_at_once_are_refused() -> None:
    with make_idp() as provider:
        flow = Flow(provider)
        response = flow.token(flow.code(), basic=True, client_secret=CLIENT_SECRET)
        assert response.status_code == 400
        assert response.json()["error"] == "invalid_request"
        assert provider.token_requests[0].auth_method == "both"


def test_repeated_token_parameters_are_refused(auto_idp: LocalIdentityProvider) -> None:
    flow = Flow(auto_idp)
    code = flow.code()
    response = requests.post(
        auto_idp.token_url,
        data=[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("code", code),
            ("redirect_uri", REDIRECT_URI),
            ("code_verifier", flow.verifier),
            ("client_id", CLIENT_ID),
            ("client_secret", CLIENT_SECRET),
        ],
        timeout=TIMEOUT,
    )
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"
    assert auto_idp.token_requests[-1].form_multi["code"] == [code, code]


def test_unsupported_grant_type(auto_idp: LocalIdentityProvider) -> None:
    response = requests.post(
        auto_idp.token_url,
        data={"grant_type": 'pass"word', "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET},
        timeout=TIMEOUT,
    )
    assert response.status_code == 400
    assert response.json()["error"] in ("unsupported_grant_type", "invalid_request")


# ------------------------------------------------------------------ ID tokens


def verify_id_token(provider: LocalIdentityProvider, id_token: str) -> jwt.Token:
    keys = KeySet.import_key_set(requests.get(provider.jwks_url, timeout=TIMEOUT).json())
    return jwt.decode(id_token, keys, algorithms=["RS256"])


def test_id_token_verifies_against_jwks(auto_idp: LocalIdentityProvider) -> None:
    flow = Flow(auto_idp)
    body = flow.token(flow.code()).json()
    token = verify_id_token(auto_idp, body["id_token"])

    jwks = requests.get(auto_idp.jwks_url, timeout=TIMEOUT).json()
    assert len(jwks["keys"]) == 1
    public = jwks["keys"][0]
    assert public["kty"] == "RSA"
    assert "d" not in public  # no private part
    assert token.header["alg"] == "RS256"
    assert token.header["kid"] == public["kid"]

    JWTClaimsRegistry(
        iss={"essential": True, "value": auto_idp.issuer},
        aud={"essential": True, "value": CLIENT_ID},
        sub={"essential": True, "value": ADA.sub},
        nonce={"essential": True, "value": flow.nonce},
        exp={"essential": True},
        iat={"essential": True},
    ).validate(token.claims)
    assert token.claims["email"] == ADA.email
    assert isinstance(token.claims["auth_time"], int)
    digest = hashlib.sha256(body["access_token"].encode()).digest()
    expected_at_hash = base64.urlsafe_b64encode(digest[:16]).rstrip(b"=").decode()
    assert token.claims["at_hash"] == expected_at_hash


def test_no_id_token_without_openid_scope(auto_idp: LocalIdentityProvider) -> None:
    flow = Flow(auto_idp, scope="profile email")
    body = flow.token(flow.code()).json()
    assert "id_token" not in body
    assert body["scope"] == "profile email"


def test_nonce_replay_is_refused(auto_idp: LocalIdentityProvider) -> None:
    Flow(auto_idp, nonce="same-nonce").code()
    query = redirect_query(Flow(auto_idp, nonce="same-nonce").authorize())
    assert query["error"] == "invalid_request"


def test_id_token_tamper_hook(auto_idp: LocalIdentityProvider) -> None:
    def tamper(
        header: dict[str, Any], claims: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        return header, {**claims, "aud": "someone-else", "iss": "https://evil.example"}

    auto_idp.id_token_tamper = tamper
    flow = Flow(auto_idp)
    token = verify_id_token(auto_idp, flow.token(flow.code()).json()["id_token"])
    assert token.claims["aud"] == "someone-else"  # still validly signed
    assert token.claims["iss"] == "https://evil.example"


def test_id_token_signed_with_another_key_fails_verification(
    auto_idp: LocalIdentityProvider,
) -> None:
    auto_idp.sign_id_token_with = "other_key"
    flow = Flow(auto_idp)
    id_token = flow.token(flow.code()).json()["id_token"]
    header = json.loads(base64.urlsafe_b64decode(id_token.split(".")[0] + "=="))
    assert header["kid"] == auto_idp.jwks["keys"][0]["kid"]
    with pytest.raises(BadSignatureError):
        verify_id_token(auto_idp, id_token)


def test_sign_id_token_with_is_validated(idp: LocalIdentityProvider) -> None:
    with pytest.raises(ValueError, match="sign_id_token_with"):
        idp.sign_id_token_with = "bogus"  # type: ignore[assignment]
    assert idp.sign_id_token_with == "key"


def test_unsigned_id_token(auto_idp: LocalIdentityProvider) -> None:
    auto_idp.sign_id_token_with = "none"
    flow = Flow(auto_idp)
    id_token = flow.token(flow.code()).json()["id_token"]
    header_b64, claims_b64, signature = id_token.split(".")
    assert signature == ""
    assert json.loads(base64.urlsafe_b64decode(header_b64 + "=="))["alg"] == "none"
    assert json.loads(base64.urlsafe_b64decode(claims_b64 + "=="))["sub"] == ADA.sub


# -------------------------------------------------------------- refresh tokens


def test_refresh_grant_rotates_and_revocation_works(auto_idp: LocalIdentityProvider) -> None:
    flow = Flow(auto_idp)
    first = flow.token(flow.code()).json()

    renewed = refresh(auto_idp, first["refresh_token"])
    assert renewed.status_code == 200, renewed.text
    body = renewed.json()
    assert body["access_token"] != first["access_token"]
    assert body["refresh_token"] != first["refresh_token"]
    assert body["scope"] == "openid profile email"
    assert userinfo(auto_idp, body["access_token"]).json()["sub"] == ADA.sub

    reused = refresh(auto_idp, first["refresh_token"])
    assert reused.status_code == 400
    assert reused.json()["error"] == "invalid_grant"

    auto_idp.revoke_refresh_tokens()
    revoked = refresh(auto_idp, body["refresh_token"])
    assert revoked.status_code == 400
    assert revoked.json()["error"] == "invalid_grant"


def test_refresh_needs_client_authentication(auto_idp: LocalIdentityProvider) -> None:
    flow = Flow(auto_idp)
    refresh_token = flow.token(flow.code()).json()["refresh_token"]
    response = requests.post(
        auto_idp.token_url,
        data={
            "grant_type": "refresh_token",
            "refresh_token": refresh_token,
            "client_id": CLIENT_ID,
            "client_secret": "wrong",
        },
        timeout=TIMEOUT,
    )
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"


def test_refresh_tokens_can_be_turned_off() -> None:
    with make_idp(issue_refresh_tokens=False) as provider:
        flow = Flow(provider)
        body = flow.token(flow.code()).json()
        assert "refresh_token" not in body
        response = refresh(provider, "anything")
        assert response.status_code == 400
        assert response.json()["error"] == "unsupported_grant_type"
        metadata = requests.get(provider.discovery_url, timeout=TIMEOUT).json()
        assert metadata["grant_types_supported"] == ["authorization_code"]


# ------------------------------------------------------- discovery and RFC 9207


def test_discovery_document(idp: LocalIdentityProvider) -> None:
    response = requests.get(idp.discovery_url, timeout=TIMEOUT)
    assert response.status_code == 200
    metadata = response.json()
    OpenIDProviderMetadata(metadata).validate()
    assert metadata["issuer"] == idp.issuer == idp.url
    assert metadata["authorization_endpoint"] == idp.authorization_url
    assert metadata["token_endpoint"] == idp.token_url
    assert metadata["userinfo_endpoint"] == idp.userinfo_url
    assert metadata["jwks_uri"] == idp.jwks_url
    assert {"openid", "profile", "email"} <= set(metadata["scopes_supported"])
    assert metadata["response_types_supported"] == ["code"]
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    assert metadata["id_token_signing_alg_values_supported"] == ["RS256"]
    assert set(metadata["token_endpoint_auth_methods_supported"]) == {
        "client_secret_basic",
        "client_secret_post",
    }
    assert "authorization_response_iss_parameter_supported" not in metadata
    oauth_metadata = requests.get(
        f"{idp.url}/.well-known/oauth-authorization-server", timeout=TIMEOUT
    ).json()
    assert oauth_metadata == metadata


def test_no_iss_parameter_by_default(auto_idp: LocalIdentityProvider) -> None:
    assert "iss" not in redirect_query(Flow(auto_idp).authorize())


def test_iss_parameter_when_enabled() -> None:
    with make_idp(iss_parameter=True) as provider:
        metadata = requests.get(provider.discovery_url, timeout=TIMEOUT).json()
        assert metadata["authorization_response_iss_parameter_supported"] is True

        success = redirect_query(Flow(provider).authorize())
        assert success["iss"] == provider.issuer
        assert "code" in success

        provider.deny_next()
        denied = redirect_query(Flow(provider).authorize())
        assert (denied["error"], denied["iss"]) == ("access_denied", provider.issuer)

        invalid = redirect_query(Flow(provider, code_challenge_method="plain").authorize())
        assert (invalid["error"], invalid["iss"]) == ("invalid_request", provider.issuer)

        provider.auto_approve = None
        page = Flow(provider).authorize()
        deny = submit_form(provider, page.text, decision="deny")
        assert redirect_query(deny)["iss"] == provider.issuer


# -------------------------------------------------------------------- faults


def test_deny_next(auto_idp: LocalIdentityProvider) -> None:
    auto_idp.deny_next("temporarily_unavailable", "Try again later.")
    flow = Flow(auto_idp)
    query = redirect_query(flow.authorize())
    assert query == {
        "error": "temporarily_unavailable",
        "error_description": "Try again later.",
        "state": flow.state,
    }
    assert "code" in redirect_query(Flow(auto_idp).authorize())  # one-shot


def test_deny_next_applies_to_the_consent_page(idp: LocalIdentityProvider) -> None:
    idp.deny_next()
    response = Flow(idp).authorize()
    assert response.status_code == 302
    assert redirect_query(response)["error"] == "access_denied"


def test_deny_next_validates_its_arguments(idp: LocalIdentityProvider) -> None:
    with pytest.raises(ValueError, match="printable"):
        idp.deny_next("access_denied", 'a "quoted" description')
    with pytest.raises(ValueError, match="empty"):
        idp.deny_next("")


@pytest.mark.parametrize(
    ("kind", "status", "content_type", "check"),
    [
        ("server_error", 500, "application/json", lambda r: r.json()["error"] == "server_error"),
        ("invalid_grant", 400, "application/json", lambda r: r.json()["error"] == "invalid_grant"),
        (
            "no_access_token",
            200,
            "application/json",
            lambda r: "access_token" not in r.json() and r.json()["token_type"] == "Bearer",
        ),
        ("html", 200, "text/html", lambda r: r.text.lstrip().startswith("<!doctype html>")),
        (
            "error_in_200",
            200,
            "application/json",
            lambda r: r.json()["error"] == "bad_verification_code",
        ),
    ],
)
def test_fail_next_token(
    auto_idp: LocalIdentityProvider,
    kind: str,
    status: int,
    content_type: str,
    check: Any,
) -> None:
    auto_idp.fail_next_token(kind)
    flow = Flow(auto_idp)
    code = flow.code()
    failed = flow.token(code)
    assert failed.status_code == status
    assert failed.headers["Content-Type"].startswith(content_type)
    assert check(failed)
    assert auto_idp.token_requests[-1].status_code == status
    # one-shot: the next request is answered normally
    assert flow.token(code).status_code == 200


def test_fail_next_token_rejects_unknown_kinds(idp: LocalIdentityProvider) -> None:
    with pytest.raises(ValueError, match="kind"):
        idp.fail_next_token("timeout")


# ------------------------------------------------------------------ recording


def test_recording(auto_idp: LocalIdentityProvider) -> None:
    auto_idp.register_client(
        CLIENT_ID, CLIENT_SECRET, [REDIRECT_URI], token_endpoint_auth_method="any"
    )
    flow = Flow(auto_idp)
    code = flow.code()
    access_token = flow.token(code, basic=True).json()["access_token"]
    flow2 = Flow(auto_idp)
    flow2.token(flow2.code(), client_secret="wrong-secret", basic=False)
    userinfo(auto_idp, access_token)

    assert auto_idp.authorization_requests == [flow.params, flow2.params]

    first, second = auto_idp.token_requests
    assert first.status_code == 200
    assert first.grant_type == "authorization_code"
    assert first.form == {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": REDIRECT_URI,
        "code_verifier": flow.verifier,
    }
    assert first.form_multi["code"] == [code]
    assert first.auth_method == "client_secret_basic"
    assert first.header("authorization").startswith("Basic ")
    assert first.headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert second.status_code == 401
    assert second.auth_method == "client_secret_post"

    for record in (first, second):
        text = repr(record)
        assert "RecordedTokenRequest" in text
        for secret in (CLIENT_SECRET, "wrong-secret", code, flow.verifier, flow2.verifier):
            assert secret not in text

    (headers,) = auto_idp.userinfo_requests
    assert headers["Authorization"] == f"Bearer {access_token}"

    # The lists are copies: changing them changes nothing in the provider.
    auto_idp.token_requests.clear()
    auto_idp.authorization_requests[0]["state"] = "changed"
    assert len(auto_idp.token_requests) == 2
    assert auto_idp.authorization_requests[0]["state"] == flow.state

    auto_idp.reset_records()
    assert auto_idp.authorization_requests == []
    assert auto_idp.token_requests == []
    assert auto_idp.userinfo_requests == []


def test_recording_is_thread_safe(auto_idp: LocalIdentityProvider) -> None:
    def run(_: int) -> int:
        flow = Flow(auto_idp)
        return flow.token(flow.code()).status_code

    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(pool.map(run, range(24)))
    assert statuses == [200] * 24
    assert len(auto_idp.authorization_requests) == 24
    assert len(auto_idp.token_requests) == 24
    assert len({r.form["code"] for r in auto_idp.token_requests}) == 24


def test_no_secrets_in_logs(auto_idp: LocalIdentityProvider) -> None:
    records: list[logging.LogRecord] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    root = logging.getLogger()
    handler, old_level = Collect(level=logging.DEBUG), root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        flow = Flow(auto_idp)
        code = flow.code()
        body = flow.token(code).json()
        userinfo(auto_idp, body["access_token"])
        refresh(auto_idp, body["refresh_token"])
        flow.token(code)  # reuse
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)

    logged = "\n".join(record.getMessage() for record in records)
    assert "Issue token" in logged  # Authlib did log at DEBUG ...
    for secret in (
        CLIENT_SECRET,
        code,
        flow.verifier,
        body["access_token"],
        body["refresh_token"],
        body["id_token"],
    ):
        assert secret not in logged  # ... but nothing secret


# ------------------------------------------------------------ app and command line


def test_importing_the_package_does_not_import_the_provider() -> None:
    code = (
        "import sys, flask_social_oauth2; "
        "prefixes = ('authlib', 'flask_social_oauth2.local_idp'); "
        "loaded = [m for m in sys.modules if m.startswith(prefixes)]; "
        "assert not loaded, loaded"
    )
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert result.returncode == 0, result.stderr


def test_create_idp_app_with_the_flask_test_client() -> None:
    provider = make_idp(port=5999)
    client = create_idp_app(provider).test_client()
    flow = Flow(provider)
    response = client.get(f"/authorize?{urlencode(flow.params)}", base_url="http://127.0.0.1:5999")
    assert response.status_code == 302
    code = parse_qs(urlsplit(response.headers["Location"]).query)["code"][0]
    token = client.post(
        "/token",
        base_url="http://127.0.0.1:5999",
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT_URI,
            "code_verifier": flow.verifier,
            "client_id": CLIENT_ID,
            "client_secret": CLIENT_SECRET,
        },
    )
    assert token.status_code == 200
    assert token.get_json()["token_type"] == "Bearer"


def test_command_line_runs_in_the_foreground() -> None:
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root), "PYTHONWARNINGS": "error"}
    with child_process(
        [
            sys.executable,
            "-m",
            "flask_social_oauth2.local_idp",
            "--port",
            "0",
            "--client-id",
            CLIENT_ID,
            "--client-secret",
            CLIENT_SECRET,
            "--redirect-uri",
            REDIRECT_URI,
            "--auto-approve",
            "Ada Lovelace <ada@example.test>",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    ) as process:
        stderr = run_command_line_checks(process)
    assert process.returncode == 0, stderr


def run_command_line_checks(process: subprocess.Popen[str]) -> str:
    output: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            output.append(line)
            if "Ctrl-C" in line:
                ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert ready.wait(30), "".join(output)
        base = output[0].split(" at ")[1].strip()
        assert base.startswith("http://127.0.0.1:")
        assert any(f"{base}/token" in line for line in output)
        assert all(CLIENT_SECRET not in line for line in output)
        flow = Flow(base)
        response = flow.token(flow.code())
        assert response.status_code == 200
    finally:
        stop_process(process)
        reader.join(timeout=5)
    assert process.stderr is not None
    return process.stderr.read()


# ------------------------------------------------------------- package shape


def test_favicon_is_served_and_linked(idp: LocalIdentityProvider) -> None:
    icon = requests.get(f"{idp.url}/favicon.ico", timeout=TIMEOUT)
    assert icon.status_code == 200
    assert icon.headers["Content-Type"].startswith("image/svg+xml")
    assert icon.text.startswith("<svg")
    index = requests.get(f"{idp.url}/", timeout=TIMEOUT)
    assert '<link rel="icon" href="/favicon.ico"' in index.text


def test_pages_come_from_the_template_files(idp: LocalIdentityProvider) -> None:
    templates = Path(local_idp.__file__).with_name("templates")
    css = (templates / "idp.css").read_text().removesuffix("\n")
    page = Flow(idp).authorize()
    assert f"<style>{css}</style>" in page.text
    digest = base64.b64encode(hashlib.sha256(css.encode()).digest()).decode()
    assert f"style-src 'sha256-{digest}'" in page.headers["Content-Security-Policy"]
    assert {"base.html", "consent.html", "refused.html", "avatar.svg"} <= {
        path.name for path in templates.iterdir()
    }


def test_manual_clock_moves_only_when_told() -> None:
    clock = ManualClock(1000.0)
    assert clock() == 1000.0
    clock.advance(2.5)
    assert clock() == 1002.5
    with pytest.raises(ValueError, match="forward"):
        clock.advance(-1)


def test_refresh_token_outlives_its_access_token() -> None:
    clock = ManualClock()
    with make_idp(access_token_ttl=60, clock=clock) as provider:
        flow = Flow(provider)
        body = flow.token(flow.code()).json()
        clock.advance(3600)
        assert userinfo(provider, body["access_token"]).status_code == 401
        renewed = refresh(provider, body["refresh_token"])
        assert renewed.status_code == 200, renewed.text
        assert userinfo(provider, renewed.json()["access_token"]).status_code == 200


def test_command_line_usage_error_names_the_option(capsys: pytest.CaptureFixture[str]) -> None:
    status = local_idp.main(
        ["--port", "abc", "--client-id", "a", "--client-secret", "b", "--redirect-uri", "x:/"]
    )
    assert status == 2
    err = capsys.readouterr().err
    assert "--port" in err
    assert "Traceback" not in err


def test_command_line_refuses_a_host_that_is_not_loopback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = local_idp.main(
        ["--host", "0.0.0.0", "--client-id", "a", "--client-secret", "b", "--redirect-uri", "x:/"]
    )
    assert status == 2
    assert "only listens on loopback" in capsys.readouterr().err


def test_the_subpackage_uses_the_package_from_outside_only() -> None:
    """local_idp imports nothing of flask_social_oauth2 but its lowest module (urls), and no
    module of it imports another's private names."""
    package = Path(local_idp.__file__).parent
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = [alias.name for alias in node.names]
                assert not [n for n in names if n.startswith("_")], (path.name, names)
                if node.level == 2 or (node.module or "").startswith("flask_social_oauth2."):
                    assert node.module in ("urls", "flask_social_oauth2.urls"), path.name
                if node.level == 0 and node.module:
                    assert not node.module.startswith("flask_social_oauth2.local_idp")
            if isinstance(node, ast.Import):
                assert not [a for a in node.names if a.name.startswith("flask_social_oauth2")]
    assert max(len(p.read_text().splitlines()) for p in package.glob("*.py")) <= 500
