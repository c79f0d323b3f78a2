"""After sign-in: which identities this browser signed in with, linking them to the app's users,
unlinking and signing out.

The browser's identities live in its session (provider name -> ``provider_key``); the identity
that the current request has just signed in is on :data:`flask.g`, never on a shared object.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from flask import Flask, Response, current_app, g, has_request_context, session

from . import signals
from .errors import AuthenticationError, ConfigurationProblem, SocialOAuth2Error
from .runtime import current_runtime

# The extension imports this module: the provider and the token stores, which init_app imports,
# are imported where they are used, so that importing the extension stays cheap.
if TYPE_CHECKING:
    from .config.settings import OAuth2Info
    from .tokens.identity import Identity, IdentityStore
    from .tokens.session_index import SessionIndex
    from .tokens.store import TokenStore
    from .web.logout import LogoutProvider
    from .web.provider import SocialProvider

logger = logging.getLogger("flask_social_oauth2")

#: The session key of this browser's signed-in identities: provider name -> provider_key.
SIGNED_IN_KEY: Final = "social_oauth2_identities"
#: The :data:`flask.g` attribute naming the identity the current request signed in.
_JUST_SIGNED_IN: Final = "social_oauth2_just_signed_in"
#: Longest app user id a SQL store keeps (its column's size).
MAX_USER_ID: Final = 255
#: The session key of this browser's sign-ins in the session index: ``[checked at, [local
#: session id, ...]]``.
SESSIONS_KEY: Final = "social_oauth2_sessions"
#: The most sign-ins of one browser the session index is asked about.
MAX_INDEXED: Final = 8


def remember_sign_in(provider: str, key: str, info: OAuth2Info) -> None:
    """Keep the token of the identity just signed in in the app's token store, and remember
    that this browser (its session) and this request (:data:`flask.g`) signed in with it. A
    sign-in without an access token (an ID token the browser posted) keeps nothing: the
    browser then has no API identity for ``provider``."""
    setattr(g, _JUST_SIGNED_IN, (provider, key))
    store = current_runtime().token_store
    if not info.access_token:  # an ID token the browser posted: no token to keep, no API
        _forget_in_browser(provider, store)
        return
    if store is None:
        return
    store.save(provider, key, info)
    current = session._get_current_object()  # type: ignore[attr-defined]  # once, not twice
    current[SIGNED_IN_KEY] = {**_identities(current), provider: key}
    index = current_runtime().session_index
    if index is not None and info.id_token_claims is not None:
        _index_sign_in(index, current, provider, info)


def _index_sign_in(index: SessionIndex, current: Any, provider: str, info: OAuth2Info) -> None:
    """Record the sign-in whose ID token was verified in the session index, under a new random
    local session id that the browser's session carries."""
    from .oidc.logout_token import header_algorithm
    from .tokens.session_index import IndexedSession

    claims = info.id_token_claims or {}
    iss, sub, sid = claims.get("iss"), claims.get("sub"), claims.get("sid")
    algorithm = header_algorithm(info.params.get("id_token"))
    if not (isinstance(iss, str) and isinstance(sub, str) and algorithm):
        return
    now = time.time()
    local_id = secrets.token_urlsafe(24)
    lifetime = current_app.permanent_session_lifetime.total_seconds()
    index.record_session(
        IndexedSession(
            local_id=local_id,
            provider=provider,
            iss=iss,
            sub=sub,
            sid=sid if isinstance(sid, str) and sid else None,
            alg=algorithm,
            signed_in_at=now,
            expires_at=now + lifetime,
        )
    )
    _, known = _indexed(current.get(SESSIONS_KEY))
    current[SESSIONS_KEY] = _carried(int(now), [*known, local_id][-MAX_INDEXED:])


def _carried(checked: int, local_ids: list[str]) -> str:
    """What the browser's session carries: ``"<last check> <local id> ..."``, one string, which
    Flask's session serializer reads on every request at less cost than a list."""
    return " ".join([str(checked), *local_ids])


def _checked_at(found: object) -> int:
    """The time of the last check in :data:`SESSIONS_KEY`'s value (0: unreadable)."""
    if isinstance(found, str):
        head = found.partition(" ")[0]
        return int(head) if head.isascii() and head.isdigit() else 0
    if isinstance(found, list) and found and isinstance(found[0], int):  # earlier builds
        return found[0]
    return 0


def _indexed(found: object) -> tuple[int, list[str]]:
    """The time of the last check and the local session ids in :data:`SESSIONS_KEY`'s value;
    the list of earlier versions, ``[last check, [local id, ...]]``, is read too."""
    if isinstance(found, str):
        return _checked_at(found), found.split()[1:]
    if (
        isinstance(found, list)
        and len(found) == 2
        and isinstance(found[0], int)
        and isinstance(found[1], list)
    ):
        return found[0], [item for item in found[1] if isinstance(item, str)]
    return 0, []


