"""The provider's sign-out through the browser: ``GET <url rule>/frontchannel-logout`` (OpenID
Connect Front-Channel Logout 1.0).

The provider's sign-out page loads this address in a hidden frame with ``iss`` and ``sid``. The
sessions of that provider session end in the session index (each browser signs out at its next
request), as a back-channel logout token would end them. Only the provider's own ``iss`` ends
anything; the page may be framed by the provider's origin only. A browser that blocks
third-party cookies does not hurt this (the index needs no cookie), but one that blocks
third-party frames does, and nothing is signed: anyone who knows a ``sid`` can end that session.
Prefer back-channel logout wherever the provider offers it.
"""

from __future__ import annotations

import logging
from typing import Final, Protocol
from urllib.parse import urlsplit

from flask import Response, current_app, request

from ..errors import InvalidCallbackError, TokenStoreUnavailableError
from ..tokens.session_index import SessionIndex
from .callback import single_values
from .state_cookie import FLOW_PAGE_HEADERS

logger = logging.getLogger("flask_social_oauth2")

PAGE: Final = (
    '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title}</title></head>'
    "<body><p>{title}</p></body></html>\n"
)
_MAX_VALUE: Final = 512


class FrontChannelProvider(Protocol):
    """What the route needs of a provider (:class:`~flask_social_oauth2.OAuth2Provider` is
    one)."""

    @property
    def name(self) -> str: ...

    @property
    def issuer(self) -> str | None: ...


def origin_of(url: str) -> str:
    """The origin (scheme, host and port) of ``url``."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _page(title: str, status: int, frame_origin: str | None) -> Response:
    response = current_app.response_class(
        PAGE.format(title=title), status=status, mimetype="text/html"
    )
    ancestors = frame_origin or "'none'"
    response.headers["Content-Security-Policy"] = (
        f"default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors {ancestors}"
    )
    response.headers.update(FLOW_PAGE_HEADERS)
    return response


def frontchannel_logout(provider: FrontChannelProvider, index: SessionIndex) -> Response:
    """End the sessions of the ``iss`` and ``sid`` in the query when ``iss`` is the provider's;
    otherwise end nothing (a 400 page)."""
    name = provider.name
    issuer = provider.issuer
    frame_origin = None if issuer is None else origin_of(issuer)
    try:
        iss, sid = single_values(
            request.args, ("iss", "sid"), name, limits={"iss": _MAX_VALUE, "sid": _MAX_VALUE}
        )
    except InvalidCallbackError:
        return _page("Sign-out request refused", 400, frame_origin)
    if issuer is None or iss != issuer or not sid:
        logger.warning("%s: front-channel logout refused: a foreign iss, or no sid", name)
        return _page("Sign-out request refused", 400, frame_origin)
    try:
        ended = index.end_sessions(name, iss, None, sid)
    except TokenStoreUnavailableError as error:
        logger.error("%s: front-channel logout not done: %s", name, error)
        return _page("Sign-out could not be done now", 503, frame_origin)
    logger.info("%s: front-channel logout ended %d session(s)", name, ended)
    return _page("Signed out", 200, frame_origin)
