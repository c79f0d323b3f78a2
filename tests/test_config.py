"""Reading provider blocks from app.config and YAML files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import valid_block

from flask_social_oauth2.config import load_settings, load_yaml_blocks
from flask_social_oauth2.errors import ConfigurationError

BLOCK_YAML = """\
github:
  authorizationURL: https://github.com/login/oauth/authorize
  accessTokenURL: https://github.com/login/oauth/access_token
  redirectURL: /authenticate/github
  clientID: {client_id}
  clientSecret: "${{GITHUB_SECRET}}"
  scope: {scope}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "providers.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def load_yaml(tmp_path: Path, text: str, environ: dict[str, str] | None = None) -> Any:
    path = write(tmp_path, text)
    return load_settings(
        {"SOCIAL_OAUTH2_PROVIDERS_FILE": path},
        environ if environ is not None else {"GITHUB_SECRET": "x"},
    )


def messages(error: pytest.ExceptionInfo[ConfigurationError]) -> list[str]:
    return [str(problem) for problem in error.value.problems]


@pytest.mark.parametrize(
    ("written", "read"),
    [
        ("0123456789", "0123456789"),
        ("0x1F", "0x1F"),
        ("1e3", "1e3"),
        ("12345", "12345"),
        ("on", "on"),
        ("yes", "yes"),
        ("true", "true"),
        ("null", "null"),
        ("~", "~"),
        ("2024-01-01", "2024-01-01"),
        ("'0123'", "0123"),
    ],
)
def test_every_yaml_scalar_is_a_string(tmp_path: Path, written: str, read: str) -> None:
    settings = load_yaml(tmp_path, BLOCK_YAML.format(client_id=written, scope="user"))
    assert settings["github"].client_id == read


@pytest.mark.parametrize(
    ("written", "read"),
    [
        ("on", "on"),
        ("user", "user"),
        ('"read:user user:email"', "read:user user:email"),
        ("'openid profile email'", "openid profile email"),
        ("openid profile", "openid profile"),
    ],
)
def test_bare_and_quoted_scopes(tmp_path: Path, written: str, read: str) -> None:
    settings = load_yaml(tmp_path, BLOCK_YAML.format(client_id="abc", scope=written))
    assert settings["github"].scope == read


def test_environment_variables_are_expanded(tmp_path: Path) -> None:
    settings = load_yaml(
        tmp_path, BLOCK_YAML.format(client_id="abc", scope="user"), {"GITHUB_SECRET": "from-env"}
    )
    assert settings["github"].client_secret == "from-env"


def test_environment_variables_inside_strings_and_maps() -> None:
    block = valid_block(
        redirectURL="https://${APP_HOST}/authenticate/example",
        customProperties={"team": "${TEAM}"},
    )
    settings = load_settings(
        {"SOCIAL_OAUTH2_PROVIDERS": {"example": block}},
        {"APP_HOST": "app.example", "TEAM": "core"},
    )
    assert settings["example"].redirect_url == "https://app.example/authenticate/example"
    assert settings["example"].custom_properties["team"] == "core"


def test_missing_environment_variable_names_provider_key_and_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError) as error:
        load_yaml(tmp_path, BLOCK_YAML.format(client_id="abc", scope="user"), {})
    (message,) = messages(error)
    assert message.startswith(
        "provider 'github', key 'clientSecret': environment variable 'GITHUB_SECRET' is not set"
    )
    assert "line 6" in message


def test_missing_variable_in_a_map_names_the_entry() -> None:
    block = valid_block(customProperties={"team": "${TEAM}"})
    with pytest.raises(ConfigurationError) as error:
        load_settings({"SOCIAL_OAUTH2_PROVIDERS": {"example": block}}, {})
    assert messages(error) == [
        "provider 'example', key 'customProperties.team': environment variable 'TEAM' is not set"
    ]


def test_environment_values_never_appear_in_errors() -> None:
    block = valid_block(clientSecret="${SECRET}", redirectURL="${BAD_URL}")
    with pytest.raises(ConfigurationError) as error:
        load_settings(
            {"SOCIAL_OAUTH2_PROVIDERS": {"example": block}},
            {"SECRET": "very-secret-value", "BAD_URL": "nowhere"},
        )
    assert "very-secret-value" not in str(error.value)
    assert "key 'redirectURL'" in str(error.value)


