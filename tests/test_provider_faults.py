"""Provider faults at the token and the profile step, each from a real server on loopback.

Every fault must end in a typed :class:`AuthenticationError` and a deliberate page (502 for a
bad answer or a failed connection, 504 when the provider did not answer in time), within the
configured timeout plus one second, with memory bounded, and with exactly one request sent: an
authorization code is single use, so nothing is ever retried.
"""

from __future__ import annotations

import json
import time
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final, Literal

import pytest
from fault_server import DNS_FAILURE_URL, Behaviour, FaultServer, RecordedRequest, refused_url
from helpers import MakeApp, start_flow, valid_block
from markupsafe import escape

from flask_social_oauth2 import signals
from flask_social_oauth2.errors import (
    AuthenticationError,
    ProfileRetrievalError,
    UnexpectedResponseError,
)

TIMEOUT: Final = 1.0
MiB: Final = 1024 * 1024
#: Peak of traced Python allocations allowed while a huge or endless answer is refused; the
#: body cap is 1 MiB (SOCIAL_OAUTH2_MAX_RESPONSE_BYTES' default).
MEMORY_BUDGET: Final = 8 * MiB
USERINFO: Final = {"sub": "u-1", "name": "Ada Lovelace", "email": "ada@example.org"}
TOKEN: Final = {"access_token": "at-123", "token_type": "Bearer"}

Step = Literal["token", "profile"]
Kind = Literal["server", "refused", "dns", "tls"]


def _header_drip(_: RecordedRequest | None = None) -> Behaviour:
    """The status line and headers one byte each 0.1 s (each read is well within the timeout,
    the whole head takes several times the timeout), then a valid body."""
    body = json.dumps(TOKEN | USERINFO).encode()

    def handler(exchange: Any) -> bool:
        head = exchange.head(
            200, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        )
        for byte in head:
            exchange.conn.sleep(0.1)
            exchange.conn.send(bytes([byte]))
        exchange.conn.send(body)
        return False

    return Behaviour("header_drip", handler)


@dataclass(frozen=True)
class Fault:
    """One way a provider fails."""

    name: str
    status: int
    kind: Kind = "server"
    behaviour: Callable[[], Behaviour] | None = None
    #: A fragment of the error's message (for logs and developers), if it is telling.
    message: str = ""
    #: Whether to trace the peak memory while the fault is handled.
    trace_memory: bool = False


FAULTS: Final = [
    Fault("connection_refused", 502, "refused", message="failed: ConnectionError"),
    Fault("dns_failure", 502, "dns", message="failed: ConnectionError"),
    Fault("tls_error", 502, "tls", message="TLS error"),
    Fault("accept_then_hang", 504, behaviour=Behaviour.hang, message="timed out"),
    Fault(
        "slow_drip_body",
        504,
        behaviour=lambda: Behaviour.drip(json.dumps(TOKEN | USERINFO).encode(), interval=0.1),
        message="timed out",
    ),
    Fault("slow_drip_headers", 504, behaviour=_header_drip, message="timed out"),
    Fault("reset_mid_body", 502, behaviour=Behaviour.reset_mid_body, message="mid-answer"),
    Fault("close_without_response", 502, behaviour=Behaviour.close_without_response),
    Fault(
        "http_503",
        502,
        behaviour=lambda: Behaviour.text("Service Unavailable", status=503),
        message="HTTP 503",
    ),
    Fault(
        "http_429_retry_after",
        502,
        behaviour=lambda: Behaviour.json(
            {"message": "slow down"}, status=429, headers={"Retry-After": "30"}
        ),
        message="HTTP 429",
    ),
    Fault(
        "html_page",
        502,
        behaviour=lambda: Behaviour.html("<html><body>Log in</body></html>"),
    ),
    Fault("truncated_json", 502, behaviour=Behaviour.truncated_json),
    Fault(
        "body_50MB",
        502,
        behaviour=lambda: Behaviour.huge(50 * MiB),
        message="larger than",
        trace_memory=True,
    ),
    Fault(
        "body_50MB_chunked",
        502,
        behaviour=lambda: Behaviour.huge(50 * MiB, chunked=True),
        message="larger than",
        trace_memory=True,
    ),
    Fault(
        "endless_chunked",
        502,
        behaviour=Behaviour.endless_chunked,
        message="larger than",
        trace_memory=True,
    ),
]

#: fault name -> step -> (seconds to the error page, peak traced bytes or None)
RESULTS: dict[str, dict[str, tuple[float, int | None]]] = {}


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    yield
    if not RESULTS:
        return
    print(f"\nworst time to the error page per fault (timeout {TIMEOUT} s):")
    for name, steps in RESULTS.items():
        worst = max(seconds for seconds, _ in steps.values())
        peaks = [peak for _, peak in steps.values() if peak is not None]
        memory = f", peak traced memory {max(peaks) / MiB:.1f} MiB" if peaks else ""
        print(f"  {name:24} {worst:6.3f} s{memory}")


@dataclass
class Outcome:
    status: int
    text: str
    seconds: float
    peak: int | None
    errors: list[AuthenticationError]


