"""Sign in with Apple's client secret: an ES256 JWT made from the ``.p8`` private key.

Apple issues no client secret string: the client proves itself with a JWT signed by a private
key from the developer account (``iss`` the team id, ``sub`` the Services ID, ``aud`` the
issuer, ``iat``, ``exp``, header ``kid`` the key id). joserfc signs it; a made secret is kept
per process until shortly before it expires, so a busy app signs a few a day, not one per
sign-in.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from .. import caches
from ..oauth.client_auth import load_signing_key, normalize_pem, sign_jwt

if TYPE_CHECKING:
    from joserfc.jwk import ECKey

#: Seconds a client secret is valid (Apple accepts up to six months; short is safer).
SECRET_LIFETIME: Final = 1800
#: A kept secret is replaced when fewer seconds than this remain.
RENEW_BEFORE: Final = 300
#: The key Apple hands out is a P-256 key; ES256 is the only algorithm it accepts.
ALGORITHM: Final = "ES256"


def load_private_key(value: str) -> ECKey:
    """The EC P-256 private key of a ``.p8`` PEM text.

    :raises ValueError: when ``value`` is not one (the message never repeats the value).
    """
    from joserfc.jwk import ECKey

    key = load_signing_key(value)
    if not isinstance(key, ECKey):
        raise ValueError("is an RSA key; Apple's keys are EC P-256 (ES256)")
    return key


@dataclass(frozen=True, slots=True)
class SecretClaims:
    """What a client secret states: who signs it for which client, towards which issuer."""

    team_id: str
    key_id: str
    client_id: str
    audience: str


@dataclass(frozen=True, slots=True)
class _Made:
    secret: str = field(repr=False)  # the signed client secret
    expires: float


class ClientSecretCache:
    """Client secrets made and kept per process, by claims and key (a digest of it).

    Thread-safe: one lock guards the table, and signing happens under it, so a burst of
    sign-ins signs one secret.

    :param clock: Seconds since the epoch (tests pass their own).
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._made: dict[tuple[SecretClaims, str], _Made] = {}

    def secret(self, claims: SecretClaims, private_key: str) -> str:
        """A valid client secret for ``claims``, signed with ``private_key`` (the ``.p8``
        PEM): a kept one while more than :data:`RENEW_BEFORE` seconds remain, else a new one.

        :raises ValueError: when ``private_key`` is not an EC P-256 private key.
        """
        digest = hashlib.sha256(normalize_pem(private_key).encode("utf-8")).hexdigest()
        slot = (claims, digest)
        with self._lock:
            now = self.clock()
            made = self._made.get(slot)
            if made is None or made.expires - now <= RENEW_BEFORE:
                secret = make_secret(claims, load_private_key(private_key), now)
                made = _Made(secret, int(now) + SECRET_LIFETIME)
                self._made[slot] = made
            return made.secret

    def clear(self) -> None:
        """Forget every kept secret."""
        with self._lock:
            self._made.clear()


def make_secret(claims: SecretClaims, key: ECKey, now: float) -> str:
    """A new client secret for ``claims``, issued at ``now``, signed with ``key`` (the JWT
    signing of :mod:`flask_social_oauth2.oauth.client_auth`)."""
    issued = int(now)
    payload = {
        "iss": claims.team_id,
        "sub": claims.client_id,
        "aud": claims.audience,
        "iat": issued,
        "exp": issued + SECRET_LIFETIME,
    }
    return sign_jwt(payload, key, ALGORITHM, kid=claims.key_id)


#: The secrets of this process.
SECRETS: Final = ClientSecretCache()
caches.register("Apple client secrets", SECRETS.clear)
