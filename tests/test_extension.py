"""SocialOAuth2: init_app, the registry and the route (the redirect URL rule: test_checks)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask
from helpers import MakeApp, block_for, in_threads, valid_block

from flask_social_oauth2 import OAuth2Provider, OAuth2Settings, SocialOAuth2, SocialProvider
from flask_social_oauth2.errors import (
    ConfigurationError,
    SocialOAuth2Error,
    UnknownProviderError,
)


def test_pallets_style_setup_keeps_state_in_app_extensions() -> None:
    social = SocialOAuth2()
    apps = []
    for index in range(2):
        app = Flask(f"app{index}")
        app.config.update(
            SECRET_KEY="k", SOCIAL_OAUTH2_PROVIDERS={f"p{index}": block_for(f"p{index}")}
        )
        social.init_app(app)
        apps.append(app)
    assert not hasattr(social, "app")
    for index, app in enumerate(apps):
        with app.app_context():
            assert list(social.providers) == [f"p{index}"]


def test_config_defaults_are_set_with_setdefault(make_app: MakeApp) -> None:
    app = make_app(SOCIAL_OAUTH2_TIMEOUT=3)
    assert app.config["SOCIAL_OAUTH2_TIMEOUT"] == 3
    assert app.config["SOCIAL_OAUTH2_STATE_TTL"] == 600
    assert app.config["SOCIAL_OAUTH2_URL_RULE"] == "/authenticate/<provider>"


def test_registering_twice_is_an_error(make_app: MakeApp) -> None:
    app = make_app()
    with pytest.raises(SocialOAuth2Error, match="already set up"):
        SocialOAuth2(app)


def test_use_before_init_app_is_a_clear_error() -> None:
    social = SocialOAuth2()
    app = Flask("bare")
    with app.app_context(), pytest.raises(SocialOAuth2Error, match="init_app"):
        social.provider("github")


def test_provider_lookup(make_app: MakeApp) -> None:
    app = make_app({"example": block_for("example")})
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension
    with app.app_context():
        provider = social.provider("example")
        assert isinstance(provider, OAuth2Provider)
        assert provider.name == "example"
        assert provider.settings.client_id == "test-client"
        assert social.providers["example"] is provider
        with pytest.raises(TypeError):
            social.providers["other"] = provider  # type: ignore[index]


def test_unknown_provider_is_a_lookup_error(make_app: MakeApp) -> None:
    app = make_app({"example": block_for("example")})
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension
    with app.app_context():
        with pytest.raises(UnknownProviderError, match="'nope'; configured: example"):
            social.provider("nope")
        with pytest.raises(LookupError):
            social.provider("nope")


def test_route_answers_404_for_an_unknown_provider(make_app: MakeApp) -> None:
    app = make_app({"example": block_for("example")})
    response = app.test_client().get("/authenticate/nope")
    assert response.status_code == 404


def test_route_rule_is_configurable(make_app: MakeApp) -> None:
    app = make_app(
        {"example": valid_block(redirectURL="/login/example/callback")},
        SOCIAL_OAUTH2_URL_RULE="/login/<provider>/callback",
    )
    response = app.test_client().get("/login/example/callback")
    assert response.status_code == 302
    assert app.test_client().get("/authenticate/example").status_code == 404


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("SOCIAL_OAUTH2_TIMEOUT", 0, "must be a number >= 0.1"),
        ("SOCIAL_OAUTH2_TIMEOUT", "10", "must be a number"),
        ("SOCIAL_OAUTH2_STATE_TTL", 1.5, "must be a whole number"),
        ("SOCIAL_OAUTH2_URL_RULE", "/authenticate", "must be a path containing '<provider>'"),
        ("SOCIAL_OAUTH2_STATE_COOKIE", "", "must be a non-empty string"),
    ],
)
def test_bad_app_settings_are_named(make_app: MakeApp, key: str, value: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=f"key '{key}': {message}"):
        make_app(**{key: value})


def test_bad_block_fails_at_init_app_with_every_problem(make_app: MakeApp) -> None:
    with pytest.raises(ConfigurationError) as error:
        make_app({"a": {"clientId": "x"}, "b": block_for("b", apiURL="http://x.example/")})
    assert len(error.value.problems) == 6


def test_generic_provider_needs_an_api_url(make_app: MakeApp) -> None:
    with pytest.raises(ConfigurationError, match="'apiURL': is required: this provider has no"):
        make_app({"example": block_for("example", apiURL=None)})


def test_provider_classes_setting_gives_a_block_another_class(make_app: MakeApp) -> None:
    class Special(OAuth2Provider):
        default_api_url = "https://special.example/me"

    app = make_app(
        {"second": block_for("second", apiURL=None)},
        SOCIAL_OAUTH2_PROVIDER_CLASSES={"second": Special},
    )
    with app.app_context():
        provider = app.extensions["social_oauth2"].providers["second"]
        assert type(provider) is Special
        assert isinstance(provider, OAuth2Provider)
        assert provider.profile_url == "https://special.example/me"


def test_provider_classes_accepts_an_import_path(make_app: MakeApp) -> None:
    app = make_app(
        {"second": block_for("second")},
        SOCIAL_OAUTH2_PROVIDER_CLASSES={
            "second": "flask_social_oauth2.providers.oauth2:OAuth2Provider"
        },
    )
    assert type(app.extensions["social_oauth2"].providers["second"]) is OAuth2Provider


@pytest.mark.parametrize(
    ("choice", "message"),
    [
        ("no-such-builtin", "is not a built-in provider"),
        ("no.such.module:Thing", "cannot import"),
        (dict, "must name a SocialProvider subclass"),
    ],
)
def test_bad_provider_class_choices(make_app: MakeApp, choice: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        make_app({"second": block_for("second")}, SOCIAL_OAUTH2_PROVIDER_CLASSES={"second": choice})


def test_provider_classes_argument() -> None:
    class Special(OAuth2Provider):
        pass

    app = Flask("x")
    app.config.update(SECRET_KEY="k", SOCIAL_OAUTH2_PROVIDERS={"s": block_for("s")})
    SocialOAuth2(app, provider_classes={"s": Special})
    assert type(app.extensions["social_oauth2"].providers["s"]) is Special


# -- with_settings ------------------------------------------------------------------------------


def test_with_settings_derives_a_new_provider_of_the_same_class(make_app: MakeApp) -> None:
    app = make_app({"example": block_for("example")})
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension
    with app.app_context():
        provider = social.provider("example")
        derived = provider.with_settings(lambda s: s.replace(scope="repo"))
        assert type(derived) is type(provider)
        assert derived is not provider
        assert derived.name == "example"
        assert derived.settings.scope == "repo"
        assert provider.settings.scope == "openid profile email"
        assert social.provider("example").settings.scope == "openid profile email"
        assert app.config["SOCIAL_OAUTH2_PROVIDERS"]["example"]["scope"] == "openid profile email"


def test_with_settings_validates_the_result(make_app: MakeApp) -> None:
    app = make_app({"example": block_for("example")})
    with app.app_context():
        provider: SocialProvider = app.extensions["social_oauth2"].providers["example"]
        with pytest.raises(TypeError, match="must return OAuth2Settings, not dict"):
            provider.with_settings(lambda s: s.to_config())  # type: ignore[arg-type, return-value]
        with pytest.raises(ConfigurationError, match="must use https"):
            provider.with_settings(lambda s: s.replace(access_token_url="http://x.example/t"))
        with pytest.raises(ConfigurationError, match="provider 'example', key 'apiURL'"):
            provider.with_settings(lambda s: s.replace(api_url=None))


def replace_scope(scope: str) -> Callable[[OAuth2Settings], OAuth2Settings]:
    return lambda settings: settings.replace(scope=scope)


def test_with_settings_is_isolated_under_16_threads(make_app: MakeApp) -> None:
    app = make_app({"example": block_for("example")})
    provider: SocialProvider = app.extensions["social_oauth2"].providers["example"]
    original: OAuth2Settings = provider.settings
    barrier = threading.Barrier(16)
    seen: dict[int, list[str | None]] = {}

    def work(index: int) -> None:
        barrier.wait()
        scopes = []
        for round_ in range(200):
            scope = f"scope-{index}-{round_}"
            derived = provider.with_settings(replace_scope(scope))
            scopes.append(derived.settings.scope)
            assert provider.settings is original
        seen[index] = scopes

    in_threads(work, 16)
    assert sorted(seen) == list(range(16))
    for index, scopes in seen.items():
        assert scopes == [f"scope-{index}-{round_}" for round_ in range(200)]
    assert provider.settings is original
    assert provider.settings.scope == "openid profile email"


def test_app_mounted_under_a_prefix_routes_its_relative_redirect_url(make_app: MakeApp) -> None:
    app = make_app({"example": block_for("example")})
    client = app.test_client()
    started = client.get("/authenticate/example", base_url="http://localhost/app")
    assert started.status_code == 302
    assert (
        "redirect_uri=http%3A%2F%2Flocalhost%2Fapp%2Fauthenticate%2Fexample"
        in (started.headers["Location"])
    )
    assert client.get("/", base_url="http://localhost/app").status_code == 200


def test_server_name_does_not_silence_the_trusted_hosts_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = Flask("x")
    app.config.update(
        SECRET_KEY="k", SERVER_NAME="app.example", SOCIAL_OAUTH2_PROVIDERS={"e": block_for("e")}
    )
    with caplog.at_level(logging.WARNING, logger="flask_social_oauth2"):
        SocialOAuth2(app)
    (record,) = caplog.records
    assert "TRUSTED_HOSTS is not set" in record.getMessage()
