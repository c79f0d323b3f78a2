"""The local identity provider's memory: registered clients, users, codes and tokens."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Final
from urllib.parse import urlsplit

from .clock import Clock
from .models import AuthorizationCode, Client, IssuedToken, LocalUser

__all__ = ["AUTH_METHODS", "DEFAULT_SCOPE", "Store"]

#: Token-endpoint authentication methods a client may be registered with.
AUTH_METHODS: Final[Mapping[str, frozenset[str]]] = {
    "client_secret_post": frozenset({"client_secret_post"}),
    "client_secret_basic": frozenset({"client_secret_basic"}),
    "any": frozenset({"client_secret_post", "client_secret_basic"}),
}
#: The scope a client may obtain unless registered with another.
DEFAULT_SCOPE: Final = "openid profile email"
_MAX_USED_CODES: Final = 10_000


class Store:
    """Clients, users, codes and tokens, in memory and guarded by one lock, so tests may read
    and change them while the server thread answers requests.

    :param clock: The clock codes and tokens expire by.
    :param code_ttl: Seconds an authorization code stays valid.
    :param access_token_ttl: Seconds an access token stays valid.
    :param refresh_tokens: Whether clients may use the refresh-token grant.
    """

    def __init__(
        self, clock: Clock, *, code_ttl: int, access_token_ttl: int, refresh_tokens: bool
    ) -> None:
        self.clock = clock
        self.code_ttl = code_ttl
        self.access_token_ttl = access_token_ttl
        self.refresh_tokens = refresh_tokens
        self._lock = threading.RLock()
        self._clients: dict[str, Client] = {}
        self._codes: dict[str, AuthorizationCode] = {}
        self._used_codes: dict[str, str] = {}
        self._tokens: dict[str, IssuedToken] = {}
        self._refresh_tokens: dict[str, IssuedToken] = {}
        self._nonces: set[tuple[str, str]] = set()
        self._users: dict[str, LocalUser] = {}

    # -- clients -------------------------------------------------------------------------

    def register_client(
        self,
        client_id: str,
        client_secret: str,
        redirect_uris: Sequence[str],
        token_endpoint_auth_method: str,
        scope: str,
    ) -> None:
        """Register (or replace) a confidential client; see
        :meth:`LocalIdentityProvider.register_client`.

        :raises ValueError: on an empty id or secret, no or bad redirect URIs, or an unknown
            authentication method.
        """
        if not client_id or not client_secret:
            raise ValueError("register_client needs a non-empty client_id and client_secret.")
        if isinstance(redirect_uris, str):
            raise ValueError("redirect_uris must be a sequence of URIs, not one string.")
        if not redirect_uris:
            raise ValueError("register_client needs at least one redirect URI.")
        for uri in redirect_uris:
            parts = urlsplit(uri)
            if (
                not parts.scheme
                or parts.fragment
                or (parts.scheme in ("http", "https") and not parts.netloc)
            ):
                raise ValueError(f"Not an absolute redirect URI without fragment: {uri!r}")
        methods = AUTH_METHODS.get(token_endpoint_auth_method)
        if methods is None:
            raise ValueError(
                f"token_endpoint_auth_method must be one of {sorted(AUTH_METHODS)},"
                f" not {token_endpoint_auth_method!r}."
            )
        client = Client(
            client_id=client_id,
            client_secret=client_secret,
            redirect_uris=tuple(redirect_uris),
            auth_methods=methods,
            scope=" ".join(scope.split()),
            refresh_tokens=self.refresh_tokens,
        )
        with self._lock:
            self._clients[client_id] = client

    def client(self, client_id: str) -> Client | None:
        """The registered client ``client_id``, if any."""
        with self._lock:
            return self._clients.get(client_id)

    def client_ids(self) -> list[str]:
        """The ids of the registered clients, sorted."""
        with self._lock:
            return sorted(self._clients)

    def scopes(self) -> set[str]:
        """Every scope some client may obtain, and the OpenID Connect ones."""
        with self._lock:
            scopes = {"openid", "profile", "email"}
            for client in self._clients.values():
                scopes.update(client.scope.split())
        return scopes

    # -- users and nonces ----------------------------------------------------------------

    def known_user(self, sub: str) -> LocalUser | None:
        """A user who was issued a code, by ``sub``."""
        with self._lock:
            return self._users.get(sub)

    def nonce_used(self, client_id: str, nonce: str) -> bool:
        """Whether ``client_id`` already sent ``nonce`` in an approved request."""
        with self._lock:
            return (client_id, nonce) in self._nonces

    # -- codes ---------------------------------------------------------------------------

    def save_code(self, code: str, oauth_request: Any) -> None:
        """Keep a code Authlib issued for ``oauth_request`` (an approved authorization)."""
        data = oauth_request.payload.data
        user: LocalUser = oauth_request.user
        now = self.clock()
        record = AuthorizationCode(
            code=code,
            client_id=oauth_request.client.client_id,
            redirect_uri=oauth_request.payload.redirect_uri,
            scope=oauth_request.scope or "",
            user=user,
            code_challenge=data.get("code_challenge"),
            code_challenge_method=data.get("code_challenge_method"),
            nonce=data.get("nonce") or None,
            auth_time=int(now),
            expires_at=now + self.code_ttl,
            grant_id=secrets.token_hex(8),
            clock=self.clock,
        )
        with self._lock:
            for stale in [c for c, r in self._codes.items() if r.is_expired()]:
                del self._codes[stale]
            self._codes[code] = record
            self._users[user.sub] = user
            if record.nonce:
                self._nonces.add((record.client_id, record.nonce))

    def query_code(self, code: str, client: Client) -> AuthorizationCode | None:
        """The unexpired, unused code ``code`` of ``client``; a code presented again revokes
        the tokens it gave (RFC 6749 4.1.2)."""
        with self._lock:
            grant_id = self._used_codes.get(code)
            if grant_id is not None:
                for record in self._tokens.values():
                    if record.grant_id == grant_id:
                        record.access_revoked = record.refresh_revoked = True
                return None
            authorization_code = self._codes.get(code)
            if authorization_code is None or authorization_code.client_id != client.client_id:
                return None
            if authorization_code.is_expired():
                del self._codes[code]
                return None
            return authorization_code

    def use_code(self, authorization_code: AuthorizationCode) -> None:
        """Spend a code: it never works again."""
        with self._lock:
            self._codes.pop(authorization_code.code, None)
            self._used_codes[authorization_code.code] = authorization_code.grant_id
            while len(self._used_codes) > _MAX_USED_CODES:
                del self._used_codes[next(iter(self._used_codes))]

    # -- tokens --------------------------------------------------------------------------

    def save_token(self, token: Mapping[str, Any], oauth_request: Any) -> None:
        """Keep a token response Authlib issued for ``oauth_request``."""
        source = oauth_request.authorization_code or oauth_request.refresh_token
        expires_in = int(token.get("expires_in", self.access_token_ttl))
        record = IssuedToken(
            access_token=token["access_token"],
            refresh_token=token.get("refresh_token"),
            client_id=oauth_request.client.client_id,
            user=oauth_request.user,
            scope=token.get("scope", ""),
            expires_in=expires_in,
            expires_at=self.clock() + expires_in,
            grant_id=source.grant_id if source is not None else secrets.token_hex(8),
            clock=self.clock,
        )
        with self._lock:
            self._tokens[record.access_token] = record
            if record.refresh_token:
                self._refresh_tokens[record.refresh_token] = record

    def access_token(self, access_token: str) -> IssuedToken | None:
        """The record of an issued access token (expired or revoked ones too)."""
        with self._lock:
            return self._tokens.get(access_token)

    def refresh_token(self, refresh_token: str) -> IssuedToken | None:
        """The record of a refresh token that still works."""
        with self._lock:
            record = self._refresh_tokens.get(refresh_token)
            if record is None or record.refresh_revoked:
                return None
            return record

    def find_token(self, token: str, hint: str | None) -> IssuedToken | None:
        """The record of an access or refresh token, looked up first as ``hint`` says
        (RFC 7009 2.1: a wrong hint only changes the order)."""
        with self._lock:
            if hint == "refresh_token":
                return self._refresh_tokens.get(token) or self._tokens.get(token)
            return self._tokens.get(token) or self._refresh_tokens.get(token)

    def revoke(self, record: IssuedToken, *, refresh_token: bool) -> None:
        """RFC 7009 revocation: an access token alone, or a refresh token together with every
        token of its grant (2.1: its access tokens too)."""
        with self._lock:
            if not refresh_token:
                record.access_revoked = True
                return
            for other in self._tokens.values():
                if other.grant_id == record.grant_id:
                    other.access_revoked = other.refresh_revoked = True

    def revoke_refresh_token(self, record: IssuedToken) -> None:
        """Revoke one refresh token (after it was rotated)."""
        with self._lock:
            record.refresh_revoked = True

    def revoke_refresh_tokens(self) -> None:
        """Revoke every refresh token issued so far."""
        with self._lock:
            for record in self._refresh_tokens.values():
                record.refresh_revoked = True

    def revoke_access_tokens(self) -> None:
        """Revoke every access token issued so far."""
        with self._lock:
            for record in self._tokens.values():
                record.access_revoked = True
