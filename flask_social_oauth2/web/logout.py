"""Sign-out that reaches the provider (OpenID Connect RP-Initiated Logout 1.0): the redirect to
the provider's end-session endpoint, and the return route ``<url rule>/logged-out`` that checks
the single-use state this browser was given.

The state is a flow of the browser's state cookie like a sign-in's, marked as a sign-out
(:data:`LOGOUT_BINDING`): a sign-in callback never accepts it (its binding is a digest of the
settings), and the return route accepts nothing else.
"""

from __future__ import annotations

import logging
from typing import Final, Protocol
from urllib.parse import urlsplit

from flask import Response, current_app, request, url_for

from ..config.provider_options import ProviderOptions
from ..config.settings import OAuth2Settings
from ..errors import InvalidCallbackError
from ..oauth import flow
from . import state_cookie
from .callback import single_values
from .pages import error_page
from .redirects import safe_next_path
from .state_cookie import FLOW_PAGE_HEADERS, PendingFlow, StateCookieStore

logger = logging.getLogger("flask_social_oauth2")

#: The ``customProperties`` that turn on the provider's sign-out reaching the app.
BACKCHANNEL_KEY: Final = "backchannelLogout"
FRONTCHANNEL_KEY: Final = "frontchannelLogout"
#: The sign-out routes below the sign-in route, by what they are registered as at a provider.
LOGOUT_PATHS: Final = {
    "post_logout_redirect_uri": "/logged-out",
    "backchannel_logout_uri": "/backchannel-logout",
    "frontchannel_logout_uri": "/frontchannel-logout",
}
#: What marks a pending flow as a sign-out's in the state cookie (a sign-in's binding is a
#: 22-character digest, never this).
LOGOUT_BINDING: Final = "logout"
#: The page of a return that this browser did not start, or started and used already.
BAD_RETURN_MESSAGE: Final = (
    "This sign-out link is invalid, was used already or has expired. You are signed out here."
)


class LogoutProvider(Protocol):
    """What the sign-out needs of a provider (:class:`~flask_social_oauth2.OAuth2Provider`
    is one)."""

    @property
    def name(self) -> str: ...

    @property
    def settings(self) -> OAuth2Settings: ...

    def logout_url(
        self,
        post_logout_redirect_uri: str | None = None,
        *,
        state: str | None = None,
        id_token_hint: str | None = None,
        logout_hint: str | None = None,
    ) -> str | None: ...


def turned_on(options: ProviderOptions, key: str) -> bool:
    """Whether the block turns the sign-out route of ``key`` (:data:`BACKCHANNEL_KEY` or
    :data:`FRONTCHANNEL_KEY`) on."""
    return options.backchannel_logout if key == BACKCHANNEL_KEY else options.frontchannel_logout


def registered_logout_urls(options: ProviderOptions) -> dict[str, str]:
    """The sign-out addresses of a block to register at its provider (see
    :data:`LOGOUT_PATHS`), as paths relative to the sign-in route: the return of
    RP-initiated logout always, back-channel and front-channel where the block turns them on."""
    wanted = {
        "post_logout_redirect_uri": True,
        "backchannel_logout_uri": options.backchannel_logout,
        "frontchannel_logout_uri": options.frontchannel_logout,
    }
    return {name: path for name, path in LOGOUT_PATHS.items() if wanted[name]}


def logout_route_url(name: str, redirect_url: str, path: str) -> str:
    """The absolute address of the sign-out route ``path`` (of :data:`LOGOUT_PATHS`) of
    provider ``name``: see :func:`logged_out_url`."""
    base = url_for("social_oauth2.authenticate", provider=name) + path
    if not redirect_url.startswith("/"):
        parts = urlsplit(redirect_url)
        return f"{parts.scheme}://{parts.netloc}{base}"
    return f"{request.scheme}://{request.host}{base}"


def logged_out_url(name: str, redirect_url: str) -> str:
    """The absolute ``post_logout_redirect_uri`` of provider ``name``: the path of
    ``<url rule>/logged-out``, on the origin of an absolute ``redirectURL``, else on the
    request's scheme and host as Flask sees them (as a relative ``redirectURL`` is resolved).
    Register it at the provider."""
    return logout_route_url(name, redirect_url, LOGOUT_PATHS["post_logout_redirect_uri"])


def redirect_to_end_session(
    provider: LogoutProvider,
    store: StateCookieStore,
    next_url: str | None,
    *,
    id_token_hint: str | None,
    logout_hint: str | None,
) -> Response:
    """The redirect that ends the browser's session at the provider and comes back to
    ``<url rule>/logged-out`` with a single-use state carrying ``next_url`` (kept only when it
    is a same-origin path). Without an end-session endpoint, the redirect to ``next_url`` (or
    ``/``) at once. The caller has already signed the browser out here."""
    target = safe_next_path(next_url)
    pending = PendingFlow(
        state=flow.new_state(),
        provider=provider.name,
        redirect_uri=logged_out_url(provider.name, provider.settings.redirect_url),
        verifier=None,
        next_url=target,
        created=state_cookie.now(),
        binding=LOGOUT_BINDING,
    )
    url = provider.logout_url(
        pending.redirect_uri,
        state=pending.state,
        id_token_hint=id_token_hint,
        logout_hint=logout_hint,
    )
    response = current_app.response_class(status=302)
    response.headers.update(FLOW_PAGE_HEADERS)
    if url is None:
        logger.info("%s: signed out here (the provider has no end-session endpoint)", provider.name)
        response.headers["Location"] = target or "/"
        return response
    flows = store.load()
    flows.append(pending)
    store.save(flows)
    response.headers["Location"] = url
    logger.info("%s: signed out here, ending the session at the provider", provider.name)
    return response


def logged_out(name: str, store: StateCookieStore) -> Response:
    """``GET <url rule>/logged-out``: the provider's return after RP-initiated logout. The
    ``state`` must be one this browser was given for ``name``'s sign-out and not used yet; the
    answer is then a redirect to the ``next`` it carries (a same-origin path), else ``/``.
    Anything else is a 400 page."""
    refused = error_page(BAD_RETURN_MESSAGE, 400, title="Sign-out")
    try:
        (state,) = single_values(request.args, ("state",), name)
    except InvalidCallbackError:  # a repeated or oversized state: the same page
        return refused
    if not state:
        return refused
    flows = store.load()
    pending = state_cookie.find(flows, state)
    if pending is None or pending.binding != LOGOUT_BINDING or pending.provider != name:
        logger.info("%s: a sign-out return with a state this browser was not given", name)
        return refused
    store.save([item for item in flows if item is not pending])
    response = current_app.response_class(status=302)
    response.headers.update(FLOW_PAGE_HEADERS)
    response.headers["Location"] = safe_next_path(pending.next_url) or "/"
    return response
