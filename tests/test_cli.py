"""The ``flask social`` command group: check, providers, init."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from click.testing import CliRunner, Result
from flask import Flask
from flask.cli import FlaskGroup, ScriptInfo
from helpers import CLIENT_SECRET, MakeApp, block_for, example_value, run_flask, valid_block

from flask_social_oauth2 import SocialOAuth2
from flask_social_oauth2.cli import provider_blocks, social_cli
from flask_social_oauth2.config.blocks import StringScalarLoader, load_settings
from flask_social_oauth2.errors import ConfigurationError
from flask_social_oauth2.providers import BUILTIN_PROVIDERS

ROOT = Path(__file__).resolve().parents[1]


def run(app: Flask, *args: str) -> Result:
    return app.test_cli_runner().invoke(social_cli, list(args))


def broken_app() -> Flask:
    """A factory whose configuration fails in init_app with three problems."""
    app = Flask("broken")
    app.config.update(
        SECRET_KEY="k",
        SOCIAL_OAUTH2_PROVIDERS={
            "github": block_for("github", clientID=None, scope=["read:user"]),
            "acme": block_for("acme", accessTokenURL="http://token.example/token"),
        },
    )
    SocialOAuth2(app)
    return app


# -- check ---------------------------------------------------------------------------------------


def test_check_passes_a_good_configuration(make_app: MakeApp) -> None:
    app = make_app({"example": block_for("example"), "other": block_for("other")})
    result = run(app, "check")
    assert result.exit_code == 0, result.output
    assert result.stdout == "ok: 2 providers (example, other)\n"
    assert result.stderr == ""


def test_check_lists_every_redirect_url_problem_and_exits_1(make_app: MakeApp) -> None:
    app = make_app(
        {
            "one": block_for("one", redirectURL="/nowhere"),
            "two": block_for("two", redirectURL="/authenticate/one"),
            "fine": block_for("fine"),
        },
        SOCIAL_OAUTH2_CHECK_REDIRECT_URLS=False,
    )
    result = run(app, "check")
    assert result.exit_code == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: provider 'one', key 'redirectURL': path '/nowhere' routes to no GET view;"
        " expected '/authenticate/one', from the mounted rule '/authenticate/<provider>'",
        "error: provider 'two', key 'redirectURL': path '/authenticate/one' routes to provider"
        " 'one'; expected '/authenticate/two', from the mounted rule '/authenticate/<provider>'",
    ]
    assert "failed: 2 errors, 0 warnings in 3 providers (one, two, fine)" in result.stderr
    assert result.stdout == ""


def test_check_warns_about_relative_redirect_urls_without_trusted_hosts(
    make_app: MakeApp,
) -> None:
    app = make_app(
        {"b": block_for("b"), "a": block_for("a")},
        TRUSTED_HOSTS=None,
        SERVER_NAME="app.example",
    )
    result = run(app, "check")
    assert result.exit_code == 0, result.output
    assert (
        "warning: providers 'a', 'b' have a relative redirectURL, resolved against the"
        " request's Host header, but TRUSTED_HOSTS is not set" in result.stderr
    )
    assert result.stdout == "ok: 2 providers (b, a), 1 warning\n"
    strict = run(app, "check", "--strict")
    assert strict.exit_code == 1
    assert "failed: 0 errors, 1 warning in 2 providers (b, a)" in strict.stderr


def test_check_warns_about_plain_http_redirect_urls_and_no_providers(make_app: MakeApp) -> None:
    app = make_app({"x": valid_block(redirectURL="http://app.example/authenticate/x")})
    result = run(app, "check")
    assert result.exit_code == 0
    assert "provider 'x', key 'redirectURL': plain http to a host that is not loopback" in (
        result.stderr
    )
    loopback = make_app({"x": valid_block(redirectURL="http://127.0.0.1:5000/authenticate/x")})
    assert run(loopback, "check").stderr == ""
    empty = run(make_app(), "check")
    assert empty.exit_code == 0
    assert "warning: no provider is configured" in empty.stderr
    assert empty.stdout == "ok: 0 providers, 1 warning\n"


def test_check_validates_the_blocks_again_with_the_current_environment(
    make_app: MakeApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLI_TEST_SECRET", "from-the-environment")
    app = make_app({"example": block_for("example", clientSecret="${CLI_TEST_SECRET}")})
    assert run(app, "check").exit_code == 0
    monkeypatch.delenv("CLI_TEST_SECRET")
    result = run(app, "check")
    assert result.exit_code == 1
    assert (
        "error: provider 'example', key 'clientSecret': environment variable"
        " 'CLI_TEST_SECRET' is not set" in result.stderr
    )
    assert "from-the-environment" not in result.output


def test_check_requires_a_secret_key(make_app: MakeApp) -> None:
    app = make_app({"example": block_for("example")}, SECRET_KEY=None)
    result = run(app, "check")
    assert result.exit_code == 1
    assert "error: SECRET_KEY is not set" in result.stderr


def test_check_reports_an_app_whose_init_app_fails_without_a_traceback() -> None:
    result = CliRunner().invoke(social_cli, ["check"], obj=ScriptInfo(create_app=broken_app))
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.stderr.splitlines()
    assert "error: provider 'github', key 'clientID': is required" in lines
    assert any(
        line.startswith("error: provider 'github', key 'scope': must be a string") for line in lines
    )
    assert any(
        line.startswith("error: provider 'acme', key 'accessTokenURL': must use https")
        for line in lines
    )
    assert lines[-1].startswith("3 problems: the app failed to start")
    assert "Traceback" not in result.output
    assert CLIENT_SECRET not in result.output


def test_flask_finds_the_group_before_the_app_loads_through_the_plugin_entry_point() -> None:
    """``flask --app broken social check``: Flask loads plugin commands (the installed
    ``flask.commands`` entry point) before it loads the app, which is what lets the command
    report a configuration that fails in init_app."""
    cli = FlaskGroup(create_app=broken_app, load_dotenv=False)
    result = CliRunner().invoke(cli, ["social", "check"])
    assert result.exit_code == 1
    assert "3 problems: the app failed to start" in result.stderr
    assert "Traceback" not in result.output


def test_the_plugin_entry_point_is_declared() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    entry_points = project.get("entry-points", {})
    flask_commands = entry_points.get("flask.commands", {})
    assert flask_commands.get("social") == "flask_social_oauth2.cli:social_cli"


def test_check_on_an_app_without_the_extension_is_a_clear_error() -> None:
    result = CliRunner().invoke(
        social_cli, ["check"], obj=ScriptInfo(create_app=lambda: Flask("bare"))
    )
    assert result.exit_code == 1
    assert "flask-social-oauth2 is not set up on app 'bare'" in result.stderr


def test_init_app_leaves_the_group_to_the_entry_point(make_app: MakeApp) -> None:
    app = make_app({"example": block_for("example")})
    assert "social" not in app.cli.commands
    cli = FlaskGroup(create_app=lambda: app, load_dotenv=False)
    assert (
        cli.list_commands(click.Context(cli, obj=ScriptInfo(create_app=lambda: app))).count(
            "social"
        )
        == 1
    )
    result = CliRunner().invoke(cli, ["social", "check"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "ok: 1 provider (example)\n"


# -- the real ``flask`` command ------------------------------------------------------------------

SHELL_APP = """\
from flask import Flask

