"""The extension's per-app state, kept in ``app.extensions["social_oauth2"]``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from flask import Flask, current_app

from .errors import ConfigurationProblem, SocialOAuth2Error
from .runtime import EXTENSION_KEY, Runtime

if TYPE_CHECKING:
    from .providers.oauth2 import SocialProvider

__all__ = ["EXTENSION_KEY", "AppState", "get_app_state"]


@dataclass(slots=True)
class AppState:
    """What the extension keeps for one app. Written in ``init_app``, then only by caches of
    app-wide values (the redirect URL check's result) and by
    :func:`flask_social_oauth2.testing.use_local_idp`; nothing about a request is ever kept
    here."""

    #: The :class:`~flask_social_oauth2.SocialOAuth2` object that set the app up (typed
    #: loosely: this module sits below the extension and does not import it).
    extension: object
    providers: Mapping[str, SocialProvider]
    endpoint: str
    session_key: str
    #: What the flow code reads with :func:`flask_social_oauth2.runtime.current_runtime`.
    runtime: Runtime
    redirect_problems: tuple[ConfigurationProblem, ...] | None = None


def get_app_state(app: Flask | None = None) -> AppState:
    """The extension's state for ``app`` (default: the current app).

    :raises SocialOAuth2Error: when ``init_app`` was not called for the app.
    """
    app = app if app is not None else current_app._get_current_object()  # type: ignore[attr-defined]
    state = app.extensions.get(EXTENSION_KEY)
    if state is None:
        raise SocialOAuth2Error(
            f"flask-social-oauth2 is not set up on app {app.name!r}: call"
            " SocialOAuth2(app) or social.init_app(app) first"
        )
    assert isinstance(state, AppState)
    return state
