"""Authlib's authorization server classes, wired to the local identity provider's store and
keys: the code grant with mandatory S256 PKCE, OpenID Connect, refresh tokens, RFC 9207."""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import InvalidRequestError
from authlib.oauth2.rfc6749.grants import AuthorizationCodeGrant, RefreshTokenGrant
from authlib.oauth2.rfc6750 import BearerTokenGenerator, BearerTokenValidator
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oauth2.rfc7636.challenge import compare_s256_code_challenge
from authlib.oauth2.rfc9207 import IssuerParameter
from authlib.oidc.core import OpenIDCode
from flask import Response
from joserfc.jwk import RSAKey

from .keys import SigningKeys
from .models import AuthorizationCode, Client, IssuedToken, LocalUser, TokenResponse, user_claims
from .store import Store

__all__ = ["BearerValidator", "LocalAuthorizationServer"]

_CLIENT_AUTH_METHODS: list[str] = ["client_secret_basic", "client_secret_post"]


def _new_secret_token(**_: Any) -> str:
    """Generate an access or refresh token (Authlib's generator signature)."""
    return secrets.token_urlsafe(32)


class LocalAuthorizationServer(AuthorizationServer):  # type: ignore[misc]
    """Authlib's Flask authorization server over a :class:`Store` and :class:`SigningKeys`.

    :param store: Clients, codes and tokens.
    :param keys: The ID-token signing keys.
    :param issuer: Gives the issuer identifier (known once the server listens).
    :param iss_parameter: Add ``iss`` to authorization responses (RFC 9207).
    """

    def __init__(
        self,
        store: Store,
        keys: SigningKeys,
        issuer: Callable[[], str],
        *,
        iss_parameter: bool,
    ) -> None:
        super().__init__()
        self.store = store
        self.keys = keys
        self.issuer = issuer
        bearer = BearerTokenGenerator(
            _new_secret_token,
            _new_secret_token if store.refresh_tokens else None,
            store.access_token_ttl,
        )

        def generate_token(**kwargs: Any) -> TokenResponse:
            return TokenResponse(bearer(**kwargs))

        self.register_token_generator("default", generate_token)
        self.register_grant(_CodeGrant, [_S256Challenge(required=True), _OpenIDCode(self)])
        if store.refresh_tokens:
            self.register_grant(_RefreshGrant)
        self.register_endpoint(_Revocation)
        self.issuer_parameter = _IssuerParameter(issuer) if iss_parameter else None
        if self.issuer_parameter is not None:
            self.register_extension(self.issuer_parameter)

    def query_client(self, client_id: str) -> Client | None:
        return self.store.client(client_id)

    def save_token(self, token: Mapping[str, Any], request: Any) -> None:
        self.store.save_token(token, request)

    def with_issuer(self, response: Response) -> Response:
        """Add ``iss`` to an authorization response's redirect when RFC 9207 is on."""
        if self.issuer_parameter is not None:
            self.issuer_parameter.add_issuer_parameter(self, response)
        return response

    def error_response(self, description: str) -> Response:
        """An ``invalid_request`` answer of the token endpoint."""
        error = InvalidRequestError(description)
        return self.handle_error_response(None, error)  # type: ignore[no-any-return]


