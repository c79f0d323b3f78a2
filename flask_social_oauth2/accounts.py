"""After sign-in: which identities this browser signed in with, linking them to the app's users,
unlinking and signing out.

The browser's identities live in its session (provider name -> ``provider_key``); the identity
that the current request has just signed in is on :data:`flask.g`, never on a shared object.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Final

from flask import Response, g, has_request_context, session

from .errors import AuthenticationError, SocialOAuth2Error
from .runtime import current_runtime

# The extension imports this module: the provider and the token stores, which init_app imports,
# are imported where they are used, so that importing the extension stays cheap.
if TYPE_CHECKING:
    from .config.settings import OAuth2Info
    from .tokens.identity import Identity, IdentityStore
    from .web.logout import LogoutProvider

logger = logging.getLogger("flask_social_oauth2")

#: The session key of this browser's signed-in identities: provider name -> provider_key.
SIGNED_IN_KEY: Final = "social_oauth2_identities"
#: The :data:`flask.g` attribute naming the identity the current request signed in.
_JUST_SIGNED_IN: Final = "social_oauth2_just_signed_in"
#: Longest app user id a SQL store keeps (its column's size).
MAX_USER_ID: Final = 255


def remember_sign_in(provider: str, key: str, info: OAuth2Info) -> None:
    """Keep the token of the identity just signed in in the app's token store, and remember
    that this browser (its session) and this request (:data:`flask.g`) signed in with it."""
    setattr(g, _JUST_SIGNED_IN, (provider, key))
    store = current_runtime().token_store
    if store is None:
        return
    store.save(provider, key, info)
    current = session._get_current_object()  # type: ignore[attr-defined]  # once, not twice
    current[SIGNED_IN_KEY] = {**_identities(current), provider: key}


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
    session.pop(state.session_key, None)


def logout_redirect(provider: LogoutProvider, next_url: str | None) -> Response:
    """Sign this browser out (as :func:`sign_out`) and answer the redirect that ends its
    session at ``provider`` too (see :func:`flask_social_oauth2.web.logout.
    redirect_to_end_session`), with the ID token kept for its identity there (a SQL store
    keeps it; the session store does not) as ``id_token_hint`` and its ``sid`` as
    ``logout_hint``."""
    from .web.logout import redirect_to_end_session, sid_of

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

    selected = current_runtime().providers.get(provider)
    store = current_runtime().token_store
    if not isinstance(selected, OAuth2Provider) or store is None:
        return
    try:
        info = store.load(provider, key)
        if info is not None:
            selected.revoke(info)
    except AuthenticationError as error:
        logger.warning("%s: the token of identity %r was not revoked: %s", provider, key, error)
