"""Whatever a provider answers to the token and profile requests, a sign-in ends in a redirect
or a deliberate error page (502), never a 500, and nothing secret (client secret, code, PKCE
verifier, tokens) reaches the page, a log record at any level, or the text of the error's
traceback.

Every answer is served by the real local fault server and goes through a whole sign-in with the
Flask test client (``TESTING`` is on, so an unexpected exception would fail the test itself).
"""

from __future__ import annotations

import json
import logging
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Final
from urllib.parse import urlencode

import pytest
from fault_server import Behaviour, FaultServer
from flask import Flask
from helpers import (
    CLIENT_ID,
    CLIENT_SECRET,
    FakeOpenIDProvider,
    MakeApp,
    query_of,
    sign_in,
    signed,
    valid_block,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from joserfc.jwk import ECKey
from markupsafe import escape

from flask_social_oauth2 import errors, signals
from flask_social_oauth2.errors import AuthenticationError, UnexpectedResponseError
from flask_social_oauth2.web.pages import ERROR_PAGE

CODE: Final = "the-authorization-code-4f1e"
#: Every page the built-in error handler can render: the fixed sentence of each error class.
ERROR_PAGES: Final = frozenset(
    ERROR_PAGE.format(message=escape(cls.public_message))
    for cls in vars(errors).values()
    if isinstance(cls, type) and issubclass(cls, errors.AuthenticationError)
)
PROPERTY: Final = settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PER_FIELD: Final = settings(PROPERTY, max_examples=50)


# -- serving an answer exactly as drawn ----------------------------------------------------------


@dataclass(frozen=True)
class RawJSON:
    """A JSON value written as it is, e.g. ``1e400`` or a 5,000-digit number."""

    text: str


@dataclass(frozen=True)
class Answer:
    """One HTTP answer, sent byte for byte (then the connection is closed)."""

    status: int = 200
    body: bytes = b""
    content_type: str | None = "application/json"
    #: The Content-Length header's value; ``None`` sends the body's true length.
    content_length: str | None = None
    headers: tuple[tuple[str, str], ...] = ()

    def behaviour(self) -> Behaviour:
        def handler(exchange: Any) -> bool:
            fields = [] if self.content_type is None else [("Content-Type", self.content_type)]
            length = str(len(self.body)) if self.content_length is None else self.content_length
            fields += [("Content-Length", length), *self.headers]
            exchange.conn.send(exchange.head(self.status, fields, close=True) + self.body)
            return False

        return Behaviour(f"answer({self.status})", handler)


def json_body(fields: dict[str, Any]) -> bytes:
    """``fields`` as JSON, :class:`RawJSON` values written raw, NaN and infinities as Python's
    ``json`` writes them (``NaN``, ``Infinity``), which ``json.loads`` reads back."""
    raw: dict[str, str] = {}

    def placeholder(value: Any) -> Any:
        if isinstance(value, RawJSON):
            key = f"\x00raw{len(raw)}\x00"
            raw[json.dumps(key)] = value.text
            return key
        if isinstance(value, dict):
            return {name: placeholder(item) for name, item in value.items()}
        if isinstance(value, list):
            return [placeholder(item) for item in value]
        return value

    text = json.dumps(placeholder(fields))
    for quoted, value in raw.items():
        text = text.replace(quoted, value)
    return text.encode("utf-8", "surrogatepass")


# -- the app, the flow and what must never leak --------------------------------------------------


@dataclass
class Flow:
    """What one sign-in left behind."""

    status: int
    page: str
    headers: dict[str, str]
    errors: list[AuthenticationError]
    secrets: list[str] = field(default_factory=list)


@pytest.fixture
def apps(make_app: MakeApp, fault_server: FaultServer) -> dict[str, Flask]:
    """``plain``: OAuth 2.0 with a profile address; ``openid``: an OpenID Connect provider
    whose discovery document and keys the fault server serves, so that its ID tokens are
    verified."""
    plain = valid_block(
        redirectURL="/authenticate/plain",
        accessTokenURL=f"{fault_server.url}/token",
        apiURL=f"{fault_server.url}/userinfo",
    )
    openid = {
        "accessTokenURL": f"{fault_server.url}/token",
        "redirectURL": "/authenticate/openid",
        "clientID": CLIENT_ID,
        "clientSecret": CLIENT_SECRET,
        "scope": "openid profile email",
        "customProperties": {"issuer": fault_server.url},
    }
    return {
        "plain": make_app({"plain": plain}, SOCIAL_OAUTH2_TIMEOUT=2),
        "openid": make_app({"openid": openid}, SOCIAL_OAUTH2_TIMEOUT=2),
    }


@pytest.fixture
def openid_provider(fault_server: FaultServer, ec_key: ECKey) -> FakeOpenIDProvider:
    """The discovery document and key set of the ``openid`` provider, on the fault server."""
    return FakeOpenIDProvider(fault_server, ec_key)


def sign_in_with_answers(
    app: Flask,
    server: FaultServer,
    provider: str,
    token: Callable[[dict[str, str]], Answer],
    profile: Answer,
) -> Flow:
    """Start a sign-in, serve ``token(authorization query)`` and ``profile``, come back with
    :data:`CODE`."""
    failures: list[AuthenticationError] = []

    def failed(sender: Any, provider_name: str, error: AuthenticationError) -> None:
        failures.append(error)

    def serve(location: str) -> None:
        server.set("/token", token(query_of(location)).behaviour())
        server.set("/userinfo", profile.behaviour())

    with signals.authentication_failed.connected_to(failed, app):
        response = sign_in(app.test_client(), provider, code=CODE, on_start=serve)
    verifiers = [
        value
        for request in server.requests
        if request.path == "/token"
        for value in request.form().get("code_verifier", [])
    ]
    return Flow(
        status=response.status_code,
        page=response.get_data(as_text=True),
        headers=dict(response.headers),
        errors=failures,
        secrets=[CLIENT_SECRET, CODE, *verifiers],
    )


def leaked(text: str, secrets: list[str]) -> list[str]:
    return [secret for secret in secrets if secret in text]


def assert_nothing_secret(flow: Flow, records: list[logging.LogRecord], extra: list[str]) -> None:
    """No secret in the page, its headers, any log record, or an error's traceback text (with
    every chained exception)."""
    secrets = [*flow.secrets, *(value for value in extra if len(value) >= 8)]
    assert not leaked(flow.page, secrets), "a secret in the page"
    assert not leaked(json.dumps(flow.headers), secrets), "a secret in a response header"
    for record in records:
        text = record.getMessage()
        if record.exc_info:
            text += logging.Formatter().formatException(record.exc_info)
        assert not leaked(text, secrets), f"a secret in a log record of {record.name}"
    for error in flow.errors:
        text = "".join(traceback.format_exception(error))
        assert not leaked(text, secrets), "a secret in an error's traceback"
        assert not leaked(repr(error), secrets)


def assert_deliberate(flow: Flow) -> None:
    """A redirect (signed in) or one of the fixed error pages with a 4xx/5xx status of an
    AuthenticationError; never a 500."""
    if flow.status == 302:
        assert not flow.errors
        return
    assert flow.status in (400, 403, 502, 504), flow.status
    assert flow.page in ERROR_PAGES, flow.page
    (error,) = flow.errors
    assert error.status_code == flow.status


# -- the cases, one by one ---------------------------------------------------------------

GOOD_PROFILE: Final = Answer(body=json_body({"sub": "u-1", "email": "ada@example.org"}))


@pytest.mark.parametrize(
    "expires_in",
    [
        "²",
        "Infinity",
        RawJSON("Infinity"),
        RawJSON("-Infinity"),
        RawJSON("NaN"),
        RawJSON("1e400"),
        "9" * 5000,
        "٣٦٠٠",
        -1,
        2**31,
        True,
        [3600],
        {"seconds": 3600},
    ],
    ids=repr,
)
def test_an_expires_in_that_is_no_number_of_seconds_is_a_502(
    apps: dict[str, Flask],
    fault_server: FaultServer,
    captured_logs: list[logging.LogRecord],
    expires_in: Any,
) -> None:
    token = {"access_token": "at-9f86d081884c7d65", "expires_in": expires_in}
    flow = sign_in_with_answers(
        apps["plain"], fault_server, "plain", lambda _: Answer(body=json_body(token)), GOOD_PROFILE
    )
    assert flow.status == 502
    (error,) = flow.errors
    assert type(error) is UnexpectedResponseError
    assert "token request: expires_in is not a number of seconds" in str(error)
    assert any("expires_in is not a number" in r.getMessage() for r in captured_logs)
    assert fault_server.count("/userinfo") == 0
    assert_nothing_secret(flow, captured_logs, ["at-9f86d081884c7d65"])


@pytest.mark.parametrize("expires_in", ["3600", " 3600 ", 3600, 3600.9, 0, "0"], ids=repr)
def test_an_expires_in_of_whole_seconds_is_read(
    apps: dict[str, Flask], fault_server: FaultServer, expires_in: Any
) -> None:
    seen: list[Any] = []
    app = apps["plain"]

    def keep(sender: Any, **extra: Any) -> None:
        seen.append(extra["info"].expires_in)

    token = {"access_token": "at", "expires_in": expires_in}
    with signals.authenticated.connected_to(keep, app):
        flow = sign_in_with_answers(
            app, fault_server, "plain", lambda _: Answer(body=json_body(token)), GOOD_PROFILE
        )
    assert flow.status == 302
    assert seen == [int(float(str(expires_in).strip()))]


@pytest.mark.parametrize(
    "access_token",
    ["at-\u20ac-9f86d081", "at-\u00e9-9f86d081", "at-9f86d081\r\nX-Evil: 1", "at-\x00-9f86d081"],
    ids=["euro sign", "latin-1", "line break", "nul"],
)
def test_an_access_token_that_cannot_go_into_a_header_is_a_502(
    apps: dict[str, Flask],
    fault_server: FaultServer,
    captured_logs: list[logging.LogRecord],
    access_token: str,
) -> None:
    token = {"access_token": access_token, "token_type": "Bearer"}
    flow = sign_in_with_answers(
        apps["plain"], fault_server, "plain", lambda _: Answer(body=json_body(token)), GOOD_PROFILE
    )
    assert flow.status == 502
    (error,) = flow.errors
    assert type(error) is UnexpectedResponseError
    assert "access_token has characters other than printable ASCII" in str(error)
    assert fault_server.count("/userinfo") == 0  # refused before any header was built
    assert_nothing_secret(flow, captured_logs, [access_token])


@pytest.mark.parametrize("length", ["²", "1²", "-1", "+22", "22, 22", "", "9" * 5000])
def test_a_token_answer_whose_content_length_is_not_ascii_digits_is_a_502(
    apps: dict[str, Flask],
    fault_server: FaultServer,
    captured_logs: list[logging.LogRecord],
    length: str,
) -> None:
    body = json_body({"access_token": "at-9f86d081884c7d65", "token_type": "Bearer"})
    flow = sign_in_with_answers(
        apps["plain"],
        fault_server,
        "plain",
        lambda _: Answer(body=body, content_length=length),
        GOOD_PROFILE,
    )
    assert flow.status == 502
    (error,) = flow.errors
    assert type(error) is UnexpectedResponseError
    message = "larger than" if length.isascii() and length.isdigit() else "malformed Content-Length"
    assert message in str(error)
    assert any(message in r.getMessage() for r in captured_logs)
    assert_nothing_secret(flow, captured_logs, ["at-9f86d081884c7d65"])


# -- the property: every field of the token and the profile answer -------------------------------

ODD_STRINGS: Final = [
    "",
    " ",
    "²",
    "٣",
    "Infinity",
    "NaN",
    "-1",
    "1e400",
    "9" * 5000,
    "\u20ac",
    "caf\u00e9",
    "\r\nSet-Cookie: pwned=1",
    "\x00",
    "\ud800",
    "<script>alert(1)</script>",
    "bearer",
    "BEARER",
    "DPoP",
    "mac",
    "javascript:alert(1)",
    "data:text/html,x",
    "https://evil.example/a.png",
    "a.b.c",
    "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.",
    "access_denied",
    "invalid_grant",
    "x" * 3000,
]
RAW_NUMBERS: Final = [
    RawJSON("1e400"),
    RawJSON("-1e400"),
    RawJSON("NaN"),
    RawJSON("Infinity"),
    RawJSON("9" * 5000),
    RawJSON("-0"),
    RawJSON("1E+2"),
]
SCALARS: Final = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**63),
    st.floats(),
    st.text(max_size=30),
    st.sampled_from(ODD_STRINGS),
    st.sampled_from(RAW_NUMBERS),
)
ODD_VALUES: Final = st.one_of(
    st.sampled_from([*ODD_STRINGS, *RAW_NUMBERS]),
    SCALARS,
    st.recursive(
        SCALARS,
        lambda children: st.one_of(
            st.lists(children, max_size=3),
            st.dictionaries(st.text(max_size=8), children, max_size=3),
        ),
        max_leaves=6,
    ),
)
TOKEN_FIELDS: Final = (
    "access_token",
    "token_type",
    "expires_in",
    "refresh_token",
    "scope",
    "id_token",
    "error",
    "error_description",
)
PROFILE_FIELDS: Final = (
    "sub",
    "id",
    "login",
    "name",
    "given_name",
    "family_name",
    "email",
    "email_verified",
    "picture",
    "preferred_username",
)
CONTENT_TYPES: Final = st.one_of(
    st.sampled_from(
        [
            "application/json",
            "application/json; charset=utf-8",
            "application/jwt+json",
            "application/x-www-form-urlencoded",
            "text/plain",
            "text/html",
            "",
            "application/json\u00b2",
        ]
    ),
    st.none(),
    st.text(alphabet=st.characters(max_codepoint=0xFF, blacklist_characters="\r\n"), max_size=20),
)
HEADER_NAMES: Final = st.sampled_from(
    ["Content-Encoding", "Transfer-Encoding", "Set-Cookie", "Location", "Retry-After", "X-Odd"]
)
HEADER_VALUES: Final = st.one_of(
    st.sampled_from(["gzip", "chunked", "sid=1", "/elsewhere", "²", "\u00ff", "1e400"]),
    st.text(alphabet=st.characters(max_codepoint=0xFF, blacklist_characters="\r\n"), max_size=20),
)
STATUSES: Final = st.sampled_from([200, 200, 200, 201, 204, 301, 302, 400, 401, 404, 429, 500])


