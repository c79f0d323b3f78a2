"""The extension's per-app state, kept in ``app.extensions["social_oauth2"]``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from flask import Flask, current_app
from itsdangerous import URLSafeTimedSerializer

from .errors import ConfigurationProblem, SocialOAuth2Error
from .state_cookie import make_serializer

if TYPE_CHECKING:
    from .extension import SocialOAuth2
    from .provider import SocialProvider

EXTENSION_KEY: Final = "social_oauth2"


@dataclass(slots=True)
class AppState:
    """What the extension keeps for one app. Written in ``init_app``, then only by caches of
    app-wide values (the redirect URL check's result, the signer for the current
    ``SECRET_KEY``) and by :func:`flask_social_oauth2.testing.use_local_idp`; nothing about a
    request is ever kept here."""

    extension: SocialOAuth2
    providers: Mapping[str, SocialProvider]
    endpoint: str
    timeout: float
    state_ttl: int
    max_response_bytes: int
    cookie_name: str
    cookie_path: str
    session_key: str
    redirect_problems: tuple[ConfigurationProblem, ...] | None = None
    _serializer: tuple[Any, URLSafeTimedSerializer] | None = None

    def serializer(self, app: Flask) -> URLSafeTimedSerializer:
        """The state cookie's signer for the app's current ``SECRET_KEY`` (and fallbacks)."""
        secret_key = app.secret_key
        if not secret_key:
            raise SocialOAuth2Error(
                "flask-social-oauth2 needs the app's SECRET_KEY to sign the sign-in state cookie"
            )
        fallbacks = tuple(app.config.get("SECRET_KEY_FALLBACKS") or ())
        key = (secret_key, fallbacks)
        cached = self._serializer
        if cached is None or cached[0] != key:
            cached = (key, make_serializer(secret_key, fallbacks))
            self._serializer = cached
        return cached[1]


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