def run_fault(make_app: MakeApp, good: FaultServer, fault: Fault, step: Step) -> Outcome:
    """Start a flow, then send the callback while the provider fails at ``step``."""
    good.set("/token", Behaviour.json(TOKEN))
    good.set("/userinfo", Behaviour.json(USERINFO))
    tls_server = FaultServer(tls=True) if fault.kind == "tls" else None
    try:
        if fault.kind == "refused":
            target = refused_url("/fault")
        elif fault.kind == "dns":
            target = DNS_FAILURE_URL.replace("http://", "https://")
        elif tls_server is not None:
            tls_server.start()
            target = f"{tls_server.url}/fault"
        else:
            assert fault.behaviour is not None
            good.set("/fault", fault.behaviour())
            target = f"{good.url}/fault"
        block = valid_block(
            redirectURL="/authenticate/faulty",
            accessTokenURL=target if step == "token" else f"{good.url}/token",
            apiURL=target if step == "profile" else f"{good.url}/userinfo",
        )
        app = make_app({"faulty": block}, SOCIAL_OAUTH2_TIMEOUT=TIMEOUT)
        errors: list[AuthenticationError] = []

        def failed(sender: Any, provider_name: str, error: AuthenticationError) -> None:
            errors.append(error)

        client = app.test_client()
        query = start_flow(client, "faulty")
        callback = {"code": "the-code", "state": query["state"]}
        with signals.authentication_failed.connected_to(failed, app):
            if fault.trace_memory:
                tracemalloc.start()
            started = time.monotonic()
            try:
                response = client.get("/authenticate/faulty", query_string=callback)
                seconds = time.monotonic() - started
                peak = tracemalloc.get_traced_memory()[1] if fault.trace_memory else None
            finally:
                if fault.trace_memory:
                    tracemalloc.stop()
        if tls_server is not None:
            # One TLS handshake was tried, and not again: nothing is retried.
            assert tls_server.connections_accepted == 1
            assert tls_server.count() == 0
        return Outcome(response.status_code, response.text, seconds, peak, errors)
    finally:
        if tls_server is not None:
            tls_server.stop()


@pytest.mark.parametrize("step", ["token", "profile"])
@pytest.mark.parametrize("fault", FAULTS, ids=[fault.name for fault in FAULTS])
def test_provider_fault(
    make_app: MakeApp, fault_server: FaultServer, fault: Fault, step: Step
) -> None:
    outcome = run_fault(make_app, fault_server, fault, step)

    # A typed error, of the step's class, with the deliberate status.
    (error,) = outcome.errors
    expected_class = UnexpectedResponseError if step == "token" else ProfileRetrievalError
    assert type(error) is expected_class
    assert error.status_code == fault.status
    assert fault.message in str(error)
    assert "provider 'faulty'" in str(error)
    assert "the-code" not in str(error)

    # The default page: that status, the class's fixed sentence, nothing of the answer.
    assert outcome.status == fault.status
    assert "Sign-in failed" in outcome.text
    assert str(escape(expected_class.public_message)) in outcome.text
    assert "Traceback" not in outcome.text
    for leaked in ('"padding"', "xxxx", "Log in", "slow down", "Service Unavailable"):
        assert leaked not in outcome.text

    # In time, and within a bounded amount of memory.
    assert outcome.seconds < TIMEOUT + 1.0, f"{fault.name} took {outcome.seconds:.2f} s"
    if outcome.peak is not None:
        assert outcome.peak < MEMORY_BUDGET, f"peak {outcome.peak / MiB:.1f} MiB"
    RESULTS.setdefault(fault.name, {})[step] = (outcome.seconds, outcome.peak)

    # Exactly one request per step that was reached: no retry of anything.
    if step == "token":
        assert fault_server.count("/userinfo") == 0
        if fault.kind == "server":
            assert fault_server.count("/fault") == 1
    else:
        assert fault_server.count("/token") == 1
        if fault.kind == "server":
            assert fault_server.count("/fault") == 1
        (token_request,) = [r for r in fault_server.requests if r.path == "/token"]
        assert token_request.form()["code"] == ["the-code"]


def test_a_fault_ends_the_flow_for_good(make_app: MakeApp, fault_server: FaultServer) -> None:
    """After a failed code exchange the state is spent: sending the callback again (a reload,
    or a proxy retrying the GET) is a 400 and reaches the provider no more."""
    fault_server.set("/token", Behaviour.text("Service Unavailable", status=503))
    block = valid_block(
        redirectURL="/authenticate/faulty",
        accessTokenURL=f"{fault_server.url}/token",
        apiURL=f"{fault_server.url}/userinfo",
    )
    client = make_app({"faulty": block}, SOCIAL_OAUTH2_TIMEOUT=TIMEOUT).test_client()
    query = start_flow(client, "faulty")
    callback = {"code": "the-code", "state": query["state"]}
    assert client.get("/authenticate/faulty", query_string=callback).status_code == 502
    assert client.get("/authenticate/faulty", query_string=callback).status_code == 400
    assert fault_server.count("/token") == 1