def check_ended_sessions() -> None:
    """Before a request: when the browser's session carries sign-ins of the session index and
    the last check is ``SOCIAL_OAUTH2_SESSION_CHECK_SECONDS`` old, ask the index whether the
    provider ended one of them (back-channel or front-channel logout, delivered to any
    process); if so, sign the browser out (as :func:`sign_out`) and send
    :data:`~flask_social_oauth2.signals.provider_logged_out` once for each ended one."""
    current = session._get_current_object()  # type: ignore[attr-defined]
    found = current.get(SESSIONS_KEY)
    if found is None:
        return
    state = current_runtime()
    index = state.session_index
    now = int(time.time())
    every = state.session_check_seconds
    if index is None or (every and now - _checked_at(found) < every):
        return  # the ids are read only when a check is due: most requests stop here
    _, local_ids = _indexed(found)
    if not local_ids:
        return
    try:
        ended = index.take_ended_sessions(local_ids)
    except AuthenticationError as error:  # the store is down: the page is served, checked later
        logger.warning("the session index could not be read: %s", error)
        return
    if every:
        current[SESSIONS_KEY] = _carried(now, local_ids)
    if not ended:
        return
    sign_out(revoke=False)
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    for item in ended:
        logger.info("%s: the provider ended this browser's session", item.provider)
        signals.provider_logged_out.send(app, provider=item.provider, sub=item.sub, sid=item.sid)


def _forget_in_browser(provider: str, store: TokenStore | None) -> None:
    """This browser has no API identity for ``provider`` any more (a token kept in the
    session for an earlier one goes with it)."""
    from .tokens.session import SessionTokenStore

    mine = signed_in()
    earlier = mine.pop(provider, None)
    if earlier is None:
        return
    if isinstance(store, SessionTokenStore):
        store.delete(provider, earlier)
    session[SIGNED_IN_KEY] = mine


def signed_in() -> dict[str, str]:
    """This browser's identities: provider name -> ``provider_key`` (empty outside a request)."""
    if not has_request_context():
        return {}
    return _identities(session)


def _identities(current: Any) -> dict[str, str]:
    found = current.get(SIGNED_IN_KEY)
    if not isinstance(found, dict):
        return {}
    return {name: key for name, key in found.items() if isinstance(key, str)}


def identity_store() -> IdentityStore:
    """The app's token store, when it links identities to users.

    :raises SocialOAuth2Error: when it does not (the session store, ``"none"``, or a custom
        store without :class:`~flask_social_oauth2.tokens.IdentityStore`'s methods).
    """
    from .tokens.identity import IdentityStore

    store = current_runtime().token_store
    if not isinstance(store, IdentityStore):
        raise SocialOAuth2Error(
            "linking identities to users needs a token store that keeps them: set"
            " SOCIAL_OAUTH2_TOKEN_STORE to a SQLAlchemy URL (e.g. 'sqlite:///social.sqlite3'),"
            f" not {type(store).__name__}"
        )
    return store


def link(user_id: str | int, provider: str | None = None, key: str | None = None) -> Identity:
    """Link an identity to the app's user ``user_id``: by default the one the current request
    has just signed in (in ``on_authenticated``).

    :raises SocialOAuth2Error: without a store that links (see :func:`identity_store`), or
        with no identity named and none signed in by this request.
    :raises TypeError: for a ``user_id`` that is not a str or an int.
    :raises ValueError: for an empty ``user_id`` or one over 255 characters.
    """
    if (provider is None) != (key is None):
        raise TypeError("link(user_id, provider=..., key=...) needs both provider and key")
    if provider is None or key is None:
        just = g.get(_JUST_SIGNED_IN) if has_request_context() else None
        if just is None:
            raise SocialOAuth2Error(
                "social.link(user_id) links the identity that this request has just signed in:"
                " call it in on_authenticated, or name one with provider= and key="
            )
        provider, key = just
    return identity_store().link(provider, key, checked_user_id(user_id))


def checked_user_id(user_id: object) -> str:
    """``user_id`` as the str a store keeps.

    :raises TypeError: for anything but a str or an int (a bool is refused).
    :raises ValueError: for an empty one or one over :data:`MAX_USER_ID` characters.
    """
    if isinstance(user_id, bool) or not isinstance(user_id, str | int):
        raise TypeError(f"a user id must be a str or an int, not {type(user_id).__name__}")
    text = str(user_id)
    if not text or len(text) > MAX_USER_ID:
        raise ValueError(f"a user id must have 1 to {MAX_USER_ID} characters")
    return text


