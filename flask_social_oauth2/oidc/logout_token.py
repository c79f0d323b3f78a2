"""OpenID Connect Back-Channel Logout 1.0 logout tokens: every check of its section 2.6.

A logout token is a JWT the provider POSTs to the app. It is accepted only when it is a JWS
(never ``none``, never HMAC: the allow-list of :mod:`.id_token`) signed with a key of the
provider's key set (fetched again once for an unknown ``kid``; a cached key set costs no
request), ``iss`` is the provider's issuer, ``aud`` names the client, ``iat`` is within the ID
token leeway (or, with ``exp``, the token has not expired), ``jti`` is present, ``events``
holds the back-channel logout event with a JSON object as its value, there is no ``nonce``,
and ``sub`` or ``sid`` (or both) says whose sessions end. Whether the ``jti`` was seen before
and whether the algorithm is the one of the sessions' ID tokens are the caller's checks (they
need the store). Like :mod:`.id_token`, this module sends nothing itself.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..config.provider_options import ProviderOptions
from ..config.settings import OAuth2Settings
from ..errors import LogoutTokenError
from ..oauth.metadata import ProviderMetadata, expected_token_issuer
from .discovery import Source
from .id_token import allowed_algorithms, verify_signature

#: The event a logout token's ``events`` claim must hold.
BACKCHANNEL_LOGOUT_EVENT: Final = "http://schemas.openid.net/event/backchannel-logout"
#: Longest logout token read.
MAX_LOGOUT_TOKEN: Final = 16 * 1024
_MAX_CLAIM: Final = 255


@dataclass(frozen=True, slots=True)
class LogoutClaims:
    """What a verified logout token says."""

    #: The provider's issuer.
    iss: str
    #: The user whose sessions end, when given.
    sub: str | None
    #: The provider session that ends, when given.
    sid: str | None
    #: The token's unique id.
    jti: str
    #: The algorithm it was signed with.
    alg: str
    #: Until when its ``jti`` must be remembered (seconds since the epoch).
    remember_until: float

    def __repr__(self) -> str:
        return (
            f"LogoutClaims(iss={self.iss!r}, sub={self.sub!r},"
            f" sid={'***' if self.sid else None!r}, jti='***', alg={self.alg!r})"
        )


def verify_logout_token(
    source: Source,
    settings: OAuth2Settings,
    options: ProviderOptions,
    token: object,
    metadata: ProviderMetadata,
    *,
    now: float | None = None,
) -> LogoutClaims:
    """Verify a logout token and return what it says.

    :param source: The provider's name and how to fetch its key set.
    :param settings: The provider's settings (its client id).
    :param options: Its ``customProperties`` (ID token algorithms and leeway).
    :param token: The POSTed ``logout_token``.
    :param metadata: The provider's discovery document.
    :param now: The time (default: the clock).
    :raises LogoutTokenError: naming the check that failed, never the token or a claim's value.
    :raises DiscoveryError: when the key set cannot be fetched.
    """
    name = source.provider
    if not isinstance(token, str) or not token or len(token) > MAX_LOGOUT_TOKEN:
        raise LogoutTokenError(name, "logout_token is missing or too long")
    if token.count(".") != 2:  # five parts: an encrypted JWT, which this client never asked for
        raise LogoutTokenError(name, "logout_token is not a signed JWT (JWS compact form)")
    algorithms = allowed_algorithms(options, metadata)
    claims, algorithm = verify_signature(
        source, token, metadata, algorithms, LogoutTokenError, "logout_token"
    )
    return check_logout_claims(name, settings, options, claims, metadata, algorithm, now=now)


def _number(claims: dict[str, Any], claim: str) -> float | None:
    value = claims.get(claim)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(claim)
    return float(value)


def _short_string(claims: dict[str, Any], claim: str) -> str | None:
    value = claims.get(claim)
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > _MAX_CLAIM:
        raise ValueError(claim)
    return value


def check_logout_claims(
    provider: str,
    settings: OAuth2Settings,
    options: ProviderOptions,
    claims: dict[str, Any],
    metadata: ProviderMetadata,
    algorithm: str,
    *,
    now: float | None = None,
) -> LogoutClaims:
    """Check the claims of a logout token whose signature was verified (section 2.6, steps 3
    to 6 and the ``sub``/``sid`` rule of 2.4).

    :raises LogoutTokenError: naming the claim that failed, never its value.
    """
    now = time.time() if now is None else now
    leeway = options.id_token_leeway
    try:
        iat, exp = _number(claims, "iat"), _number(claims, "exp")
        issuer, jti = _short_string(claims, "iss"), _short_string(claims, "jti")
        sub, sid = _short_string(claims, "sub"), _short_string(claims, "sid")
    except ValueError as error:
        raise LogoutTokenError(
            provider, f"logout_token claim {error.args[0]!r} is not valid"
        ) from None
    if issuer is None or issuer != expected_token_issuer(metadata, claims):
        raise LogoutTokenError(provider, "logout_token iss is not the provider's issuer")
    audience = claims.get("aud")
    audiences = [audience] if isinstance(audience, str) else audience
    if not isinstance(audiences, list) or settings.client_id not in audiences:
        raise LogoutTokenError(provider, "logout_token aud does not name this client")
    if iat is None:
        raise LogoutTokenError(provider, "logout_token has no iat")
    if iat > now + leeway:
        raise LogoutTokenError(provider, "logout_token iat is in the future")
    if exp is None and iat < now - leeway:
        raise LogoutTokenError(provider, "logout_token iat is too old (and it has no exp)")
    if exp is not None and exp < now - leeway:
        raise LogoutTokenError(provider, "logout_token has expired (exp)")
    if jti is None:
        raise LogoutTokenError(provider, "logout_token has no jti")
    events = claims.get("events")
    if not isinstance(events, dict) or BACKCHANNEL_LOGOUT_EVENT not in events:
        raise LogoutTokenError(provider, "logout_token events lack the back-channel logout event")
    if not isinstance(events[BACKCHANNEL_LOGOUT_EVENT], dict):
        raise LogoutTokenError(provider, "logout_token's logout event is not a JSON object")
    if "nonce" in claims:
        raise LogoutTokenError(provider, "logout_token carries a nonce (an ID token, not a logout)")
    if sub is None and sid is None:
        raise LogoutTokenError(provider, "logout_token names neither sub nor sid")
    remember_until = (exp if exp is not None else iat) + leeway
    return LogoutClaims(issuer, sub, sid, jti, algorithm, max(remember_until, now + leeway))


# -- the ID token kept for a sign-out ------------------------------------------------------------


def _unverified_part(token: object, index: int) -> Mapping[str, object] | None:
    """Part ``index`` (0: header, 1: claims) of a JWT this app verified already, or ``None``."""
    if not isinstance(token, str) or not token or len(token) > MAX_LOGOUT_TOKEN:
        return None
    if token.count(".") != 2:
        return None
    part = token.split(".")[index]
    try:
        found = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (ValueError, binascii.Error, RecursionError):
        return None
    return found if isinstance(found, Mapping) else None


def header_algorithm(id_token: object) -> str | None:
    """The ``alg`` of a verified ID token's header, or ``None``."""
    header = _unverified_part(id_token, 0)
    alg = None if header is None else header.get("alg")
    return alg if isinstance(alg, str) and 0 < len(alg) <= 16 else None


def sid_of(id_token: str | None) -> str | None:
    """The ``sid`` claim of an ID token this app verified at sign-in and kept, or ``None``.

    The token is not verified again: it is read back from the app's own encrypted store, and
    ``sid`` only becomes a hint that the provider checks itself.
    """
    claims = _unverified_part(id_token, 1)
    sid = None if claims is None else claims.get("sid")
    return sid if isinstance(sid, str) and sid else None