class _CodeGrant(AuthorizationCodeGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS: ClassVar[list[str]] = _CLIENT_AUTH_METHODS
    server: LocalAuthorizationServer

    def save_authorization_code(self, code: str, request: Any) -> None:
        self.server.store.save_code(code, request)

    def query_authorization_code(self, code: str, client: Client) -> AuthorizationCode | None:
        return self.server.store.query_code(code, client)

    def delete_authorization_code(self, authorization_code: AuthorizationCode) -> None:
        self.server.store.use_code(authorization_code)

    def authenticate_user(self, authorization_code: AuthorizationCode) -> LocalUser:
        return authorization_code.user


class _RefreshGrant(RefreshTokenGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS: ClassVar[list[str]] = _CLIENT_AUTH_METHODS
    INCLUDE_NEW_REFRESH_TOKEN = True
    server: LocalAuthorizationServer

    def authenticate_refresh_token(self, refresh_token: str) -> IssuedToken | None:
        return self.server.store.refresh_token(refresh_token)

    def authenticate_user(self, refresh_token: IssuedToken) -> LocalUser:
        return refresh_token.user

    def revoke_old_credential(self, refresh_token: IssuedToken) -> None:
        self.server.store.revoke_refresh_token(refresh_token)


class _Revocation(RevocationEndpoint):  # type: ignore[misc]
    """Authlib's RFC 7009 revocation endpoint over the store."""

    CLIENT_AUTH_METHODS: ClassVar[list[str]] = _CLIENT_AUTH_METHODS
    server: LocalAuthorizationServer

    def query_token(self, token_string: str, token_type_hint: str | None) -> IssuedToken | None:
        return self.server.store.find_token(token_string, token_type_hint)

    def revoke_token(self, token: IssuedToken, request: Any) -> None:
        refresh = token.refresh_token is not None and hmac.compare_digest(
            token.refresh_token, request.form["token"]
        )
        self.server.store.revoke(token, refresh_token=refresh)


class _S256Challenge(CodeChallenge):  # type: ignore[misc]
    """Authlib's PKCE extension, narrowed to a mandatory S256 challenge."""

    DEFAULT_CODE_CHALLENGE_METHOD = "S256"
    SUPPORTED_CODE_CHALLENGE_METHOD: ClassVar[list[str]] = ["S256"]
    CODE_CHALLENGE_METHODS: ClassVar[dict[str, Callable[[str, str], bool]]] = {
        "S256": compare_s256_code_challenge
    }

    def validate_code_challenge(self, grant: Any, redirect_uri: str) -> None:
        data = grant.request.payload.data
        if not data.get("code_challenge"):
            raise InvalidRequestError("Missing 'code_challenge': PKCE with S256 is required.")
        if data.get("code_challenge_method") != "S256":
            raise InvalidRequestError("Unsupported 'code_challenge_method': only S256 is accepted.")
        super().validate_code_challenge(grant, redirect_uri)


class _OpenIDCode(OpenIDCode):  # type: ignore[misc]
    """Authlib's OpenID Connect extension of the code grant."""

    def __init__(self, server: LocalAuthorizationServer) -> None:
        super().__init__(require_nonce=False)
        self.local = server

    def exists_nonce(self, nonce: str, request: Any) -> bool:
        return self.local.store.nonce_used(request.payload.client_id, nonce)

    def resolve_client_private_key(self, client: Client) -> RSAKey:
        return self.local.keys.key

    def get_client_algorithm(self, client: Client) -> str:
        return "RS256"

    def get_encode_header(self, client: Client) -> dict[str, Any]:
        return {"alg": "RS256", "kid": self.local.keys.kid}

    def get_client_claims(self, client: Client) -> dict[str, Any]:
        return {"iss": self.local.issuer(), "aud": client.client_id}

    def generate_user_info(self, user: LocalUser, scope: str) -> dict[str, Any]:
        return user_claims(user, scope, self.local.issuer())

    def encode_id_token(self, token: Mapping[str, Any], request: Any) -> str:
        signed: str = super().encode_id_token(token, request)
        return self.local.keys.finish(signed)


class _IssuerParameter(IssuerParameter):  # type: ignore[misc]
    """Authlib's RFC 9207 extension: ``iss`` in authorization responses."""

    def __init__(self, issuer: Callable[[], str]) -> None:
        self.issuer = issuer

    def get_issuer(self) -> str:
        return self.issuer()


class BearerValidator(BearerTokenValidator):  # type: ignore[misc]
    """Finds the access token of a userinfo request in the store."""

    def __init__(self, store: Store) -> None:
        super().__init__()
        self.store = store

    def authenticate_token(self, token_string: str) -> IssuedToken | None:
        return self.store.access_token(token_string)
