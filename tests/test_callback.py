"""What the callback tells a user whose sign-in cannot be finished, against the real
authorization server of the ``idp`` fixture."""

from __future__ import annotations

import logging

from flask import Flask
from helpers import MakeApp, callback_path, follow_to_provider, idp_block

from flask_social_oauth2.local_idp import LocalIdentityProvider


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
