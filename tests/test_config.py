"""Reading provider blocks from app.config and YAML files."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import pytest
import yaml
from flask import Flask
from helpers import MakeApp, valid_block
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flask_social_oauth2 import OAuth2Settings, SocialOAuth2
from flask_social_oauth2.config.blocks import load_settings, load_yaml_blocks, providers_file
from flask_social_oauth2.config.settings import CONFIG_KEYS
from flask_social_oauth2.config.yaml_file import _yaml_problem
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


TAB_FIX = "YAML indents with spaces, never tabs: replace the tab with spaces"


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ("github:\n\tclientID: abc\n", 2, 1),  # a block indented with a tab
        ("github:\n  clientID: abc\n\tscope: user\n", 3, 1),
        ("github:\n  clientID: abc\n  \tscope: user\n", 3, 3),  # spaces, then a tab
        ("github:\n  scope:\n\t- user\n", 3, 1),
    ],
)
def test_a_tab_in_the_indentation_is_named_with_its_line_column_and_fix(
    tmp_path: Path, text: str, line: int, column: int
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigurationError) as error:
        load_yaml_blocks(path)
    (message,) = messages(error)
    assert message == (
        f"invalid YAML: found a tab character (column {column}); {TAB_FIX} ({path}, line {line})"
    )
    # PyYAML without libyaml words it otherwise ("found character '\\t' ..."): the same fix
    with pytest.raises(yaml.MarkedYAMLError) as pure:
        yaml.SafeLoader(text).get_single_node()
    assert _yaml_problem(pure.value, text).endswith(f"(column {column}); {TAB_FIX}")


def test_a_tab_inside_a_value_is_kept_and_other_errors_keep_their_words(tmp_path: Path) -> None:
    assert load_yaml_blocks(write(tmp_path, "github: 'a\tb'\n")) == {"github": "a\tb"}
    path = write(tmp_path, "github: a\n  scope: b\n")
    with pytest.raises(ConfigurationError) as error:
        load_yaml_blocks(path)
    (message,) = messages(error)
    assert message == (
        f"invalid YAML: mapping values are not allowed in this context ({path}, line 2)"
    )


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


# -- anchors and aliases (alias bombs) -----------------------------------------------------------


def alias_bomb() -> str:
    """Nine maps of nine references each: about 400 million strings once expanded."""
    lines = ["a: &a {" + ", ".join(f'k{i}: "${{X}}"' for i in range(9)) + "}"]
    for level in range(1, 9):
        previous, name = chr(ord("a") + level - 1), chr(ord("a") + level)
        lines.append(
            f"{name}: &{name} {{" + ", ".join(f"k{i}: *{previous}" for i in range(9)) + "}"
        )
    lines.append("bomb: {customProperties: *i}")
    return "\n".join(lines) + "\n"


BOMB_RUNNER = """\
import resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
from flask_social_oauth2.config.blocks import load_settings
from flask_social_oauth2.errors import ConfigurationError
from flask_social_oauth2.config.yaml_file import _yaml_problem
started = time.perf_counter()
try:
    load_settings({"SOCIAL_OAUTH2_PROVIDERS_FILE": sys.argv[1]}, {"X": "x" * 64})
except ConfigurationError as error:
    print(f"{time.perf_counter() - started:.3f}")
    print(error)
