"""The keys that sign the local identity provider's ID tokens, and the ways a test can make
an ID token wrong."""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
from typing import Any, get_args

from joserfc import jwt
from joserfc.jwk import RSAKey

from .models import IdTokenSigning, IdTokenTamper

__all__ = ["LOGOUT_EVENT", "SigningKeys"]

#: The event of a Back-Channel Logout 1.0 logout token.
LOGOUT_EVENT = "http://schemas.openid.net/event/backchannel-logout"


def _new_key(kid: str | None = None) -> RSAKey:
    if kid is not None:
        return RSAKey.generate_key(2048, parameters={"use": "sig", "alg": "RS256", "kid": kid})
    return RSAKey.generate_key(2048, parameters={"use": "sig", "alg": "RS256"}, auto_kid=True)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


class SigningKeys:
    """The current RS256 signing key, the retired ones still published, and the test knobs
    :attr:`tamper` and :attr:`signing`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key = _new_key()
        self._kid: str = self._key.kid or self._key.thumbprint()
        self._retired: list[RSAKey] = []
        self._other: RSAKey | None = None
        self._signing: IdTokenSigning = "key"
        #: Applied to each ID token's header and claims just before signing.
        self.tamper: IdTokenTamper | None = None

    @property
    def key(self) -> RSAKey:
        """The key that signs ID tokens now."""
        with self._lock:
            return self._key

    @property
    def kid(self) -> str:
        """The ``kid`` of :attr:`key`."""
        with self._lock:
            return self._kid

    @property
    def signing(self) -> IdTokenSigning:
        """Which key signs: ``"key"``, ``"other_key"`` or ``"none"``.

        :raises ValueError: when set to anything else.
        """
        return self._signing

    @signing.setter
    def signing(self, value: IdTokenSigning) -> None:
        if value not in get_args(IdTokenSigning):
            raise ValueError(f"sign_id_token_with must be one of {get_args(IdTokenSigning)}.")
        self._signing = value

    def jwks(self) -> dict[str, Any]:
        """The public JWKS: the current key and the retired ones kept."""
        with self._lock:
            keys = [self._key, *self._retired]
        return {"keys": [key.as_dict(private=False) for key in keys]}

    def rotate(self, *, keep_old: bool) -> str:
        """Sign with a new key from now on; return its ``kid``."""
        key = _new_key()
        with self._lock:
            if keep_old:
                self._retired.append(self._key)
            self._key = key
            self._kid = key.kid or key.thumbprint()
            self._other = None
            return self._kid

    def _other_key(self) -> RSAKey:
        """An unpublished key carrying the published ``kid``."""
        with self._lock:
            if self._other is None:
                self._other = _new_key(self._kid)
            return self._other

    def finish(self, signed: str) -> str:
        """Apply :attr:`tamper` and :attr:`signing` to an ID token Authlib signed."""
        tamper, signing = self.tamper, self.signing
        if tamper is None and signing == "key":
            return signed
        decoded = jwt.decode(signed, self.key, algorithms=["RS256"])
        header, claims = dict(decoded.header), dict(decoded.claims)
        if tamper is not None:
            header, claims = tamper(header, claims)
        if signing == "none":
            header = {**header, "alg": "none"}
            encoded = [
                _b64url(json.dumps(part, separators=(",", ":")).encode())
                for part in (header, claims)
            ]
            return f"{encoded[0]}.{encoded[1]}."
        key = self.key if signing == "key" else self._other_key()
        return jwt.encode(
            header, claims, key, algorithms=[str(header.get("alg"))], default_type=None
        )

    def logout_token(self, issuer: str, client_id: str, *, sub: str | None, sid: str | None) -> str:
        """A Back-Channel Logout 1.0 logout token for ``client_id``, signed with :attr:`key`
        like the ID tokens (``typ`` ``logout+jwt``, a fresh ``jti``, two minutes to live)."""
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": issuer,
            "aud": client_id,
            "iat": now,
            "exp": now + 120,
            "jti": secrets.token_urlsafe(16),
            "events": {LOGOUT_EVENT: {}},
        }
        claims.update({name: value for name, value in (("sub", sub), ("sid", sid)) if value})
        header = {"alg": "RS256", "kid": self.kid, "typ": "logout+jwt"}
        return jwt.encode(header, claims, self.key, algorithms=["RS256"])