FOCUSED_VALUES: Final = st.one_of(
    st.sampled_from([*ODD_STRINGS, *RAW_NUMBERS]),
    st.sampled_from([*ODD_STRINGS, *RAW_NUMBERS]),
    ODD_VALUES,
)


@st.composite
def answers(
    draw: Any, fields: tuple[str, ...], base: dict[str, Any], *, focus: str | None
) -> Answer:
    """A provider answer built from ``base``.

    With ``focus``, that field is odd in every example (and another field or two sometimes
    too), in a well-framed JSON answer, so that most examples reach the code reading it.
    Without, the fields are usable and the framing is odd: status, content type, length,
    extra headers, or a body that is a form, a JSON array or any bytes.
    """
    data: dict[str, Any] = dict(base)
    if focus is not None:
        data[focus] = draw(FOCUSED_VALUES)
        if draw(st.integers(0, 3)) == 3:
            data.update(draw(st.dictionaries(st.sampled_from(fields), ODD_VALUES, max_size=2)))
        return Answer(body=json_body(data))
    if draw(st.booleans()):
        data.update(draw(st.dictionaries(st.text(max_size=10), ODD_VALUES, max_size=2)))
    body = json_body(data)
    encoding = draw(st.sampled_from(["json", "json", "form", "bytes", "array"]))
    if encoding == "array":
        body = b"[" + body + b"]"
    elif encoding == "form":
        pairs = {str(key): str(value) for key, value in data.items()}
        body = urlencode(pairs, errors="surrogatepass").encode()
    elif encoding == "bytes":
        body = draw(st.binary(max_size=200))
    odd_length = st.sampled_from(["²", "-1", "", "0", str(len(body) // 2), "9" * 40])
    return Answer(
        status=draw(STATUSES),
        body=body,
        content_type=draw(CONTENT_TYPES),
        content_length=draw(st.one_of(st.none(), odd_length)),
        headers=tuple(draw(st.lists(st.tuples(HEADER_NAMES, HEADER_VALUES), max_size=2))),
    )


def _utf8(value: object) -> bool:
    try:
        str(value).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@st.composite
def id_token_claims(draw: Any, issuer: str) -> dict[str, Any]:
    """Claims of an ID token: valid ones with some changed to odd values (the nonce is filled
    in when the flow's is known)."""
    now = int(time.time())
    claims: dict[str, Any] = {
        "iss": issuer,
        "sub": "u-1",
        "aud": CLIENT_ID,
        "exp": now + 300,
        "iat": now,
        "email": "ada@example.org",
    }
    names = ("iss", "sub", "aud", "exp", "iat", "nbf", "nonce", "email", "email_verified", "azp")
    # RawJSON is not JSON-encodable; a lone surrogate is not UTF-8, which joserfc before 1.8
    # (tests-min) refuses to sign (later versions escape it)
    scalar = SCALARS.filter(lambda value: not isinstance(value, RawJSON) and _utf8(value))
    odd = st.one_of(scalar, st.lists(scalar, max_size=2))
    claims.update(draw(st.dictionaries(st.sampled_from(names), odd, max_size=3)))
    return claims


TOKEN_BASE: Final = {"access_token": "at-9f86d081884c7d65", "token_type": "Bearer"}
PROFILE_BASE: Final = {"sub": "u-1", "name": "Ada", "email": "ada@example.org"}
OUTCOMES: Final[dict[str, Counter[str]]] = {}


def check_sign_in(
    name: str,
    app: Flask,
    server: FaultServer,
    provider: str,
    token: Callable[[dict[str, str]], Answer],
    profile: Answer,
    records: list[logging.LogRecord],
) -> None:
    server.clear()
    records.clear()
    flow = sign_in_with_answers(app, server, provider, token, profile)
    assert_deliberate(flow)
    served = [
        value
        for raw in (token({}).body, profile.body)
        for value in _strings_in(raw)
        if value.startswith("at-")
    ]
    assert_nothing_secret(flow, records, served)
    outcome = "signed in" if flow.status == 302 else type(flow.errors[0]).__name__
    OUTCOMES.setdefault(name, Counter())[outcome] += 1


@pytest.mark.parametrize("focus", [*TOKEN_FIELDS, None], ids=[*TOKEN_FIELDS, "framing"])
def test_no_token_answer_breaks_a_sign_in(
    apps: dict[str, Flask],
    fault_server: FaultServer,
    captured_logs: list[logging.LogRecord],
    focus: str | None,
) -> None:
    @(PROPERTY if focus is None else PER_FIELD)
    @given(token=answers(TOKEN_FIELDS, TOKEN_BASE, focus=focus))
    def check(token: Answer) -> None:
        check_sign_in(
            f"token {focus}",
            apps["plain"],
            fault_server,
            "plain",
            lambda _: token,
            Answer(body=json_body(PROFILE_BASE)),
            captured_logs,
        )

    check()
    if focus in (None, "expires_in", "refresh_token"):  # fields where odd can still be fine
        assert {"signed in", "UnexpectedResponseError"} <= set(OUTCOMES[f"token {focus}"])


@pytest.mark.parametrize("focus", [*PROFILE_FIELDS, None], ids=[*PROFILE_FIELDS, "framing"])
def test_no_profile_answer_breaks_a_sign_in(
    apps: dict[str, Flask],
    fault_server: FaultServer,
    captured_logs: list[logging.LogRecord],
    focus: str | None,
) -> None:
    @(PROPERTY if focus is None else PER_FIELD)
    @given(profile=answers(PROFILE_FIELDS, PROFILE_BASE, focus=focus))
    def check(profile: Answer) -> None:
        check_sign_in(
            f"profile {focus}",
            apps["plain"],
            fault_server,
            "plain",
            lambda _: Answer(body=json_body(TOKEN_BASE)),
            profile,
            captured_logs,
        )

    check()
    if focus is None:
        assert {"signed in", "ProfileRetrievalError"} <= set(OUTCOMES["profile None"])


def test_no_id_token_breaks_a_sign_in(
    apps: dict[str, Flask],
    fault_server: FaultServer,
    openid_provider: FakeOpenIDProvider,
    ec_key: ECKey,
    captured_logs: list[logging.LogRecord],
) -> None:
    """ID tokens signed with the provider's key, with odd claims, or odd values in their place;
    and the rest of the token answer odd too."""

    @PROPERTY
    @given(
        token=answers(TOKEN_FIELDS, TOKEN_BASE, focus=None),
        claims=id_token_claims(fault_server.url),
        keep_nonce=st.booleans(),
        sign=st.booleans(),
    )
    def check(token: Answer, claims: dict[str, Any], keep_nonce: bool, sign: bool) -> None:
        def token_answer(query: dict[str, str]) -> Answer:
            try:
                fields = json.loads(token.body)
            except ValueError:
                return token
            if not (sign and isinstance(fields, dict)):
                return token
            nonce = {"nonce": query.get("nonce", "")} if keep_nonce else {}
            fields["id_token"] = signed(ec_key, "ES256", {**claims, **nonce})
            return replace(token, body=json_body(fields), content_length=None)

        check_sign_in(
            "id token",
            apps["openid"],
            fault_server,
            "openid",
            token_answer,
            Answer(body=json_body(PROFILE_BASE)),
            captured_logs,
        )

    check()
    assert "IdTokenError" in OUTCOMES["id token"]

    def valid_token(query: dict[str, str]) -> Answer:
        now = int(time.time())
        claims = {
            "iss": fault_server.url,
            "sub": "u-1",
            "aud": CLIENT_ID,
            "exp": now + 300,
            "iat": now,
            "nonce": query.get("nonce", ""),
        }
        return Answer(body=json_body({**TOKEN_BASE, "id_token": signed(ec_key, "ES256", claims)}))

    # A well-formed answer signs in: the property above does not only ever refuse.
    OUTCOMES["id token"].clear()
    check_sign_in(
        "id token",
        apps["openid"],
        fault_server,
        "openid",
        valid_token,
        Answer(body=json_body(PROFILE_BASE)),
        captured_logs,
    )
    assert OUTCOMES["id token"] == {"signed in": 1}


def _strings_in(body: bytes) -> Iterator[str]:
    try:
        data = json.loads(body)
    except ValueError:
        return
    if isinstance(data, dict):
        yield from (value for value in data.values() if isinstance(value, str))
