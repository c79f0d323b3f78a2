"""What the local identity provider knows: users, clients, codes and tokens, shaped as
Authlib's server classes expect them."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import quote

from authlib.oidc.core import UserInfo

from .clock import Clock

__all__ = [
    "AuthorizationCode",
    "Client",
    "IdTokenSigning",
    "IdTokenTamper",
    "IssuedToken",
    "LocalUser",
    "TokenFailure",
    "user_claims",
]

#: The ways :meth:`LocalIdentityProvider.fail_next_token` can answer badly.
TokenFailure = Literal["server_error", "invalid_grant", "no_access_token", "html", "error_in_200"]
#: Which key signs ID tokens, see :attr:`LocalIdentityProvider.sign_id_token_with`.
IdTokenSigning = Literal["key", "other_key", "none"]
#: ``(header, claims) -> (header, claims)``, applied to an ID token before signing.
IdTokenTamper = Callable[[dict[str, Any], dict[str, Any]], tuple[dict[str, Any], dict[str, Any]]]


@dataclass(frozen=True)
class LocalUser:
    """A user of the local identity provider.

    :param sub: the stable subject identifier, the user's id at this provider.
    :param name: the full name.
    :param email: the e-mail address (reported as verified).
    :param given_name: the first name, if known.
    :param family_name: the last name, if known.
    :param picture: an avatar URL; when ``None`` the provider serves a generated
        initials avatar at ``/avatar/<sub>.svg`` and reports that URL.
    """

    sub: str
    name: str
    email: str
    given_name: str | None = None
    family_name: str | None = None
    picture: str | None = None

    @classmethod
    def from_name_email(cls, name: str, email: str) -> LocalUser:
        """Build a user from a display name and an e-mail address.

        The ``sub`` is the first 16 hex digits of the SHA-256 of the lower-cased
        e-mail, so the same address always gives the same user. The name is split
        at the first space into ``given_name`` and ``family_name``.

        :param name: the full name, e.g. ``"Ada Lovelace"``.
        :param email: the e-mail address, e.g. ``"ada@example.test"``.
        :raises ValueError: if the name or the e-mail is empty.
        """
        name = " ".join(name.split())
        email = email.strip()
        if not name:
            raise ValueError("LocalUser needs a non-empty name.")
        if not email:
            raise ValueError("LocalUser needs a non-empty email.")
        sub = hashlib.sha256(email.lower().encode("utf-8")).hexdigest()[:16]
        given, _, family = name.partition(" ")
        return cls(
            sub=sub,
            name=name,
            email=email,
            given_name=given,
            family_name=family or None,
        )

    def claims(self) -> dict[str, Any]:
        """Return the user's OpenID Connect standard claims.

        Claims whose value is ``None`` are left out, as OpenID Connect asks.
        """
        claims: dict[str, Any] = {
            "sub": self.sub,
            "name": self.name,
            "given_name": self.given_name,
            "family_name": self.family_name,
            "email": self.email,
            "email_verified": True,
            "picture": self.picture,
            "preferred_username": self.email.partition("@")[0] or None,
        }
        return {key: value for key, value in claims.items() if value is not None}


def user_claims(user: LocalUser, scope: str, issuer: str) -> dict[str, Any]:
    """The claims of ``user`` that ``scope`` grants, as userinfo and the ID token carry them;
    a user without a picture gets the provider's initials avatar."""
    claims = user.claims()
    if user.picture is None:
        claims["picture"] = f"{issuer}/avatar/{quote(user.sub, safe='')}.svg"
    filtered: dict[str, Any] = dict(UserInfo(claims).filter(scope))
    filtered["sub"] = user.sub
    return filtered


class TokenResponse(dict[str, Any]):
    """A token response whose ``repr`` hides its values.

    Authlib logs ``"Issue token %r"`` at DEBUG; this keeps tokens out of that line.
    """

    def __repr__(self) -> str:
        return f"<token response with {sorted(self)}>"


@dataclass(frozen=True)
class Client:
    """A registered client, shaped like Authlib's ``ClientMixin``."""

    client_id: str
    client_secret: str = field(repr=False)
    redirect_uris: tuple[str, ...]
    auth_methods: frozenset[str]
    scope: str
    refresh_tokens: bool

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str | None:
        # No default: every authorization request must name its redirect_uri,
        # so that the token request can be checked against it.
        return None

    def get_allowed_scope(self, scope: str | None) -> str:
        allowed = self.scope.split()
        if not scope:
            return self.scope
        requested = list(dict.fromkeys(scope.split()))
        return " ".join(s for s in requested if s in allowed)

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return redirect_uri in self.redirect_uris

    def check_client_secret(self, client_secret: str) -> bool:
        return hmac.compare_digest(
            self.client_secret.encode("utf-8"), client_secret.encode("utf-8")
        )

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        if endpoint in ("token", "revocation"):
            return method in self.auth_methods
        return True

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        if grant_type == "refresh_token":
            return self.refresh_tokens
        return grant_type == "authorization_code"


@dataclass(eq=False)
class AuthorizationCode:
    """An issued authorization code, shaped like Authlib's ``AuthorizationCodeMixin``."""

    code: str = field(repr=False)
    client_id: str
    redirect_uri: str
    scope: str
    user: LocalUser
    code_challenge: str
    code_challenge_method: str
    nonce: str | None = field(repr=False)
    auth_time: int
    expires_at: float
    grant_id: str
    clock: Clock = field(repr=False)

    def get_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope

    def get_nonce(self) -> str | None:
        return self.nonce

    def get_auth_time(self) -> int:
        return self.auth_time

    def get_acr(self) -> str | None:
        return None

    def get_amr(self) -> list[str] | None:
        return None

    def is_expired(self) -> bool:
        return self.clock() >= self.expires_at


@dataclass(eq=False)
class IssuedToken:
    """An issued access token (and its refresh token), shaped like ``TokenMixin``."""

    access_token: str = field(repr=False)
    refresh_token: str | None = field(repr=False)
    client_id: str
    user: LocalUser
    scope: str
    expires_in: int
    expires_at: float
    grant_id: str
    clock: Clock = field(repr=False)
    access_revoked: bool = False
    refresh_revoked: bool = False

    def check_client(self, client: Client) -> bool:
        return self.client_id == client.client_id

    def get_scope(self) -> str:
        return self.scope

    def get_expires_in(self) -> int:
        return self.expires_in

    def is_expired(self) -> bool:
        return self.clock() >= self.expires_at

    def is_revoked(self) -> bool:
        return self.access_revoked

    def get_user(self) -> LocalUser:
        return self.user
