"""The extension's settings are read once, in init_app, into one typed, frozen record."""

from __future__ import annotations

import dataclasses

import pytest

from flask_social_oauth2.errors import ConfigurationError
from flask_social_oauth2.options import DEFAULTS, Options, read_options


def test_the_defaults_read_into_typed_fields() -> None:
    options = read_options(dict(DEFAULTS))
    assert isinstance(options, Options)
    assert options.rule == "/authenticate/<provider>"
    assert options.timeout == 10.0
    assert isinstance(options.timeout, float)
    assert options.state_ttl == 600
    assert options.max_bytes == 1024 * 1024
    assert options.confirm_cross_site_starts is True
    assert options.state_cookie is None
    assert options.session_key == "social_profile"
    assert options.check_redirect_urls is True
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.timeout = 1.0  # type: ignore[misc]


def test_allow_and_a_named_cookie_are_read() -> None:
    config = {
        **DEFAULTS,
        "SOCIAL_OAUTH2_CROSS_SITE_START": "allow",
        "SOCIAL_OAUTH2_STATE_COOKIE": "flows",
        "SOCIAL_OAUTH2_TOKEN_STORE": "none",
    }
    options = read_options(config)
    assert options.confirm_cross_site_starts is False
    assert options.state_cookie == "flows"
    assert options.token_store is None


def test_every_wrong_setting_is_listed_at_once() -> None:
    config = {**DEFAULTS, "SOCIAL_OAUTH2_TIMEOUT": "10", "SOCIAL_OAUTH2_SESSION_KEY": ""}
    with pytest.raises(ConfigurationError) as raised:
        read_options(config)
    keys = {problem.key for problem in raised.value.problems}
    assert keys == {"SOCIAL_OAUTH2_TIMEOUT", "SOCIAL_OAUTH2_SESSION_KEY"}
