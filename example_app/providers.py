"""The example's providers: which blocks of ``providers.yaml`` are on, and how its pages name
them.

A block whose ``${VAR}`` references are not all set is turned off rather than refused, and the
sign-in page lists it with the variables to set.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from flask import current_app

from flask_social_oauth2 import SocialOAuth2
from flask_social_oauth2.config.blocks import expand_environment
from flask_social_oauth2.errors import ConfigurationError, ConfigurationProblem

__all__ = ["ProviderChoice", "label", "select_blocks", "social"]

_VARIABLE: Final = re.compile(r"\$\{([^}]*)\}")
_LABELS: Final[Mapping[str, tuple[str, str]]] = {
    "local": ("Local identity provider", "Runs on this machine; no account needed"),
    "local-two": ("Second local identity provider", "Another account, to link to this user"),
    "local-spa": (
        "Local identity provider, from the browser",
        "A single-page app's flow: PKCE made with WebCrypto, the code POSTed as JSON",
    ),
    "apple": ("Apple", "Your Apple Account (or the local Apple-like server)"),
    "bluesky": ("Bluesky", "Your Bluesky handle, or that of any AT Protocol account"),
    "github": ("GitHub", "Your GitHub account"),
    "google": ("Google", "Your Google account"),
}


@dataclass(frozen=True)
class ProviderChoice:
    """A provider as the sign-in page shows it.

    :param name: The block's name.
    :param label: The name people know it by.
    :param note: A line under the label.
    :param missing: The ``${VAR}`` names to set to turn it on; empty when it is on.
    :param client_side: Whether its button opens the client-side page (the block has no
        authorizationURL).
    """

    name: str
    label: str
    note: str
    missing: tuple[str, ...] = ()
    client_side: bool = False

    @property
    def initial(self) -> str:
        """The letter on the provider's badge."""
        return self.label[:1].upper()


def label(name: str) -> tuple[str, str]:
    """The name people know the provider ``name`` by, and a line to show under it."""
    return _LABELS.get(name, (name.replace("-", " ").title(), f"Sign in with {name}"))


def social() -> SocialOAuth2:
    """The current app's extension."""
    extension: SocialOAuth2 = current_app.extensions["social_oauth2"].extension
    return extension


def _variables(value: Any) -> set[str]:
    if isinstance(value, str):
        return set(_VARIABLE.findall(value))
    if isinstance(value, Mapping):
        return set().union(*(_variables(item) for item in value.values()))
    return set()


def select_blocks(
    blocks: Mapping[str, Any], environ: Mapping[str, str]
) -> tuple[dict[str, Any], dict[str, tuple[str, ...]]]:
    """Split provider blocks into those whose ``${VAR}`` references are all set in
    ``environ`` (returned with the references filled in) and the others.

    The extension's loader treats a missing variable as a configuration error, which is right
    for a real app; the example instead turns such a provider off and tells why.

    :return: ``(enabled blocks, {name: missing variable names})``.
    :raises ConfigurationError: for a reference that is not a valid variable name.
    """
    enabled: dict[str, Any] = {}
    missing: dict[str, tuple[str, ...]] = {}
    problems: list[ConfigurationProblem] = []
    for name, block in blocks.items():
        absent = tuple(sorted(v for v in _variables(block) if v not in environ))
        if absent:
            missing[name] = absent
        elif isinstance(block, Mapping):
            enabled[name] = {
                key: expand_environment(value, name, str(key), environ, problems)
                for key, value in block.items()
            }
        else:
            enabled[name] = block  # the extension reports what is wrong with it
    if problems:
        raise ConfigurationError(problems)
    return enabled, missing
