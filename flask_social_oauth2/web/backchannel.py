"""The provider's sign-out that reaches the app: ``POST <url rule>/backchannel-logout`` (OpenID
Connect Back-Channel Logout 1.0).

The provider POSTs a form with ``logout_token`` from its server. The token is checked
(:mod:`flask_social_oauth2.oidc.logout_token`), then against the session index: it must be
signed with the algorithm of the ID token that started the sessions it would end, and its
``jti`` must never have been seen by any process of the app. A good token answers 200 and
ends every matching session in the index (each browser signs out at its next request); any
other answer ends nothing. Never a 500: every failure is a JSON error.
"""

from __future__ import annotations

import logging
from typing import Final, Protocol
from urllib.parse import parse_qs

from flask import Response, current_app, json, request

from ..config.provider_options import ProviderOptions
from ..config.settings import OAuth2Settings
from ..errors import AuthenticationError, LogoutTokenError, TokenStoreUnavailableError
from ..oidc.discovery import ProviderMetadata, Source
from ..oidc.logout_token import MAX_LOGOUT_TOKEN, verify_logout_token
from ..tokens.session_index import SessionIndex

logger = logging.getLogger("flask_social_oauth2")

#: Largest request body read: a logout token and its field name fit with room to spare.
MAX_BODY: Final = MAX_LOGOUT_TOKEN + 1024
#: The headers of every answer (section 2.8: no caching).
ANSWER_HEADERS: Final = {"Cache-Control": "no-store", "Pragma": "no-cache"}


class BackChannelProvider(Protocol):
    """What the route needs of a provider (:class:`~flask_social_oauth2.OAuth2Provider` is
    one)."""

    @property
    def name(self) -> str: ...

    @property
    def settings(self) -> OAuth2Settings: ...

    @property
    def options(self) -> ProviderOptions: ...

    def openid_metadata(self) -> ProviderMetadata | None: ...

    def openid_source(self) -> Source: ...


def refused(description: str, status: int = 400) -> Response:
    """The JSON error of a refused logout request (section 2.8: 400 ``invalid_request``)."""
    error = "invalid_request" if status == 400 else "temporarily_unavailable"
    body = json.dumps({"error": error, "error_description": description})
    response = current_app.response_class(body, status=status, mimetype="application/json")
    response.headers.update(ANSWER_HEADERS)
    return response


def read_logout_token() -> str:
    """The ``logout_token`` field of the request's form body, read to :data:`MAX_BODY` bytes.

    :raises ValueError: naming what is wrong with the request (not a form, too large, no or
        several ``logout_token`` fields).
    """
    if request.mimetype != "application/x-www-form-urlencoded":
        raise ValueError("the body must be a form (application/x-www-form-urlencoded)")
    length = request.content_length
    if length is not None and length > MAX_BODY:
        raise ValueError("the body is too large")
    data = request.stream.read(MAX_BODY + 1)
    if len(data) > MAX_BODY:
        raise ValueError("the body is too large")
    try:
        fields = parse_qs(data.decode("ascii"), keep_blank_values=True, max_num_fields=16)
    except (UnicodeError, ValueError):
        raise ValueError("the body is not a form") from None
    values = fields.get("logout_token", [])
    if len(values) != 1 or not values[0]:
        raise ValueError("the form must carry one logout_token")
    return values[0]


def backchannel_logout(provider: BackChannelProvider, index: SessionIndex) -> Response:
    """Check the logout token the provider POSTed and end the sessions it names."""
    name = provider.name
    try:
        token = read_logout_token()
    except ValueError as problem:
        logger.warning("%s: back-channel logout refused: %s", name, problem)
        return refused(str(problem))
    try:
        metadata = provider.openid_metadata()
        if metadata is None:  # init_app refuses such a block; a subclass may still do it
            raise LogoutTokenError(name, "the provider has no OpenID Connect issuer")
        claims = verify_logout_token(
            provider.openid_source(), provider.settings, provider.options, token, metadata
        )
        algorithms = index.session_algorithms(name, claims.iss, claims.sub, claims.sid)
        if algorithms and claims.alg not in algorithms:
            raise LogoutTokenError(
                name, "logout_token is not signed with the algorithm of the sessions' ID token"
            )
        if not index.remember_logout_token(claims.iss, claims.jti, claims.remember_until):
            raise LogoutTokenError(name, "logout_token was used already (jti replayed)")
        ended = index.end_sessions(name, claims.iss, claims.sub, claims.sid)
    except TokenStoreUnavailableError as error:
        logger.error("%s: back-channel logout not done: %s", name, error)
        return refused("the session store is unavailable; nothing was ended", 503)
    except AuthenticationError as error:  # the token, or the provider's key set
        logger.warning("%s: back-channel logout refused: %s", name, error)
        return refused(str(error).removeprefix(f"provider {name!r}: "))
    logger.info("%s: back-channel logout ended %d session(s)", name, ended)
    response = current_app.response_class(status=200)
    response.headers.update(ANSWER_HEADERS)
    return response