"""


def test_an_alias_bomb_is_refused_within_a_second_under_1_gib(tmp_path: Path) -> None:
    bomb = alias_bomb()
    assert len(bomb.encode()) < 1024
    path = write(tmp_path, bomb)
    result = subprocess.run(
        [sys.executable, "-c", BOMB_RUNNER, str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    seconds, message = result.stdout.splitlines()
    assert float(seconds) < 1
    assert message == (
        "YAML anchors and aliases are not allowed in a providers file; found the anchor '&a'"
        f" ({path}, line 1)"
    )


@pytest.mark.parametrize(
    ("text", "found", "line"),
    [
        ("x: &base {clientID: a}\n", "the anchor '&base'", 1),
        ("github:\n  clientID: abc\n  clientSecret: *secret\n", "the alias '*secret'", 3),
    ],
)
def test_anchors_and_aliases_are_refused_with_file_and_line(
    tmp_path: Path, text: str, found: str, line: int
) -> None:
    with pytest.raises(ConfigurationError) as error:
        load_yaml(tmp_path, text)
    assert messages(error) == [
        f"YAML anchors and aliases are not allowed in a providers file; found {found}"
        f" ({tmp_path / 'providers.yaml'}, line {line})"
    ]


def test_ampersands_and_stars_in_values_are_not_anchors(tmp_path: Path) -> None:
    text = BLOCK_YAML.format(client_id="'a&b*c'", scope='"x*"').replace(
        "/authorize", "/authorize?a=1&b=*"
    )
    settings = load_yaml(tmp_path, text)
    assert settings["github"].client_id == "a&b*c"
    assert settings["github"].authorization_url.endswith("?a=1&b=*")


def test_a_deep_map_in_the_python_configuration_is_not_walked() -> None:
    deep: dict[str, Any] = {"value": "${MISSING}"}
    for _ in range(5000):
        deep = {"inner": deep}
    with pytest.raises(ConfigurationError) as error:
        load_settings({"SOCIAL_OAUTH2_PROVIDERS": {"x": valid_block(customProperties=deep)}}, {})
    assert "MISSING" not in str(error.value)
    assert "key 'customProperties'" in str(error.value)


# -- a key or a provider given twice -------------------------------------------------------------

TWICE_YAML = """\
github:
  clientID: abc
  clientSecret: "${GITHUB_SECRET}"
  clientSecret: "${OTHER_SECRET}"
  customProperties:
    team: a
    team: b
gitlab:
  clientID: abc
github:
  clientID: def
"""


def test_a_provider_or_a_key_given_twice_names_both_lines(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError) as error:
        load_yaml(tmp_path, TWICE_YAML, {"GITHUB_SECRET": "one", "OTHER_SECRET": "two"})
    path = tmp_path / "providers.yaml"
    assert messages(error) == [
        f"provider 'github', key 'clientSecret': is given twice, at lines 3 and 4 ({path}, line 4)",
        f"provider 'github', key 'customProperties.team': is given twice, at lines 6 and 7"
        f" ({path}, line 7)",
        f"provider 'github': is given twice, at lines 1 and 10 ({path}, line 10)",
    ]
    assert "one" not in str(error.value).split()
    assert "two" not in str(error.value).split()


def test_a_key_given_twice_is_found_before_the_environment_is_read(tmp_path: Path) -> None:
    """The check is on the file as written: a missing variable does not hide it, and an
    expanded value that looks like YAML never adds a key."""
    with pytest.raises(ConfigurationError, match=r"at lines 3 and 4"):
        load_yaml(tmp_path, TWICE_YAML, {})
    text = BLOCK_YAML.format(client_id="abc", scope="user")
    settings = load_yaml(tmp_path, text, {"GITHUB_SECRET": "s\nclientID: injected"})
    assert settings["github"].client_id == "abc"
    assert settings["github"].client_secret == "s\nclientID: injected"


# -- a relative providers file -------------------------------------------------------------------


def test_a_relative_providers_file_is_resolved_against_the_app_root_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "app"
    (root / "config").mkdir(parents=True)
    (root / "config" / "providers.yaml").write_text(
        BLOCK_YAML.format(client_id="abc", scope="user"), encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GITHUB_SECRET", "x")
    app = Flask("relative", root_path=str(root))
    app.config.update(SECRET_KEY="k", SOCIAL_OAUTH2_PROVIDERS_FILE="config/providers.yaml")
    SocialOAuth2(app)
    assert list(app.extensions["social_oauth2"].providers) == ["github"]
    assert providers_file(app.config) == root / "config" / "providers.yaml"


def test_a_missing_relative_providers_file_names_the_resolved_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    app = Flask("relative", root_path=str(tmp_path / "app"))
    app.config.update(SECRET_KEY="k", SOCIAL_OAUTH2_PROVIDERS_FILE="../app/./providers.yaml")
    with pytest.raises(ConfigurationError) as error:
        SocialOAuth2(app)
    resolved = tmp_path / "app" / "providers.yaml"
    assert str(error.value) == (
        f"cannot read providers file: No such file or directory ({resolved})"
    )


@pytest.mark.parametrize("value", [42, ["providers.yaml"]])
def test_a_providers_file_that_is_not_a_path_is_a_configuration_error(value: Any) -> None:
    with pytest.raises(ConfigurationError) as error:
        load_settings({"SOCIAL_OAUTH2_PROVIDERS_FILE": value}, {})
    assert str(error.value).startswith("key 'SOCIAL_OAUTH2_PROVIDERS_FILE': must be a path")


# -- any configuration, property-based: settings or a ConfigurationError -----------------------

FAST: Final = settings(
    max_examples=250,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


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
