"""Tokens and a rotating renewer for the token store tests."""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, field

from flask_social_oauth2.errors import SignInRequiredError
from flask_social_oauth2.settings import OAuth2Info


def make_token(*, expired: bool = False, lifetime: int = 3600, **params: str) -> OAuth2Info:
    """A fresh token; ``expired`` makes it due for a refresh."""
    now = time.time()
    return OAuth2Info(
        access_token="at-" + secrets.token_urlsafe(16),
        token_type="Bearer",
        expires_in=lifetime,
        refresh_token="rt-" + secrets.token_urlsafe(16),
        params={"id_token": "idt-" + secrets.token_urlsafe(16), **params},
        expires_at=now - 1 if expired else now + lifetime,
    )


@dataclass
class RotatingRenewer:
    """A provider's refresh endpoint that rotates refresh tokens and refuses a used one
    (``invalid_grant``), counting the renewals it was asked for."""

    valid_refresh_token: str
    delay: float = 0.05
    calls: int = 0
    issued: list[OAuth2Info] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, info: OAuth2Info) -> OAuth2Info:
        with self._lock:
            self.calls += 1
            if info.refresh_token != self.valid_refresh_token:
                raise SignInRequiredError("local", "the provider refused the refresh")
        time.sleep(self.delay)  # widen the window in which a second renewal could start
        renewed = make_token()
        with self._lock:
            self.valid_refresh_token = renewed.refresh_token or ""
            self.issued.append(renewed)
        return renewed


def kept(info: OAuth2Info | None) -> tuple[object, ...] | None:
    """What a store keeps of ``info`` (never the ID token), for comparing tokens."""
    if info is None:
        return None
    return (
        info.access_token,
        info.token_type,
        info.refresh_token,
        info.expires_in,
        info.expires_at,
    )
