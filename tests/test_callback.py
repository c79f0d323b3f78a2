"""The callback: what it tells a user whose sign-in cannot be finished (against the real
authorization server of the ``idp`` fixture), and, property-based, that whatever arrives in its
query the answer is never a 500, never a traceback, never a reflected value.
"""

from __future__ import annotations

import logging
from typing import Final
from urllib.parse import quote_from_bytes, urlsplit

import pytest
from fault_server import Behaviour, FaultServer
from flask import Flask
from helpers import MakeApp, callback_path, fault_app, follow_to_provider, idp_block, start_flow
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markupsafe import escape
from werkzeug.urls import iri_to_uri

from flask_social_oauth2 import errors
from flask_social_oauth2.local_idp import LocalIdentityProvider
from flask_social_oauth2.web.pages import ERROR_PAGE
from flask_social_oauth2.web.redirects import safe_next_path


def test_a_callback_on_another_host_than_the_start_names_the_cause(
    make_app: MakeApp, idp: LocalIdentityProvider, captured_logs: list[logging.LogRecord]
) -> None:
    """The classic localhost against 127.0.0.1: the state cookie belongs to the host the
    sign-in started on, so the callback on the other arrives without it."""
    idp.register_client(
        "test-client", "s3cr3t-client-secret-value", ["http://127.0.0.1/authenticate/local"]
    )
    app = make_app({"local": idp_block(idp, redirectURL="http://127.0.0.1/authenticate/local")})
    client = app.test_client()
    started = client.get("/authenticate/local", base_url="http://localhost")
    assert started.status_code == 302
    callback = follow_to_provider(started.headers["Location"])
    assert callback.startswith("http://127.0.0.1/")
    answer = client.get(callback_path(callback), base_url="http://127.0.0.1")
    assert answer.status_code == 400
    assert "started at another address, your browser blocked its cookie" in answer.text
    assert "Open the app at 127.0.0.1 and sign in again" in answer.text
    logged = " ".join(record.getMessage() for record in captured_logs)
    assert "no state cookie arrived with the callback" in logged
    assert idp.token_requests == []


def test_a_cookie_whose_flow_is_unknown_keeps_the_plain_message(
    idp_app: Flask, idp: LocalIdentityProvider
) -> None:
    client = idp_app.test_client()
    client.get("/authenticate/local")  # an abandoned sign-in: the cookie stays
    started = client.get("/authenticate/local")
    callback = callback_path(follow_to_provider(started.headers["Location"]))
    assert client.get(callback).status_code == 302
    replayed = client.get(callback)  # the cookie is there, this flow used up
    assert replayed.status_code == 400
    assert "invalid or has expired" in replayed.text
    assert "another address" not in replayed.text
    assert len(idp.token_requests) == 1


# -- whatever arrives in the query ------------------------------------------------------------


FAST: Final = settings(
    max_examples=250,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

#: Every page the built-in error handler can render: the fixed sentence of each error class.
ERROR_PAGES: Final = frozenset(
    ERROR_PAGE.format(message=escape(message))
    for message in (
        *(
            cls.public_message
            for cls in vars(errors).values()
            if isinstance(cls, type) and issubclass(cls, errors.AuthenticationError)
        ),
        # a state without any state cookie (the app's redirectURL is relative: no host named)
        errors.StateError.without_cookie("faulty", None).public_message,
    )
)

NASTY: Final = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "'\"><svg/onload=alert(1)>",
    "access_denied",
    "invalid_request",
    "\r\nSet-Cookie: pwned=1",
    "\x00",
    "%00",
    "%0d%0aLocation:%20https://evil.example",
    "https://evil.example/",
    "//evil.example",
    "////evil.example",
    "/\\evil.example",
    "\\\\evil.example",
    "https:evil.example",
    "/%09/evil.example",
    "javascript:alert(1)",
    "/" + "\u202e" + "evil",
    "\ud7ff\ue000\uffff",
    "${SECRET}",
    "{{7*7}}",
]
CALLBACK_KEYS: Final = ["code", "state", "error", "error_description", "error_uri", "next", "iss"]


