"""Provider blocks from a YAML file: every scalar a string, no anchors or aliases, a key given
twice refused, and file and line in every error. Imported only when an app names a file."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigurationError, ConfigurationProblem

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


def location(path: str | os.PathLike[str], line: int | None = None) -> str:
    return f"{os.fspath(path)}, line {line}" if line is not None else os.fspath(path)


def _file_problem(
    path: str | os.PathLike[str], message: str, line: int | None = None
) -> ConfigurationError:
    return ConfigurationError([ConfigurationProblem(None, None, message, location(path, line))])


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
        raise _file_problem(path, f"invalid YAML: {_yaml_problem(error, text)}", line) from None
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


def _yaml_problem(error: yaml.MarkedYAMLError, text: str) -> str:
    """What the parser found wrong, in words that name the fix for a tab where YAML wants
    spaces (the parser says "found character that cannot start any token")."""
    problem = error.problem or "invalid YAML"
    mark = error.problem_mark
    if mark is None:
        return problem
    lines = text.splitlines()
    row = lines[mark.line] if mark.line < len(lines) else ""
    column = mark.column if row[mark.column : mark.column + 1] == "\t" else row.find("\t")
    if column < 0 or ("tab" not in problem and "cannot start any token" not in problem):
        return problem
    return (
        f"found a tab character (column {column + 1}); YAML indents with spaces, never tabs:"
        " replace the tab with spaces"
    )


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
        where_again = location(path, _line(again))
        name = str(again.value)
        if mapping is root:
            problems.append(ConfigurationProblem(name, None, message, where_again))
        else:
            key = _join(prefix, name)
            problems.append(ConfigurationProblem(provider, key, message, where_again))
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


def add_yaml_lines(
    problems: list[ConfigurationProblem], path: str | os.PathLike[str]
) -> list[ConfigurationProblem]:
    lines = _yaml_key_lines(path)
    located = []
    for problem in problems:
        if problem.location == os.fspath(path) and problem.provider is not None:
            key = problem.key.split(".", 1)[0] if problem.key else None
            line = lines.get((problem.provider, key)) or lines.get((problem.provider, None))
            if line is not None:
                problem = dataclasses.replace(problem, location=location(path, line))
        located.append(problem)
    return located
