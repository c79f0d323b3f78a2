"""The token store protocol, the refresh rule, and what the built-in stores share."""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final, Protocol, runtime_checkable

from flask import current_app

from ..config.settings import OAuth2Info
from ..errors import SignInRequiredError
from .cipher import InvalidToken, TokenCipher, app_cipher
from .record import dump_record, load_record

#: Seconds before expiry at which a token is refreshed, unless the app sets
#: ``SOCIAL_OAUTH2_REFRESH_LEEWAY``.
DEFAULT_LEEWAY: Final = 30.0

#: A function that asks the provider for a new token, given the current one.
Renew = Callable[[OAuth2Info], OAuth2Info]


@runtime_checkable
class TokenStore(Protocol):
    """Where the tokens of signed-in identities live. Every method is called in an app context
    (and, for a store bound to the browser, in a request); an identity is the provider's name
    and the user's ``provider_key`` there. A custom store receives and returns plain
    :class:`~flask_social_oauth2.OAuth2Info`; encryption is its own business."""

    def load(self, provider: str, key: str) -> OAuth2Info | None:
        """The identity's token, or ``None`` when none is kept.

        :raises SignInRequiredError: when the kept token cannot be read (wrong key, damage).
        """

    def save(self, provider: str, key: str, info: OAuth2Info) -> None:
        """Keep ``info`` as the identity's token, replacing any other."""

    def delete(self, provider: str, key: str) -> None:
        """Forget the identity's token; nothing happens when none is kept."""

    def refresh(self, provider: str, key: str, renew: Renew) -> OAuth2Info:
        """Renew the identity's token, one renewal at a time.

        Under the store's lock for the identity, re-read the token; when it is still due
        (:func:`refresh_due`), call ``renew`` once with it, save the result and return it;
        otherwise (another request renewed it meanwhile) return the token re-read. When
        ``renew`` raises :class:`~flask_social_oauth2.errors.SignInRequiredError` (the
        provider refused the refresh), the token is deleted and the error passes on; any other
        error passes on and leaves the kept token as it was.

        :raises SignInRequiredError: when no token is kept for the identity.
        """


def refresh_due(info: OAuth2Info, now: float | None = None, leeway: float | None = None) -> bool:
    """Whether ``info`` should be renewed before it is used: it expires within the leeway
    (at most half the token's lifetime, so that a short-lived token is not renewed on every
    call). A token of unknown expiry is never due. A custom store calls it as
    ``refresh_due(current)`` in :meth:`TokenStore.refresh`.

    :param now: The time to compare with (default: now).
    :param leeway: Seconds before expiry; default: the current app's
        ``SOCIAL_OAUTH2_REFRESH_LEEWAY`` as ``init_app`` read it (30 s when the extension is
        not set up on the app). Needs an app context only when not given.
    """
    if info.expires_at is None:
        return False
    if leeway is None:
        leeway = app_refresh_leeway()
    if info.expires_in:
        leeway = min(leeway, info.expires_in / 2)
    now = time.time() if now is None else now
    return info.expires_at - now <= leeway


def app_refresh_leeway() -> float:
    """The current app's refresh leeway, read once by ``init_app`` into its runtime record."""
    # The runtime record sits above the stores, so it is read by its key, not imported.
    runtime = current_app.extensions.get("social_oauth2")
    return float(getattr(runtime, "refresh_leeway", DEFAULT_LEEWAY))


def current_cipher() -> TokenCipher:
    """The cipher of the current app's keys (``SOCIAL_OAUTH2_TOKEN_KEYS`` or ``SECRET_KEY``)."""
    return app_cipher(current_app.config)


def seal(info: OAuth2Info, *, keep_id_token: bool = False) -> str:
    """``info``'s record (``expires_at`` reckoned from ``expires_in`` when not set, see
    :func:`~.record.dump_record`; the ID token too with ``keep_id_token``), encrypted with the
    current app's first key."""
    return current_cipher().encrypt(dump_record(info, keep_id_token=keep_id_token))


def unseal(provider: str, key: str, sealed: str) -> OAuth2Info:
    """The token in ``sealed``.

    :raises SignInRequiredError: naming the identity, when no key opens it or it is damaged.
    """
    try:
        return load_record(current_cipher().decrypt(sealed))
    except (InvalidToken, ValueError, UnicodeError) as error:
        reason = (
            "no key opens it (a wrong key, or it was altered)"
            if isinstance(error, InvalidToken)
            else "it is damaged"
        )
        raise SignInRequiredError(
            provider, f"the kept token of identity {key!r} cannot be read: {reason}"
        ) from None


class IdentityLocks:
    """One lock per identity within this process, dropped when nobody holds or waits on it."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: weakref.WeakValueDictionary[tuple[str, str], threading.Lock] = (
            weakref.WeakValueDictionary()
        )

    @contextmanager
    def hold(self, provider: str, key: str) -> Iterator[None]:
        """Hold the lock of ``(provider, key)`` for the ``with`` block."""
        with self._guard:
            lock = self._locks.get((provider, key))
            if lock is None:
                lock = threading.Lock()
                self._locks[(provider, key)] = lock
        with lock:
            yield
