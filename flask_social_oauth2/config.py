"""Reading provider blocks from ``app.config`` and from a YAML file.

Two sources, ``SOCIAL_OAUTH2_PROVIDERS`` (a mapping) and ``SOCIAL_OAUTH2_PROVIDERS_FILE`` (YAML,
top-level keys are provider names). Every YAML scalar is read as a string, ``${VAR}`` is taken
from the environment, and every problem of every block is reported at once.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import yaml

from .errors import ConfigurationError, ConfigurationProblem
from .settings import OAuth2Settings

_ENV_REFERENCE: Final = re.compile(r"\$\{([^}]*)\}")
_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
#: Provider names become a URL path segment and a cookie value: keep them plain.
_PROVIDER_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")

_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class StringScalarLoader(_BaseLoader):  # type: ignore[misc,valid-type]
    """A safe YAML loader that reads every scalar as a string.

    ``clientID: 0123`` stays ``"0123"`` and ``scope: on`` stays ``"on"``: no implicit numbers,
    booleans, dates or nulls. Uses libyaml when PyYAML was built with it.
    """

    yaml_implicit_resolvers: dict[Any, Any] = {}  # noqa: RUF012 - PyYAML's own class attribute


def _location(path: str | os.PathLike[str], line: int | None = None) -> str:
    return f"{os.fspath(path)}, line {line}" if line is not None else os.fspath(path)


def load_yaml_blocks(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a providers YAML file: a map from provider name to block.

    :raises ConfigurationError: when the file cannot be read or parsed, with file and line.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise ConfigurationError(
            [
                ConfigurationProblem(
                    None, None, f"cannot read providers file: {reason}", _location(path)
                )
            ]
        ) from None
    try:
        data = yaml.load(text, Loader=StringScalarLoader)  # noqa: S506 - a safe loader
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        line = mark.line + 1 if mark is not None else None
        what = error.problem or "invalid YAML"
        raise ConfigurationError(
            [ConfigurationProblem(None, None, f"invalid YAML: {what}", _location(path, line))]
        ) from None
    except yaml.YAMLError as error:
        raise ConfigurationError(
            [ConfigurationProblem(None, None, f"invalid YAML: {error}", _location(path))]
        ) from None
    if data is None or data == "":
        return {}
    if not isinstance(data, dict):
        raise ConfigurationError(
            [
                ConfigurationProblem(
                    None, None, "the top level must map provider names to blocks", _location(path)
                )
            ]
        )
    return data


def _yaml_key_lines(path: str | os.PathLike[str]) -> dict[tuple[str, str | None], int]:
    """Line numbers of each provider block and of each key in it, read only after a failure."""
    lines: dict[tuple[str, str | None], int] = {}
    try:
        root = yaml.compose(Path(path).read_text(encoding="utf-8"), Loader=StringScalarLoader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return lines
    if not isinstance(root, yaml.MappingNode):
        return lines
    for name_node, block_node in root.value:
        name = str(name_node.value)
        lines[(name, None)] = name_node.start_mark.line + 1
        if isinstance(block_node, yaml.MappingNode):
            for key_node, _ in block_node.value:
                lines[(name, str(key_node.value))] = key_node.start_mark.line + 1
    return lines


def expand_environment(
    value: Any,
    provider: str,
    key: str,
    environ: Mapping[str, str],
    problems: list[ConfigurationProblem],
) -> Any:
    """Replace ``${VAR}`` in ``value`` (a string, or the strings of a map) from ``environ``.

    A missing variable adds a problem naming the provider, the key and the variable.
    """
    if isinstance(value, str):
        if "${" not in value:
            return value

        def substitute(match: re.Match[str]) -> str:
            name = match.group(1)
            if not _ENV_NAME.match(name):
                problems.append(
                    ConfigurationProblem(
                        provider, key, f"'${{{name}}}' is not a valid variable name"
                    )
                )
                return ""
            if name not in environ:
                problems.append(
                    ConfigurationProblem(provider, key, f"environment variable {name!r} is not set")
                )
                return ""
            return environ[name]

        return _ENV_REFERENCE.sub(substitute, value)
    if isinstance(value, Mapping):
        return {
            item_key: expand_environment(item, provider, f"{key}.{item_key}", environ, problems)
            for item_key, item in value.items()
        }
    return value


def collect_blocks(config: Mapping[str, Any]) -> dict[str, tuple[Any, str | None]]:
    """Gather the raw blocks of both sources: name -> (block, where it came from).

    :raises ConfigurationError: for a source that is not a map, an unreadable file, or a name
        given by both sources.
    """
    blocks: dict[str, tuple[Any, str | None]] = {}
    mapping = config.get("SOCIAL_OAUTH2_PROVIDERS") or {}
    if not isinstance(mapping, Mapping):
        raise ConfigurationError(
            [
                ConfigurationProblem(
                    None, None, "SOCIAL_OAUTH2_PROVIDERS must map provider names to blocks"
                )
            ]
        )
    for name, block in mapping.items():
        blocks[name] = (block, "SOCIAL_OAUTH2_PROVIDERS")
    path = config.get("SOCIAL_OAUTH2_PROVIDERS_FILE")
    if path:
        problems = []
        for name, block in load_yaml_blocks(path).items():
            if name in blocks:
                problems.append(
                    ConfigurationProblem(
                        name,
                        None,
                        "is configured both in SOCIAL_OAUTH2_PROVIDERS and in the providers file;"
                        " keep one",
                        _location(path),
                    )
                )
            blocks[name] = (block, os.fspath(path))
        if problems:
            raise ConfigurationError(problems)
    return blocks


def load_settings(
    config: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> dict[str, OAuth2Settings]:
    """Read and validate every provider block of the app's configuration.

    :param config: The app's configuration.
    :param environ: Where ``${VAR}`` is looked up; ``os.environ`` by default.
    :return: Provider name -> settings, in configuration order.
    :raises ConfigurationError: listing every problem of every block.
    """
    environ = os.environ if environ is None else environ
    settings: dict[str, OAuth2Settings] = {}
    problems: list[ConfigurationProblem] = []
    yaml_path = config.get("SOCIAL_OAUTH2_PROVIDERS_FILE")
    for name, (block, source) in collect_blocks(config).items():
        location = None if source == "SOCIAL_OAUTH2_PROVIDERS" else source
        block_problems: list[ConfigurationProblem] = []
        if not isinstance(name, str) or not _PROVIDER_NAME.match(name):
            block_problems.append(
                ConfigurationProblem(
                    str(name),
                    None,
                    "provider names must be 1 to 64 letters, digits, '_', '.' or '-',"
                    " starting with a letter or digit",
                )
            )
        elif isinstance(block, Mapping):
            expanded = {
                key: expand_environment(value, name, str(key), environ, block_problems)
                for key, value in block.items()
            }
            if not block_problems:
                try:
                    settings[name] = OAuth2Settings.from_config(expanded, provider=name)
                except ConfigurationError as error:
                    block_problems.extend(error.problems)
        else:
            block_problems.append(
                ConfigurationProblem(
                    name, None, f"must be a map of settings, not a {type(block).__name__}"
                )
            )
        problems.extend(
            dataclasses.replace(problem, location=problem.location or location)
            for problem in block_problems
        )
    if problems:
        if yaml_path:
            problems = _add_yaml_lines(problems, yaml_path)
        raise ConfigurationError(problems)
    return settings


def _add_yaml_lines(
    problems: list[ConfigurationProblem], path: str | os.PathLike[str]
) -> list[ConfigurationProblem]:
    lines = _yaml_key_lines(path)
    located = []
    for problem in problems:
        if problem.location == os.fspath(path) and problem.provider is not None:
            key = problem.key.split(".", 1)[0] if problem.key else None
            line = lines.get((problem.provider, key)) or lines.get((problem.provider, None))
            if line is not None:
                problem = dataclasses.replace(problem, location=_location(path, line))
        located.append(problem)
    return located
