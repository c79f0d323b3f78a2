"""``SOCIAL_OAUTH2_TOKEN_STORE``: which token store an app uses."""

from __future__ import annotations

from typing import Any, Final

from ..errors import ConfigurationError, ConfigurationProblem
from .session import SessionTokenStore
from .store import TokenStore

STORE_SETTING: Final = "SOCIAL_OAUTH2_TOKEN_STORE"


def token_store_from_setting(value: Any) -> TokenStore | None:
    """The store that ``SOCIAL_OAUTH2_TOKEN_STORE`` names: ``"session"`` (a
    :class:`SessionTokenStore`), ``"none"`` (``None``: nothing kept), a SQLAlchemy URL (a
    :class:`~flask_social_oauth2.tokens.SQLAlchemyTokenStore`), or a :class:`TokenStore` object.

    :raises ConfigurationError: for any other value, or a URL without the ``[sql]`` extra.
    """
    if isinstance(value, str):
        if value == "session":
            return SessionTokenStore()
        if value == "none":
            return None
        if "://" in value:
            try:
                from .sql import SQLAlchemyTokenStore
            except ImportError:
                raise ConfigurationError(
                    [_problem("a SQL store needs SQLAlchemy: pip install flask-social-oauth2[sql]")]
                ) from None
            return SQLAlchemyTokenStore(value)
        raise ConfigurationError(
            [_problem("must be 'session', 'none', a SQLAlchemy URL or a TokenStore object")]
        )
    if isinstance(value, TokenStore):
        return value
    raise ConfigurationError(
        [_problem("must be 'session', 'none', a SQLAlchemy URL or a TokenStore object")]
    )


def _problem(message: str) -> ConfigurationProblem:
    return ConfigurationProblem(None, STORE_SETTING, message)
