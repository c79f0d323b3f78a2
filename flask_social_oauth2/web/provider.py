"""The interface of a configured sign-in provider, as the specification names it.

:class:`flask_social_oauth2.OAuth2Provider` implements it for the OAuth 2.0 authorization code
flow; a provider that is not OAuth 2.0 at all would implement it from scratch.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Self

from flask import Response

from ..config.settings import OAuth2Info, OAuth2Settings, SocialProfile
from ..errors import ConfigurationError, ConfigurationProblem


class SocialProvider(ABC):
    """A configured social sign-in provider.

    A provider is immutable: :meth:`with_settings` derives a new one, and nothing about a
    request is ever stored on it, so one instance serves all threads.

    :param name: The name of the provider's configuration block.
    :param settings: Its settings record.
    """

    __slots__ = ("_name", "_settings")

    def __init__(self, name: str, settings: OAuth2Settings) -> None:
        self._name = name
        self._settings = settings

    @property
    def name(self) -> str:
        """The name of the provider's configuration block, e.g. ``"github"``."""
        return self._name

    @property
    def settings(self) -> OAuth2Settings:
        """The provider's settings record."""
        return self._settings

    def with_settings(self, change: Callable[[OAuth2Settings], OAuth2Settings]) -> Self:
        """A provider of the same class using the settings ``change`` returns, for one use.

        The provider this is called on, the app's registry and the global configuration are
        unchanged. Usually ``change`` copies the settings with :meth:`OAuth2Settings.replace`::

            provider.with_settings(lambda s: s.replace(scope="repo")).authenticate()

        :raises TypeError: when ``change`` does not return an :class:`OAuth2Settings`.
        :raises ConfigurationError: when the new settings do not suit this provider.
        """
        settings = change(self._settings)
        if not isinstance(settings, OAuth2Settings):
            raise TypeError(
                f"the function given to with_settings must return OAuth2Settings, "
                f"not {type(settings).__name__}"
            )
        problems = self.settings_problems(settings)
        if problems:
            raise ConfigurationError([p.__class__(self._name, p.key, p.message) for p in problems])
        return type(self)(self._name, settings)

    @classmethod
    def settings_problems(cls, settings: OAuth2Settings) -> list[ConfigurationProblem]:
        """Problems of ``settings`` that this provider class cannot work with (beyond the
        record's own validation). The provider name is filled in by the caller."""
        return []

    @abstractmethod
    def authenticate(self) -> Response | OAuth2Info:
        """Run the step of the sign-in the current request is at.

        :return: The redirect to the provider (a response to return as it is) when the flow
            starts; the token when the request is the provider's callback.
        :raises AuthenticationError: when the flow fails.
        """

    @abstractmethod
    def retrieve_profile(self, info: OAuth2Info) -> SocialProfile:
        """Fetch and normalize the signed-in user's profile.

        :raises ProfileRetrievalError: when it cannot be fetched or read.
        """

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._name!r}>"