def test_mapping_and_file_together(tmp_path: Path) -> None:
    path = write(tmp_path, BLOCK_YAML.format(client_id="abc", scope="user"))
    settings = load_settings(
        {
            "SOCIAL_OAUTH2_PROVIDERS": {"example": valid_block()},
            "SOCIAL_OAUTH2_PROVIDERS_FILE": str(path),
        },
        {"GITHUB_SECRET": "x"},
    )
    assert list(settings) == ["example", "github"]


def test_same_name_in_both_sources_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, BLOCK_YAML.format(client_id="abc", scope="user"))
    with pytest.raises(ConfigurationError) as error:
        load_settings(
            {
                "SOCIAL_OAUTH2_PROVIDERS": {"github": valid_block()},
                "SOCIAL_OAUTH2_PROVIDERS_FILE": path,
            },
            {"GITHUB_SECRET": "x"},
        )
    (message,) = messages(error)
    assert "provider 'github': is configured both in SOCIAL_OAUTH2_PROVIDERS" in message
    assert str(path) in message


def test_yaml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "github:\n  clientID: abc\n  scope: [unclosed\n")
    with pytest.raises(ConfigurationError) as error:
        load_yaml_blocks(path)
    (message,) = messages(error)
    assert message.startswith("invalid YAML")
    assert f"{path}, line " in message


def test_block_problems_name_the_line_of_the_key(tmp_path: Path) -> None:
    text = BLOCK_YAML.format(client_id="abc", scope="user").replace("clientID", "clientId")
    with pytest.raises(ConfigurationError) as error:
        load_yaml(tmp_path, text)
    found = messages(error)
    assert any(
        "key 'clientId': is not a known key; did you mean 'clientID'?" in m and "line 5" in m
        for m in found
    ), found
    assert any("key 'clientID': is required" in m and "line 1" in m for m in found), found


def test_every_problem_of_every_block_is_listed() -> None:
    providers = {
        "one": valid_block(clientID=None),
        "two": valid_block(accessTokenURL="http://evil.example/token"),
        "three": "not a block",
    }
    with pytest.raises(ConfigurationError) as error:
        load_settings({"SOCIAL_OAUTH2_PROVIDERS": providers}, {})
    found = messages(error)
    assert len(found) == 3
    assert str(error.value).startswith("3 problems in the OAuth2 configuration:")


@pytest.mark.parametrize("name", ["", "has space", "a/b", "-leading", "x" * 65, "ümlaut"])
def test_provider_names_must_be_plain(name: str) -> None:
    with pytest.raises(ConfigurationError, match="provider names must be"):
        load_settings({"SOCIAL_OAUTH2_PROVIDERS": {name: valid_block()}}, {})


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot read providers file"):
        load_settings({"SOCIAL_OAUTH2_PROVIDERS_FILE": tmp_path / "missing.yaml"}, {})


@pytest.mark.parametrize("text", ["- a\n- b\n", "just text\n"])
def test_file_top_level_must_be_a_map(tmp_path: Path, text: str) -> None:
    with pytest.raises(ConfigurationError, match="top level must map provider names"):
        load_yaml(tmp_path, text)


def test_empty_file_has_no_providers(tmp_path: Path) -> None:
    assert load_yaml(tmp_path, "# nothing yet\n") == {}


def test_yaml_unsafe_tags_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="invalid YAML"):
        load_yaml(tmp_path, "github: !!python/object/apply:os.system ['true']\n")


def test_providers_setting_must_be_a_map() -> None:
    with pytest.raises(ConfigurationError, match="SOCIAL_OAUTH2_PROVIDERS must map"):
        load_settings({"SOCIAL_OAUTH2_PROVIDERS": ["github"]}, {})


def test_a_thousand_providers_load(tmp_path: Path) -> None:
    text = "".join(
        BLOCK_YAML.format(client_id=f"id{i}", scope="user").replace("github:", f"p{i}:")
        for i in range(1000)
    )
    settings = load_yaml(tmp_path, text)
    assert len(settings) == 1000
    assert settings["p999"].client_id == "id999"
