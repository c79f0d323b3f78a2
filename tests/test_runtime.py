"""The per-app objects the flow reads with ``current_runtime()``."""

from __future__ import annotations

import pytest
from flask import Flask
from helpers import MakeApp, valid_block

from flask_social_oauth2.errors import SocialOAuth2Error
from flask_social_oauth2.runtime import Runtime, current_runtime


def test_init_app_builds_the_runtime_from_the_config(make_app: MakeApp) -> None:
    app = make_app(
        {"example": valid_block()},
        SOCIAL_OAUTH2_TIMEOUT=3,
        SOCIAL_OAUTH2_MAX_RESPONSE_BYTES=4096,
        SOCIAL_OAUTH2_STATE_TTL=120,
        SOCIAL_OAUTH2_STATE_COOKIE_PATH="/authenticate",
    )
    with app.app_context():
        runtime = current_runtime()
    assert isinstance(runtime, Runtime)
    assert runtime is app.extensions["social_oauth2"]
    assert (runtime.timeout, runtime.max_response_bytes) == (3.0, 4096)
    assert (runtime.state_cookies.ttl, runtime.state_cookies.path) == (120, "/authenticate")


def test_each_app_has_its_own_runtime(make_app: MakeApp) -> None:
    one, two = make_app(SOCIAL_OAUTH2_TIMEOUT=1), make_app(SOCIAL_OAUTH2_TIMEOUT=2)
    with one.app_context():
        first = current_runtime()
    with two.app_context():
        second = current_runtime()
    assert first.timeout == 1
    assert second.timeout == 2
    assert first.state_cookies is not second.state_cookies


def test_without_init_app_the_error_says_so() -> None:
    with Flask("bare").app_context(), pytest.raises(SocialOAuth2Error, match="init_app"):
        current_runtime()
