"""The configuration checks: the redirect URL rule (at init_app, at the first request, in code)
and the warnings about hosts and empty configurations."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from helpers import CLIENT_SECRET, MakeApp, block_for, valid_block

from flask_social_oauth2 import SocialOAuth2
from flask_social_oauth2.checks import (
    check_configuration,
    no_provider_warning,
    redirect_url_problems,
    untrusted_host_warning,
)
from flask_social_oauth2.cli import social_cli
from flask_social_oauth2.errors import ConfigurationError

RULE = "from the mounted rule '/authenticate/<provider>'"


def unchecked(make_app: MakeApp, providers: dict[str, Any], **config: Any) -> Flask:
    """An app whose init_app leaves the redirect URL rule alone, for checking it in code."""
    return make_app(providers, SOCIAL_OAUTH2_CHECK_REDIRECT_URLS=False, **config)


# -- the redirect URL rule in code ---------------------------------------------------------------


def test_matching_paths_pass(make_app: MakeApp) -> None:
    app = make_app(
        {
            "relative": block_for("relative"),
            "absolute": valid_block(redirectURL="https://app.example/authenticate/absolute"),
        }
    )
    social = app.extensions["social_oauth2"].extension
    assert social.check_app(app) == []
    assert redirect_url_problems(app) == []
    assert app.test_client().get("/").status_code == 200


@pytest.mark.parametrize(
    ("redirect_url", "message"),
    [
        (
            "/authenticate/other",
            f"path '/authenticate/other' routes to provider 'other'; expected"
            f" '/authenticate/example', {RULE}",
        ),
        (
            "/nowhere",
            f"path '/nowhere' routes to no GET view; expected '/authenticate/example', {RULE}",
        ),
        ("https://app.example/auth/example", "path '/auth/example' routes to no GET view"),
    ],
)
def test_a_problem_names_provider_key_expected_path_and_mounted_rule(
    make_app: MakeApp, redirect_url: str, message: str
) -> None:
    app = unchecked(make_app, {"example": valid_block(redirectURL=redirect_url)})
    social = app.extensions["social_oauth2"].extension
    (problem,) = social.check_app(app)
    assert str(problem).startswith(f"provider 'example', key 'redirectURL': {message}")


def test_check_configuration_reports_the_rule_in_code(make_app: MakeApp) -> None:
    app = unchecked(make_app, {"github": valid_block(redirectURL="/authenticat/github")})
    report = check_configuration(app)
    assert not report.ok
    assert report.errors == [
        "provider 'github', key 'redirectURL': path '/authenticat/github' routes to no GET view;"
        f" expected '/authenticate/github', {RULE}"
    ]


# -- at init_app ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "typo",
    [
        "/authenticat/github",
        "/authenticate/githbu",
        "/Authenticate/github",
        "/authenticate/github/",
        "/autenticate/github",
        "https://app.example/authenticat/github",
    ],
)
def test_a_typo_in_the_redirect_url_fails_at_init_app(typo: str) -> None:
    app = Flask("typo")
    app.config.update(
        SECRET_KEY="k",
        TRUSTED_HOSTS=["localhost"],
        SOCIAL_OAUTH2_PROVIDERS={"github": valid_block(redirectURL=typo)},
    )
    with pytest.raises(ConfigurationError) as error:
        SocialOAuth2(app)
    (problem,) = error.value.problems
    assert (problem.provider, problem.key) == ("github", "redirectURL")
    assert f"expected '/authenticate/github', {RULE}" in str(problem)
    assert "social_oauth2" not in app.extensions
    assert CLIENT_SECRET not in str(error.value)


def test_the_init_app_error_says_how_to_keep_a_view_of_the_app_s_own() -> None:
    app = Flask("typo")
    app.config.update(
        SECRET_KEY="k",
        SOCIAL_OAUTH2_PROVIDERS={"github": valid_block(redirectURL="/authenticat/github")},
    )
    with pytest.raises(ConfigurationError) as error:
        SocialOAuth2(app)
    assert str(error.value) == (
        "provider 'github', key 'redirectURL': path '/authenticat/github' routes to no GET view;"
        f" expected '/authenticate/github', {RULE} (a view of the app's own for this path must"
        " be registered before init_app)"
    )


def test_a_redirect_url_routed_to_another_provider_fails_at_init_app(make_app: MakeApp) -> None:
    with pytest.raises(ConfigurationError) as error:
        make_app({"one": block_for("one"), "two": valid_block(redirectURL="/authenticate/one")})
    (problem,) = error.value.problems
    assert str(problem) == (
        "provider 'two', key 'redirectURL': path '/authenticate/one' routes to provider 'one';"
        f" expected '/authenticate/two', {RULE}"
    )


def test_a_custom_rule_is_named(make_app: MakeApp) -> None:
    with pytest.raises(ConfigurationError, match=r"from the mounted rule '/login/<provider>'"):
        make_app(
            {"github": valid_block(redirectURL="/logn/github")},
            SOCIAL_OAUTH2_URL_RULE="/login/<provider>",
        )


@pytest.mark.parametrize(
    ("own_path", "own_rule"),
    [
        ("/callback/example", "/callback/<provider>"),
        ("/auth/example", "/auth/<provider>"),
        ("/login/example/callback", "/login/<provider>/callback"),
        ("/oauth2/back", "/oauth2/back"),
    ],
)
def test_a_path_of_a_view_registered_after_init_app_is_accepted(
    make_app: MakeApp, own_path: str, own_rule: str
) -> None:
    app = make_app({"example": valid_block(redirectURL=own_path)})
    app.add_url_rule(own_rule, "own_callback", lambda **arguments: "the app's own callback")
    assert redirect_url_problems(app) == []
    assert app.test_client().get("/").status_code == 200
    assert app.test_client().get("/authenticate/example").status_code == 302


def test_the_check_can_be_turned_off(make_app: MakeApp) -> None:
    app = make_app(
        {"example": valid_block(redirectURL="/authenticat/example")},
        SOCIAL_OAUTH2_CHECK_REDIRECT_URLS=False,
    )
    assert app.test_client().get("/").status_code == 200
    assert app.test_client().get("/authenticate/example").status_code == 302


# -- at the first request ------------------------------------------------------------------------


def test_at_the_first_request_only_the_broken_sign_in_answers_with_a_clear_page(
    make_app: MakeApp, caplog: pytest.LogCaptureFixture
) -> None:
    app = make_app(
        {"example": valid_block(redirectURL="/callback/example"), "fine": block_for("fine")}
    )
    client = app.test_client()
    with caplog.at_level(logging.ERROR, logger="flask_social_oauth2"):
        assert client.get("/").status_code == 200
        broken = client.get("/authenticate/example")
        again = client.get("/authenticate/example")
        assert client.get("/authenticate/fine").status_code == 302
    assert broken.status_code == again.status_code == 503
    assert "Location" not in broken.headers
    page = broken.get_data(as_text=True)
    assert "Sign-in with this provider is not available" in page
    assert "/callback/example" not in page
    assert broken.headers["Referrer-Policy"] == "no-referrer"
    (record,) = caplog.records
    assert record.getMessage() == (
        "provider 'example', key 'redirectURL': path '/callback/example' routes to no GET view;"
        f" expected '/authenticate/example', {RULE}"
    )


def test_in_debug_mode_the_page_names_the_problem(make_app: MakeApp) -> None:
    app = make_app({"example": valid_block(redirectURL="/callback/example")}, DEBUG=True)
    response = app.test_client().get("/authenticate/example")
    assert response.status_code == 503
    page = response.get_data(as_text=True)
    assert "key &#39;redirectURL&#39;: path &#39;/callback/example&#39; routes to no GET" in page
    assert CLIENT_SECRET not in page


# -- warnings ------------------------------------------------------------------------------------


def test_relative_redirect_without_trusted_hosts_warns_once_in_the_singular(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = Flask("x")
    app.config.update(SECRET_KEY="k", SOCIAL_OAUTH2_PROVIDERS={"e": block_for("e")})
    with caplog.at_level(logging.WARNING, logger="flask_social_oauth2"):
        SocialOAuth2(app)
    (record,) = caplog.records
    assert record.getMessage().startswith("provider 'e' has a relative redirectURL")
    assert "TRUSTED_HOSTS" in record.getMessage()


def test_the_host_warning_names_several_providers_in_the_plural(make_app: MakeApp) -> None:
    app = make_app({"b": block_for("b"), "a": block_for("a")})
    providers = app.extensions["social_oauth2"].providers
    assert untrusted_host_warning(app, providers) is None
    app.config["TRUSTED_HOSTS"] = None
    warning = untrusted_host_warning(app, providers)
    assert warning is not None
    assert warning.startswith("providers 'a', 'b' have a relative redirectURL")


def test_no_warning_with_trusted_hosts(caplog: pytest.LogCaptureFixture, make_app: MakeApp) -> None:
    with caplog.at_level(logging.WARNING, logger="flask_social_oauth2"):
        make_app({"e": block_for("e")})
    assert caplog.records == []


def test_an_absolute_redirect_url_to_a_host_trusted_hosts_does_not_list_warns(
    caplog: pytest.LogCaptureFixture, make_app: MakeApp
) -> None:
    """The classic: the app is opened at 127.0.0.1, the provider sends the user to localhost."""
    providers = {"github": valid_block(redirectURL="http://LocalHost:5000/authenticate/github")}
    with caplog.at_level(logging.WARNING, logger="flask_social_oauth2"):
        app = make_app(providers, TRUSTED_HOSTS=["127.0.0.1"])
    expected = (
        "provider 'github''s redirectURL names the host 'localhost:5000', which TRUSTED_HOSTS"
        " ('127.0.0.1') does not list: the app would answer the provider's redirect there with"
        " a 400. Add the host to TRUSTED_HOSTS, and open the app at that address, since a"
        " sign-in's cookie stays with the address it started on."
    )
    assert [record.getMessage() for record in caplog.records] == [expected]
    report = check_configuration(app)
    assert report.warnings == [expected]
    assert report.errors == []
    # what the warning foretells: the provider's redirect to that host is refused
    callback = app.test_client().get(
        "/authenticate/github?code=c&state=s", base_url="http://localhost:5000"
    )
    assert callback.status_code == 400


@pytest.mark.parametrize(
    ("trusted", "unlisted"),
    [
        (["localhost", "app.example.com"], None),
        (["localhost:8000", ".example.com"], None),  # Werkzeug ignores the port; .x: subdomains
        (["localhost"], "provider 'b''s redirectURL names the host 'app.example.com'"),
        ([".example.com"], "provider 'a''s redirectURL names the host 'localhost:5000'"),
    ],
)
def test_trusted_hosts_is_matched_as_werkzeug_matches_it(
    make_app: MakeApp, trusted: list[str], unlisted: str | None
) -> None:
    app = make_app(
        {
            "a": valid_block(redirectURL="http://localhost:5000/authenticate/a"),
            "b": valid_block(redirectURL="https://app.example.com/authenticate/b"),
            "c": block_for("c"),
        },
        TRUSTED_HOSTS=trusted,
    )
    warning = untrusted_host_warning(app, app.extensions["social_oauth2"].providers)
    if unlisted is None:
        assert warning is None
    else:
        assert warning is not None
        assert warning.startswith(f"{unlisted}, which TRUSTED_HOSTS ({trusted[0]!r}) does not")


def test_the_untrusted_redirect_host_warning_names_each_provider_and_host(
    make_app: MakeApp,
) -> None:
    app = make_app(
        {
            "b": valid_block(redirectURL="https://b.example/authenticate/b"),
            "a": valid_block(redirectURL="http://localhost:5000/authenticate/a"),
        },
        TRUSTED_HOSTS=["127.0.0.1"],
    )
    warning = untrusted_host_warning(app, app.extensions["social_oauth2"].providers)
    assert warning is not None
    assert warning.startswith(
        "the redirectURLs of providers 'a' ('localhost:5000'), 'b' ('b.example') name hosts"
        " that TRUSTED_HOSTS ('127.0.0.1') does not list"
    )
    result = app.test_cli_runner().invoke(social_cli, ["check", "--strict"])
    assert result.exit_code == 1
    assert f"warning: {warning}\n" in result.stderr


def test_no_provider_warning_only_when_none_is_configured(
    make_app: MakeApp, tmp_path: Path
) -> None:
    configured = make_app({"e": block_for("e")})
    assert no_provider_warning(configured, configured.extensions["social_oauth2"].providers) is None
    empty = make_app()
    assert no_provider_warning(empty, {}) == (
        "no provider is configured: set SOCIAL_OAUTH2_PROVIDERS or SOCIAL_OAUTH2_PROVIDERS_FILE"
    )
    (tmp_path / "providers.yaml").write_text("# none yet\n", encoding="utf-8")
    app = Flask("empty_file", root_path=str(tmp_path))
    app.config.update(SECRET_KEY="k", SOCIAL_OAUTH2_PROVIDERS_FILE="providers.yaml")
    SocialOAuth2(app)
    assert no_provider_warning(app, {}) == (
        f"no provider is configured: the providers file {str(tmp_path / 'providers.yaml')!r}"
        " has no block"
    )