def forget(provider: str, key: str, *, revoke: bool) -> None:
    """Delete the identity's kept token (and, in a SQL store, its row), first revoking it at
    the provider when ``revoke`` and the provider can. A failed revocation is logged as a
    warning and the identity is deleted anyway: the user asked for it to go."""
    store = current_runtime().token_store
    if store is None:
        return
    if revoke:
        _revoke(provider, key)
    store.delete(provider, key)
    mine = signed_in()
    if mine.get(provider) == key:
        del mine[provider]
        session[SIGNED_IN_KEY] = mine


def sign_out(*, revoke: bool) -> None:
    """Forget this browser's identities and the profile the default success handler kept.

    Tokens kept in the session go with it; rows of a SQL store stay for jobs unless ``revoke``,
    which revokes each identity's token where the provider can and deletes its row.
    """
    from .tokens.session import SessionTokenStore

    state = current_runtime()
    store = state.token_store
    for provider, key in signed_in().items():
        if revoke:
            forget(provider, key, revoke=True)
        elif isinstance(store, SessionTokenStore):
            store.delete(provider, key)
    session.pop(SIGNED_IN_KEY, None)
    session.pop(SESSIONS_KEY, None)
    session.pop(state.session_key, None)


def logout_redirect(provider: LogoutProvider, next_url: str | None) -> Response:
    """Sign this browser out (as :func:`sign_out`) and answer the redirect that ends its
    session at ``provider`` too (see :func:`flask_social_oauth2.web.logout.
    redirect_to_end_session`), with the ID token kept for its identity there (a SQL store
    keeps it; the session store does not) as ``id_token_hint`` and its ``sid`` as
    ``logout_hint``."""
    from .oidc.logout_token import sid_of
    from .web.logout import redirect_to_end_session

    state = current_runtime()
    key = signed_in().get(provider.name)
    id_token = None
    if key is not None and state.token_store is not None:
        try:
            kept = state.token_store.load(provider.name, key)
        except AuthenticationError as error:  # unreadable: signed out all the same
            logger.warning("%s: the kept ID token was not read: %s", provider.name, error)
            kept = None
        found = None if kept is None else kept.params.get("id_token")
        id_token = found if isinstance(found, str) and found else None
    sign_out(revoke=False)
    return redirect_to_end_session(
        provider,
        state.state_cookies,
        next_url,
        id_token_hint=id_token,
        logout_hint=sid_of(id_token),
    )


def _revoke(provider: str, key: str) -> None:
    from .providers.oauth2 import OAuth2Provider

    state = current_runtime()
    store = state.token_store
    try:
        selected = state.find_provider(provider)
        if not isinstance(selected, OAuth2Provider) or store is None:
            return
        info = store.load(provider, key)
        if info is not None:
            selected.revoke(info)
    except AuthenticationError as error:
        logger.warning("%s: the token of identity %r was not revoked: %s", provider, key, error)


# -- the routes and the hook of sign-out ---------------------------------------------------------


def logout_problems(
    providers: Mapping[str, SocialProvider], store: object
) -> list[ConfigurationProblem]:
    """The problems of the blocks that turn on back-channel or front-channel logout: a value
    other than ``"true"`` or ``"false"``, no OpenID Connect issuer, or a token store that
    keeps no session index."""
    from .providers.oauth2 import OAuth2Provider
    from .tokens.session_index import SessionIndex
    from .web.logout import BACKCHANNEL_KEY, FRONTCHANNEL_KEY, turned_on

    problems = []
    for name, provider in providers.items():
        if not isinstance(provider, OAuth2Provider):
            continue
        for key in (BACKCHANNEL_KEY, FRONTCHANNEL_KEY):
            where = f"customProperties.{key}"
            if not turned_on(provider.options, key):
                continue
            if provider.issuer is None:
                problems.append(
                    ConfigurationProblem(
                        name, where, "needs an OpenID Connect provider (customProperties.issuer)"
                    )
                )
            if not isinstance(store, SessionIndex):
                problems.append(
                    ConfigurationProblem(
                        name,
                        where,
                        "needs a token store that keeps the session index: set"
                        " SOCIAL_OAUTH2_TOKEN_STORE to a SQLAlchemy URL (e.g."
                        " 'postgresql://...'), or use a store implementing SessionIndex",
                    )
                )
    return problems


def watch_provider_logouts(app: Flask) -> None:
    """When the app's token store keeps the session index, keep it in the runtime and check
    the browser's sessions against it before each request (:func:`check_ended_sessions`)."""
    from .tokens.session_index import SessionIndex

    state = current_runtime(app)
    if isinstance(state.token_store, SessionIndex):
        state.session_index = state.token_store
        app.before_request(check_ended_sessions)
