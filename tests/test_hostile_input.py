"""Hostile input, property-based: whatever arrives in the callback's query or the configuration,
the answer is never a 500, never a traceback, never a reflected value, and bad configuration is
only ever a ConfigurationError.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import Any, Final
from urllib.parse import quote_from_bytes, urlsplit

import pytest
import yaml
from fault_server import Behaviour, FaultServer
from flask import Flask
from helpers import MakeApp, fault_app, start_flow, valid_block
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markupsafe import escape
from werkzeug.urls import iri_to_uri

from flask_social_oauth2 import OAuth2Settings, errors
from flask_social_oauth2.config.blocks import load_settings
from flask_social_oauth2.config.settings import CONFIG_KEYS
from flask_social_oauth2.errors import ConfigurationError
from flask_social_oauth2.web.pages import ERROR_PAGE
from flask_social_oauth2.web.redirects import safe_next_path

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


# -- configuration -------------------------------------------------------------------------

JSON_VALUES: Final = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(),
        st.text(max_size=40),
        st.sampled_from(
            [
                "https://provider.example/token",
                "http://localhost/token",
                "http://localhost:80@attacker.test/",
                "http://provider.example/token",
                "ftp://provider.example/",
                "/authenticate/example",
                "${HOME}",
                "${NOT_SET_ANYWHERE}",
                "${not a name}",
                "${",
                "openid profile",
            ]
        ),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(st.text(max_size=12), children, max_size=3),
    ),
    max_leaves=8,
)
CONFIG_KEY_NAMES: Final = st.one_of(st.sampled_from(sorted(CONFIG_KEYS)), st.text(max_size=16))


@st.composite
def blocks(draw: Callable[..., Any]) -> Any:
    """A provider block: a valid one with some keys changed, dropped or added, or any value."""
    if draw(st.integers(0, 9)) == 0:
        return draw(JSON_VALUES)
    block: dict[Any, Any] = valid_block()
    for key in draw(st.lists(st.sampled_from(sorted(CONFIG_KEYS)), max_size=3)):
        block.pop(key, None)
    changes = draw(st.dictionaries(CONFIG_KEY_NAMES, JSON_VALUES, max_size=4))
    block.update(changes)
    return block


def only_configuration_errors(call: Callable[[], Any]) -> None:
    """``call()`` succeeds or raises a ConfigurationError (any other exception propagates and
    fails the test) that lists its problems and shows no secret."""
    problems: tuple[Any, ...] = ()
    message = ""
    try:
        call()
    except ConfigurationError as error:
        problems, message = error.problems, str(error)
        if not problems:
            raise AssertionError("a ConfigurationError without problems") from error
    assert "s3cr3t-client-secret-value" not in message


def test_any_block_is_settings_or_a_configuration_error() -> None:
    @FAST
    @given(block=blocks())
    def check(block: Any) -> None:
        only_configuration_errors(lambda: OAuth2Settings.from_config(block, provider="p"))

    check()


def test_any_providers_mapping_is_settings_or_a_configuration_error() -> None:
    providers = st.one_of(
        st.dictionaries(
            st.one_of(st.sampled_from(["github", "local", "a.b-c_d"]), st.text(max_size=70)),
            blocks(),
            max_size=3,
        ),
        JSON_VALUES,
    )

    @FAST
    @given(providers=providers)
    def check(providers: Any) -> None:
        environ = {"HOME": "/home/test"}
        config = {"SOCIAL_OAUTH2_PROVIDERS": providers}
        only_configuration_errors(lambda: load_settings(config, environ))

    check()


def test_any_yaml_file_is_settings_or_a_configuration_error() -> None:
    documents = st.one_of(
        # Structured: what a YAML file of blocks can hold.
        st.dictionaries(st.text(max_size=20), blocks(), max_size=3).map(
            lambda data: yaml.safe_dump(data, allow_unicode=True).encode("utf-8")
        ),
        # Any text, YAML's own constructs among it (tags, anchors, aliases, complex keys).
        st.one_of(
            st.text(max_size=200),
            st.sampled_from(
                [
                    "github: !!python/object/apply:os.system ['true']",
                    "a: &x [1]\nb: *x\n",
                    "? [a, b]\n: c\n",
                    "github:\n  clientID: 0123\n  scope: on\n",
                    "- a\n- b\n",
                    "github: [",
                    "\ufeffgithub: {}",
                ]
            ),
        ).map(lambda text: text.encode("utf-8", "surrogatepass")),
        # Bytes that are not UTF-8.
        st.binary(max_size=100),
    )

    @FAST
    @given(document=documents)
    def check(document: bytes) -> None:
        handle, path = tempfile.mkstemp(suffix=".yaml")
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(document)
            config = {"SOCIAL_OAUTH2_PROVIDERS_FILE": path}
            only_configuration_errors(lambda: load_settings(config, {"HOME": "/home/test"}))
        finally:
            os.unlink(path)

    check()


def test_any_extension_option_is_accepted_or_a_configuration_error(make_app: MakeApp) -> None:
    options = st.dictionaries(
        st.sampled_from(
            [
                "SOCIAL_OAUTH2_TIMEOUT",
                "SOCIAL_OAUTH2_STATE_TTL",
                "SOCIAL_OAUTH2_MAX_RESPONSE_BYTES",
                "SOCIAL_OAUTH2_URL_RULE",
                "SOCIAL_OAUTH2_STATE_COOKIE",
                "SOCIAL_OAUTH2_STATE_COOKIE_PATH",
                "SOCIAL_OAUTH2_SESSION_KEY",
                "SOCIAL_OAUTH2_PROVIDER_CLASSES",
            ]
        ),
        JSON_VALUES,
        max_size=4,
    )

    @FAST
    @given(options=options, block=blocks())
    def check(options: dict[str, Any], block: Any) -> None:
        only_configuration_errors(lambda: make_app({"example": block}, **options))

    check()
