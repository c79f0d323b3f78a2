"""One record per app, built once in ``init_app`` and kept in ``app.extensions["social_oauth2"]``:
the providers (and the cache of the loaded ones), the options read from the config, the token
store, the state cookie and the start confirmation. Everything below reads what it needs from
it or is handed it; nothing about a request is ever kept here.

The sign-in steps (:mod:`flask_social_oauth2.web.sign_in`) never reach up for it: the provider
that runs them hands it in, as the stores they need.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from flask import Flask, current_app

from .errors import ConfigurationProblem, SocialOAuth2Error

# Named in annotations only: importing this module (as the extension does) does not import the
# state cookie, the token stores or the providers.
if TYPE_CHECKING:
    from .tokens.session_index import SessionIndex
    from .tokens.store import TokenStore
    from .web.loaded_providers import LoadedProviders
    from .web.provider import SocialProvider
    from .web.start_confirmation import StartConfirmation
    from .web.state_cookie import StateCookieStore

__all__ = ["EXTENSION_KEY", "Runtime", "current_runtime"]

#: The key of the extension's record in ``app.extensions``.
EXTENSION_KEY: Final = "social_oauth2"


@dataclass(slots=True)
class Runtime:
    """What the extension keeps for one app, shared by all its requests. Written in
    ``init_app``; afterwards only by caches of app-wide values (:attr:`redirect_problems`) and
    by :func:`flask_social_oauth2.testing.use_local_idp` (:attr:`providers`)."""

    #: The :class:`~flask_social_oauth2.SocialOAuth2` object that set the app up (typed
    #: loosely: this module sits below the extension and does not import it).
    extension: object
    #: The configured providers, by name (not the loaded ones: see :meth:`find_provider`).
    providers: Mapping[str, SocialProvider]
    #: The endpoint of the sign-in route (for ``url_for``).
    endpoint: str
    #: Where the default success handler keeps the profile (``SOCIAL_OAUTH2_SESSION_KEY``).
    session_key: str
    #: The browser-bound store of started flows.
    state_cookies: StateCookieStore
    #: Seconds for each request to a provider (``SOCIAL_OAUTH2_TIMEOUT``).
    timeout: float
    #: Largest provider answer read, in bytes (``SOCIAL_OAUTH2_MAX_RESPONSE_BYTES``).
    max_response_bytes: int
    #: Seconds a failed discovery or key set fetch is remembered
    #: (``SOCIAL_OAUTH2_DISCOVERY_FAILURE_TTL``).
    discovery_failure_ttl: float = 30.0
    #: Where the tokens of signed-in identities are kept (``SOCIAL_OAUTH2_TOKEN_STORE``);
    #: ``None`` when nothing is kept (``"none"``).
    token_store: TokenStore | None = None
    #: The configured blocks' e-mail domains (``customProperties.domains``), domain -> name.
    email_domains: Mapping[str, str] = field(default_factory=dict)

    #: Seconds before expiry at which a token is refreshed (``SOCIAL_OAUTH2_REFRESH_LEEWAY``),
    #: read by :func:`~flask_social_oauth2.tokens.refresh_due`.
    refresh_leeway: float = 30.0
    #: The confirmation of sign-in starts from other origins; ``None`` when they start at
    #: once (``SOCIAL_OAUTH2_CROSS_SITE_START = "allow"``).
    start_confirmation: StartConfirmation | None = None
    #: The redirect URL rule's problems, found at the first request (``None`` until then).
    redirect_problems: tuple[ConfigurationProblem, ...] | None = None
    #: The path of the ready sign-in page (``SOCIAL_OAUTH2_SIGN_IN_PAGE``); ``None``: none.
    sign_in_page: str | None = None

    #: The provider loader's answers, kept for this app (``None``: no loader is asked).
    loaded: LoadedProviders | None = None
    #: Whether the redirect URL rule is checked (``SOCIAL_OAUTH2_CHECK_REDIRECT_URLS``), also
    #: for the blocks of loaded providers.
    check_redirect_urls: bool = True

    def find_provider(self, name: str) -> SocialProvider | None:
        """The configured provider ``name``, else the one the app's provider loader gives for
        it (a configured name never reaches the loader), else ``None``.

        :raises ProviderUnavailableError: when the loader fails or answers wrongly.
        """
        found = self.providers.get(name) if isinstance(name, str) else None
        if found is None and self.loaded is not None:
            found = self.loaded.get(name)
        return found

    #: The token store when it keeps the session index of provider logouts, else ``None``.
    session_index: SessionIndex | None = None
    #: Seconds between two checks of a browser's sessions against the index
    #: (``SOCIAL_OAUTH2_SESSION_CHECK_SECONDS``).
    session_check_seconds: float = 10.0


def current_runtime(app: Flask | None = None) -> Runtime:
    """The :class:`Runtime` of ``app`` (default: the current app).

    :raises SocialOAuth2Error: when ``init_app`` was not called for the app.
    """
    app = app if app is not None else current_app._get_current_object()  # type: ignore[attr-defined]
    runtime = app.extensions.get(EXTENSION_KEY)
    if not isinstance(runtime, Runtime):
        raise SocialOAuth2Error(
            f"flask-social-oauth2 is not set up on app {app.name!r}: call"
            " SocialOAuth2(app) or social.init_app(app) first"
        )
    return runtime