def any_text(max_size: int = 64) -> st.SearchStrategy[bytes]:
    """Values as bytes: any Unicode (UTF-8), raw bytes, known nasties, or very long."""
    return st.one_of(
        st.text(max_size=max_size).map(lambda text: text.encode("utf-8")),
        st.binary(max_size=max_size),
        st.sampled_from(NASTY).map(lambda text: text.encode("utf-8")),
        st.integers(2040, 70_000).map(lambda size: b"A" * size),
    )


QUERY_PAIRS: Final = st.lists(
    st.tuples(
        st.one_of(st.sampled_from(CALLBACK_KEYS), st.text(max_size=8)).map(
            lambda key: key.encode("utf-8")
        ),
        any_text(),
    ),
    max_size=8,
)


def encode_query(pairs: list[tuple[bytes, bytes]]) -> str:
    return "&".join(
        f"{quote_from_bytes(k, safe='')}={quote_from_bytes(v, safe='')}" for k, v in pairs
    )


def assert_safe_location(location: str) -> None:
    """A same-origin path: one leading '/', no backslash, no control or space characters,
    and ``urlsplit`` finds no scheme and no host."""
    assert location.startswith("/"), location
    assert not location.startswith("//"), location
    assert "\\" not in location
    assert all(0x20 < ord(char) < 0x7F for char in location), location
    parts = urlsplit(location)
    assert not parts.scheme, location
    assert not parts.netloc, location


@pytest.fixture
def hostile_app(make_app: MakeApp, fault_server: FaultServer) -> Flask:
    """A provider whose token and profile endpoints answer well (so that a valid state and any
    code reach the end of the flow)."""
    fault_server.set("/token", Behaviour.json({"access_token": "at", "token_type": "bearer"}))
    fault_server.set("/userinfo", Behaviour.json({"sub": "u-1", "email": "ada@example.org"}))
    return fault_app(make_app, fault_server)


def test_callback_query_never_breaks_the_route(
    hostile_app: Flask, fault_server: FaultServer
) -> None:
    @FAST
    @given(pairs=QUERY_PAIRS, with_state=st.booleans(), position=st.integers(0, 8))
    def check(pairs: list[tuple[bytes, bytes]], with_state: bool, position: int) -> None:
        client = hostile_app.test_client()
        pairs = list(pairs)
        if with_state:
            state = start_flow(client, "faulty")["state"]
            pairs.insert(min(position, len(pairs)), (b"state", state.encode()))
        token_requests = fault_server.count("/token")
        response = client.get(f"/authenticate/faulty?{encode_query(pairs)}")

        assert response.status_code in (302, 400, 403, 502), response.status_code
        body = response.get_data(as_text=True)
        assert "Traceback" not in body
        for name, value in response.headers.items():
            assert "\r" not in value, name
            assert "\n" not in value, name
        if response.status_code >= 400:
            # Nothing of the input: the page is one of the fixed pages, character for character.
            assert body in ERROR_PAGES, body
        else:
            location = response.headers["Location"]
            if location.startswith("https://provider.example/authorize?"):
                assert fault_server.count("/token") == token_requests  # a start, no exchange
            else:
                assert_safe_location(location)
        if not with_state:
            # No state this browser was given: refused before any call to the provider.
            assert fault_server.count("/token") == token_requests

    check()


def test_next_is_kept_only_as_a_same_origin_path(hostile_app: Flask) -> None:
    @FAST
    @given(next_value=st.one_of(st.text(max_size=80), st.sampled_from(NASTY)))
    def check(next_value: str) -> None:
        client = hostile_app.test_client()
        state = start_flow(client, "faulty", next=next_value)["state"]
        response = client.get("/authenticate/faulty", query_string={"state": state, "code": "c"})
        assert response.status_code == 302
        location = response.headers["Location"]
        # Werkzeug percent-encodes what a Location header may not hold (e.g. "<").
        assert location == iri_to_uri(safe_next_path(next_value) or "/")
        assert_safe_location(location)

    check()
