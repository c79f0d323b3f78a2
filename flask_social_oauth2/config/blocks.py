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
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from ..errors import ConfigurationError, ConfigurationProblem
from .settings import OAuth2Settings

_ENV_REFERENCE: Final = re.compile(r"\$\{([^}]*)\}")
_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
#: Provider names become a URL path segment and a cookie value: keep them plain.
_PROVIDER_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")


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
        from .yaml_file import load_yaml_blocks, location  # PyYAML only for a file

        for name, block in load_yaml_blocks(path).items():
            if name in blocks:
                problems.append(
                    ConfigurationProblem(
                        name,
                        None,
                        "is configured both in SOCIAL_OAUTH2_PROVIDERS and in the providers file;"
                        " keep one",
                        location(path),
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
            from .yaml_file import add_yaml_lines

            problems = add_yaml_lines(problems, yaml_path)
        raise ConfigurationError(problems)
    return settings


def load_yaml_blocks(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The provider blocks of a YAML file, see
    :func:`flask_social_oauth2.config.yaml_file.load_yaml_blocks` (PyYAML is imported only
    when a file is read)."""
    from .yaml_file import load_yaml_blocks as load

    return load(path)


def __getattr__(name: str) -> Any:
    if name == "StringScalarLoader":  # PyYAML's loader class, made when first asked for
        from .yaml_file import StringScalarLoader

        return StringScalarLoader
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
