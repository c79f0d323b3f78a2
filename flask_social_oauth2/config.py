"""Reading provider blocks from ``app.config`` and from a YAML file.

Two sources, ``SOCIAL_OAUTH2_PROVIDERS`` (a mapping) and ``SOCIAL_OAUTH2_PROVIDERS_FILE`` (YAML,
top-level keys are provider names; a relative path is resolved against the app's
``root_path``). Every YAML scalar is read as a string, ``${VAR}`` is taken from the
environment, and every problem of every block is reported at once.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Hashable, Mapping
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

#: A key given twice: the mapping node, the first key node and the repeated one.
_Duplicate = tuple[yaml.MappingNode, yaml.Node, yaml.Node]


class StringScalarLoader(_BaseLoader):  # type: ignore[misc,valid-type]
    """A safe YAML loader that reads every scalar as a string.

    ``clientID: 0123`` stays ``"0123"`` and ``scope: on`` stays ``"on"``: no implicit numbers,
    booleans, dates or nulls. Uses libyaml when PyYAML was built with it. Every key given twice
    in one mapping is recorded in :attr:`duplicate_keys` (PyYAML itself keeps the last).
    """

    yaml_implicit_resolvers: dict[Any, Any] = {}  # noqa: RUF012 - PyYAML's own class attribute

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.duplicate_keys: list[_Duplicate] = []

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Hashable, yaml.Node] = {}
            for key_node, _ in node.value:
                if isinstance(key_node, yaml.ScalarNode):
                    first = seen.setdefault(key_node.value, key_node)
                    if first is not key_node:
                        self.duplicate_keys.append((node, first, key_node))
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping


def _location(path: str | os.PathLike[str], line: int | None = None) -> str:
    return f"{os.fspath(path)}, line {line}" if line is not None else os.fspath(path)


def _file_problem(
    path: str | os.PathLike[str], message: str, line: int | None = None
) -> ConfigurationError:
    return ConfigurationError([ConfigurationProblem(None, None, message, _location(path, line))])


def providers_file(
    config: Mapping[str, Any], root_path: str | os.PathLike[str] | None = None
) -> Path | None:
    """The providers file ``SOCIAL_OAUTH2_PROVIDERS_FILE`` names, as an absolute path.

    A relative path is resolved against ``root_path``, as Flask resolves its own files (e.g.
    ``app.config.from_file``); by default against the ``root_path`` of a Flask ``Config``
    (the app's), else the current directory.

    :return: ``None`` when the setting is empty.
    :raises ConfigurationError: when the setting is not a path.
    """
    value = config.get("SOCIAL_OAUTH2_PROVIDERS_FILE")
    if not value:
        return None
    if not isinstance(value, str | os.PathLike):
        raise ConfigurationError(
            [
                ConfigurationProblem(
                    None,
                    "SOCIAL_OAUTH2_PROVIDERS_FILE",
                    f"must be a path, not a {type(value).__name__}",
                )
            ]
        )
    if root_path is None:
        root_path = getattr(config, "root_path", None)
    path = Path(os.fspath(value))
    if root_path is not None:
        path = Path(os.fspath(root_path)) / path
    return Path(os.path.abspath(path))


def load_yaml_blocks(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a providers YAML file: a map from provider name to block.

    :raises ConfigurationError: when the file cannot be read or parsed, uses YAML anchors or
        aliases, or gives a provider or a key twice; with file and line.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise _file_problem(path, f"cannot read providers file: {reason}") from None
    loader = StringScalarLoader(text)
    try:
        _refuse_anchors_and_aliases(text, path)
        root = loader.get_single_node()
        data = loader.construct_document(root) if root is not None else None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        line = mark.line + 1 if mark is not None else None
        raise _file_problem(
            path, f"invalid YAML: {error.problem or 'invalid YAML'}", line
        ) from None
    except yaml.YAMLError as error:
        raise _file_problem(path, f"invalid YAML: {error}") from None
    finally:
        loader.dispose()
    if data is None or data == "":
        return {}
    if not isinstance(data, dict):
        raise _file_problem(path, "the top level must map provider names to blocks")
    if loader.duplicate_keys:
        raise ConfigurationError(_duplicate_problems(root, loader.duplicate_keys, path))
    return data


def _refuse_anchors_and_aliases(text: str, path: str | os.PathLike[str]) -> None:
    """Provider files never need anchors or aliases, and nested aliases make a file of a few
    hundred bytes expand to gigabytes (a "billion laughs"): refuse them before composing."""
    if "&" not in text and "*" not in text:
        return
    for event in yaml.parse(text, Loader=StringScalarLoader):
        if isinstance(event, yaml.AliasEvent):
            what = f"the alias '*{event.anchor}'"
        elif isinstance(event, yaml.NodeEvent) and event.anchor is not None:
            what = f"the anchor '&{event.anchor}'"
        else:
            continue
        raise _file_problem(
            path,
            f"YAML anchors and aliases are not allowed in a providers file; found {what}",
            _line(event),
        )


def _line(item: yaml.Node | yaml.Event) -> int | None:
    mark = item.start_mark
    return mark.line + 1 if mark is not None else None


def _duplicate_problems(
    root: yaml.Node, duplicates: list[_Duplicate], path: str | os.PathLike[str]
) -> list[ConfigurationProblem]:
    # Where each mapping is: (provider, key path) of a block or a map in it; the root is (None,
    # None). Walked only when a key was given twice, and a tree once aliases are refused.
    where: dict[int, tuple[str | None, str | None]] = {id(root): (None, None)}
    pending: list[tuple[yaml.Node, str | None, str | None]] = [(root, None, None)]
    while pending:
        node, provider, prefix = pending.pop()
        for key_node, value_node in node.value if isinstance(node, yaml.MappingNode) else ():
            if isinstance(value_node, yaml.MappingNode):
                key = str(key_node.value)
                child = (key, None) if provider is None else (provider, _join(prefix, key))
                where[id(value_node)] = child
                pending.append((value_node, *child))
    problems = []
    for mapping, first, again in sorted(duplicates, key=lambda found: _line(found[2]) or 0):
        provider, prefix = where.get(id(mapping), (None, None))
        message = f"is given twice, at lines {_line(first)} and {_line(again)}"
        location = _location(path, _line(again))
        name = str(again.value)
        if mapping is root:
            problems.append(ConfigurationProblem(name, None, message, location))
        else:
            problems.append(ConfigurationProblem(provider, _join(prefix, name), message, location))
    return problems


def _join(prefix: str | None, key: str) -> str:
    return key if prefix is None else f"{prefix}.{key}"


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
        # One level only: settings hold strings and maps of strings, and a walk into deeper
        # values would only repeat work that the type check then refuses anyway.
        return {
            item_key: expand_environment(item, provider, f"{key}.{item_key}", environ, problems)
            if isinstance(item, str)
            else item
            for item_key, item in value.items()
        }
    return value


def collect_blocks(
    config: Mapping[str, Any], root_path: str | os.PathLike[str] | None = None
) -> dict[str, tuple[Any, str | None]]:
    """Gather the raw blocks of both sources: name -> (block, where it came from).

    :param root_path: What a relative providers file is resolved against; see
        :func:`providers_file`.
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
    path = providers_file(config, root_path)
    if path is not None:
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
    config: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    *,
    root_path: str | os.PathLike[str] | None = None,
) -> dict[str, OAuth2Settings]:
    """Read and validate every provider block of the app's configuration.

    :param config: The app's configuration.
    :param environ: Where ``${VAR}`` is looked up; ``os.environ`` by default.
    :param root_path: What a relative providers file is resolved against; by default the
        ``root_path`` of a Flask ``Config``, as for :func:`providers_file`.
    :return: Provider name -> settings, in configuration order.
    :raises ConfigurationError: listing every problem of every block.
    """
    environ = os.environ if environ is None else environ
    settings: dict[str, OAuth2Settings] = {}
    problems: list[ConfigurationProblem] = []
    yaml_path = providers_file(config, root_path)
    for name, (block, source) in collect_blocks(config, root_path).items():
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