from flask_social_oauth2 import SocialOAuth2

app = Flask(__name__)
app.config.update(SECRET_KEY="k", SOCIAL_OAUTH2_PROVIDERS_FILE="providers.yaml")
SocialOAuth2(app)
"""


def flask_in_a_shell(
    tmp_path: Path, redirect_url: str, *args: str
) -> subprocess.CompletedProcess[str]:
    """``flask --app <dir>/app.py ARGS`` from another directory, as a user runs it."""
    app_dir = tmp_path / "project"
    app_dir.mkdir()
    (app_dir / "app.py").write_text(SHELL_APP, encoding="utf-8")
    block = block_for("github", redirectURL=redirect_url)
    (app_dir / "providers.yaml").write_text(yaml.safe_dump({"github": block}), encoding="utf-8")
    return run_flask(tmp_path, "--app", str(app_dir / "app.py"), *args)


def test_flask_social_check_prints_each_warning_once(tmp_path: Path) -> None:
    result = flask_in_a_shell(tmp_path, "/authenticate/github", "social", "check")
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("relative redirectURL") == 1, result.stderr
    assert result.stderr.startswith("warning: provider 'github' has a relative redirectURL")
    assert result.stdout == "ok: 1 provider (github), 1 warning\n"


def test_flask_social_check_names_provider_key_and_rule_of_a_redirect_url_typo(
    tmp_path: Path,
) -> None:
    result = flask_in_a_shell(tmp_path, "/authenticat/github", "social", "check")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "error: provider 'github', key 'redirectURL': path '/authenticat/github' routes to no"
        " GET view; expected '/authenticate/github', from the mounted rule"
        " '/authenticate/<provider>' (a view of the app's own for this path must be registered"
        " before init_app)",
        "1 problem: the app failed to start (SocialOAuth2.init_app refused its provider"
        " configuration)",
    ]
    assert CLIENT_SECRET not in result.stderr + result.stdout


# -- providers -----------------------------------------------------------------------------------


def test_providers_prints_class_profile_address_and_redirect_url(make_app: MakeApp) -> None:
    app = make_app(
        {
            "github": block_for("github", apiURL=None),
            "example": block_for("example", customProperties={"apiKey": "hidden", "team": "a"}),
        },
        TRUSTED_HOSTS=[".app.example", "127.0.0.1"],
        PREFERRED_URL_SCHEME="https",
    )
    result = run(app, "providers")
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "github\n"
        "  class:          flask_social_oauth2.providers.GitHubProvider\n"
        "  authorization:  https://provider.example/authorize\n"
        "  token:          https://provider.example/token\n"
        "  profile:        https://api.github.com/user\n"
        "  redirect URL:   https://app.example/authenticate/github\n"
        "  client ID:      test-client\n"
        "  client secret:  ***\n"
        "  scope:          openid profile email\n"
        "\n"
        "example\n"
        "  class:          flask_social_oauth2.providers.oauth2.OAuth2Provider\n"
        "  authorization:  https://provider.example/authorize\n"
        "  token:          https://provider.example/token\n"
        "  profile:        https://provider.example/userinfo\n"
        "  redirect URL:   https://app.example/authenticate/example\n"
        "  client ID:      test-client\n"
        "  client secret:  ***\n"
        "  scope:          openid profile email\n"
        "  custom apiKey:  ***\n"
        "  custom team:    a\n"
    )
    assert CLIENT_SECRET not in result.output
    assert "hidden" not in result.output


@pytest.mark.parametrize(
    ("config", "args", "expected"),
    [
        # the flask run address, as the app sends it when opened there
        ({"TRUSTED_HOSTS": ["127.0.0.1"]}, (), "http://127.0.0.1:5000/authenticate/x"),
        ({"TRUSTED_HOSTS": ["localhost", "127.0.0.1"]}, (), "http://localhost:5000/"),
        ({"TRUSTED_HOSTS": ["::1"]}, (), "http://[::1]:5000/authenticate/x"),
        ({"TRUSTED_HOSTS": ["127.0.0.1:8000"]}, (), "http://127.0.0.1:8000/authenticate/x"),
        ({"TRUSTED_HOSTS": ["localhost"]}, ("--host", "localhost:8000"), "http://localhost:8000/"),
        ({"TRUSTED_HOSTS": ["localhost"]}, ("--host", "localhost:80"), "http://localhost/auth"),
        # elsewhere, served behind TLS; a scheme in --host says otherwise
        ({"SERVER_NAME": "app.example:8443"}, (), "https://app.example:8443/authenticate/x"),
        ({"TRUSTED_HOSTS": [".app.example"]}, (), "https://app.example/authenticate/x"),
        ({}, ("--host", "App.Example:443"), "https://app.example/authenticate/x"),
        ({}, ("--host", "http://192.168.1.5:8000"), "http://192.168.1.5:8000/authenticate/x"),
        ({}, ("--host", "HTTPS://127.0.0.1:5443"), "https://127.0.0.1:5443/authenticate/x"),
        ({"TRUSTED_HOSTS": None}, (), "http://<request host>/authenticate/x (depends on the"),
    ],
)
def test_providers_resolves_a_relative_redirect_url(
    make_app: MakeApp, config: dict[str, Any], args: tuple[str, ...], expected: str
) -> None:
    app = make_app({"x": block_for("x")}, **config)
    result = run(app, "providers", *args)
    assert result.exit_code == 0, result.output
    assert f"  redirect URL:   {expected}" in result.stdout


def test_providers_uses_the_port_flask_run_serves_on(
    make_app: MakeApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app({"x": block_for("x")}, TRUSTED_HOSTS=["127.0.0.1"])
    monkeypatch.setenv("FLASK_RUN_PORT", "8080")
    assert (
        "  redirect URL:   http://127.0.0.1:8080/authenticate/x\n" in run(app, "providers").stdout
    )
    monkeypatch.setenv("FLASK_RUN_PORT", "eighty")
    refused = run(app, "providers")
    assert refused.exit_code == 2
    assert refused.stderr == "error: FLASK_RUN_PORT='eighty' is not a port number\n"


@pytest.mark.parametrize(
    ("host", "reason"),
    [
        ("ftp://app.example", "the scheme must be http or https"),
        ("app.example/path", "is not [http://|https://]HOST[:PORT]"),
        ("app.example:99999", "is not [http://|https://]HOST[:PORT]"),
        ("user@app.example", "is not [http://|https://]HOST[:PORT]"),
        ("app example", "is not [http://|https://]HOST[:PORT]"),
        ("https://", "is not [http://|https://]HOST[:PORT]"),
    ],
)
def test_providers_refuses_a_host_that_is_not_one(
    make_app: MakeApp, host: str, reason: str
) -> None:
    result = run(make_app({"x": block_for("x")}), "providers", "--host", host)
    assert result.exit_code == 2
    assert f"Invalid value for '--host': {host!r}" in result.stderr
    assert reason in result.stderr


def test_providers_shows_an_absolute_redirect_url_as_it_is(make_app: MakeApp) -> None:
    url = "https://app.example/authenticate/x"
    result = run(make_app({"x": valid_block(redirectURL=url)}), "providers")
    assert f"  redirect URL:   {url}\n" in result.stdout
    assert run(make_app(), "providers").stdout == (
        "no provider is configured: set SOCIAL_OAUTH2_PROVIDERS or SOCIAL_OAUTH2_PROVIDERS_FILE\n"
    )


def test_providers_reports_a_failing_configuration() -> None:
    result = CliRunner().invoke(social_cli, ["providers"], obj=ScriptInfo(create_app=broken_app))
    assert result.exit_code == 1
    assert "3 problems: the app failed to start" in result.stderr


# -- init ----------------------------------------------------------------------------------------


def test_init_prints_a_ready_block(make_app: MakeApp) -> None:
    result = run(make_app(), "init", "GitHub")
    assert result.exit_code == 0, result.output
    block = yaml.load(result.stdout, Loader=StringScalarLoader)  # noqa: S506 - a safe loader
    assert list(block) == ["github"]
    assert block["github"]["redirectURL"] == "/authenticate/github"
    assert block["github"]["accessTokenURL"] == "https://github.com/login/oauth/access_token"


def test_init_with_an_unknown_name_lists_the_known_ones_and_exits_2() -> None:
    result = CliRunner().invoke(social_cli, ["init", "myspace"])
    assert result.exit_code == 2
    assert "'myspace' is not a built-in provider; known: amazon, apple, " in result.stderr
    assert "auth0" in result.stderr
    assert "github" in result.stderr
    assert "zoom" in result.stderr


@pytest.mark.parametrize(
    ("typed", "meant"), [("githb", "github"), ("GitHb", "github"), ("gogle", "google")]
)
def test_init_with_a_misspelt_name_asks_did_you_mean(typed: str, meant: str) -> None:
    result = CliRunner().invoke(social_cli, ["init", typed])
    assert result.exit_code == 2
    assert (
        f"{typed!r} is not a built-in provider; did you mean {meant!r}? Known: amazon, apple,"
        in result.stderr
    )
    assert result.stdout == ""


class AnyVariable(Mapping[str, str]):
    """An environment in which every variable is set, to a host name."""

    def __getitem__(self, key: str) -> str:
        return example_value(key, "tenant.example.com")

    def __contains__(self, key: object) -> bool:
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def parse_block(text: str) -> dict[str, Any]:
    parsed: dict[str, Any] = yaml.load(text, Loader=StringScalarLoader)  # noqa: S506
    return parsed


def test_there_is_a_valid_block_for_every_builtin_provider() -> None:
    blocks = provider_blocks()
    assert sorted(blocks) == sorted(BUILTIN_PROVIDERS)
    for name, text in blocks.items():
        block = parse_block(text)
        assert list(block) == [name]
        filled = {
            key: value.replace("<CLIENT_ID>", "id").replace("<CLIENT_SECRET>", "secret")
            if isinstance(value, str)
            else value
            for key, value in block[name].items()
        }
        try:
            settings = load_settings({"SOCIAL_OAUTH2_PROVIDERS": {name: filled}}, AnyVariable())
        except ConfigurationError as error:  # pragma: no cover - shows the problem
            pytest.fail(f"{name}: {error}")
        assert filled["redirectURL"] == f"/authenticate/{name}"
        assert BUILTIN_PROVIDERS[name].settings_problems(settings[name]) == [], name


def test_the_blocks_match_docs_providers_md() -> None:
    """``flask social init`` and docs/providers.md give the same block for each provider."""
    docs = ROOT / "docs" / "providers.md"
    documented = {}
    for text in re.findall(r"```yaml\n(.*?)```", docs.read_text(encoding="utf-8"), re.S):
        block = parse_block(text)
        documented.update(block)
    for name, text in provider_blocks().items():
        assert name in documented, f"docs/providers.md has no YAML block for {name}"
        assert parse_block(text)[name] == documented[name], (
            f"the block of {name} differs between docs/providers.md and"
            " the provider's facts (flask_social_oauth2/providers/)"
        )
