"""The per-app objects a sign-in flow needs, built once in ``init_app``.

The flow code (:mod:`flask_social_oauth2.providers.oauth2` and below) reads them with
:func:`current_runtime`; it never reaches up for the extension or its app state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from flask import current_app

from .errors import SocialOAuth2Error

# Named in annotations only: importing this module (as the extension does, through the app
# state) does not import the state cookie or the token stores.
if TYPE_CHECKING:
    from .tokens.store import TokenStore
    from .web.start_confirmation import StartConfirmation
    from .web.state_cookie import StateCookieStore

#: The key of the extension's per-app state in ``app.extensions``.
EXTENSION_KEY: Final = "social_oauth2"


@dataclass(frozen=True, slots=True)
class Runtime:
    """What the flow needs from the app it runs in. One per app, shared by all requests."""

    #: The browser-bound store of started flows.
    state_cookies: StateCookieStore
    #: Seconds for each request to a provider.
    timeout: float
    #: Largest provider answer read, in bytes.
    max_response_bytes: int
    #: Seconds a failed discovery or key set fetch is remembered
    #: (``SOCIAL_OAUTH2_DISCOVERY_FAILURE_TTL``).
    discovery_failure_ttl: float = 30.0
    #: Where the tokens of signed-in identities are kept (``SOCIAL_OAUTH2_TOKEN_STORE``);
    #: ``None`` when nothing is kept (``"none"``).
    token_store: TokenStore | None = None
    #: The confirmation of sign-in starts from other origins; ``None`` when they start at
    #: once (``SOCIAL_OAUTH2_CROSS_SITE_START = "allow"``).
    start_confirmation: StartConfirmation | None = None


def current_runtime() -> Runtime:
    """The :class:`Runtime` of the current app, which the extension keeps as the ``runtime``
    attribute of ``app.extensions["social_oauth2"]``.

    :raises SocialOAuth2Error: when ``init_app`` was not called for the app.
    """
    runtime = getattr(current_app.extensions.get(EXTENSION_KEY), "runtime", None)
    if not isinstance(runtime, Runtime):
        raise SocialOAuth2Error(
            f"flask-social-oauth2 is not set up on app {current_app.name!r}: call"
            " SocialOAuth2(app) or social.init_app(app) first"
        )
    return runtime
