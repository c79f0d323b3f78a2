"""The local identity provider: an OAuth 2.0 / OpenID Connect authorization server on a
loopback address, its knobs and its records."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Final

from authlib.oidc.discovery import OpenIDProviderMetadata
from flask import Flask

from .app import create_idp_app
from .clock import Clock, system_clock
from .keys import SigningKeys
from .models import IdTokenSigning, IdTokenTamper, LocalUser, TokenFailure
from .records import NextAnswers, RecordedTokenRequest, Records
from .server import LocalAuthorizationServer
from .serving import LoopbackServer, is_loopback
from .store import DEFAULT_SCOPE, Store

__all__ = ["LocalIdentityProvider"]

log = logging.getLogger("flask_social_oauth2.local_idp")

_SUPPORTED_CLAIMS: Final = (
    "sub",
    "name",
    "given_name",
    "family_name",
    "email",
    "email_verified",
    "picture",
    "preferred_username",
)


class LocalIdentityProvider:
    """An OAuth 2.0 / OpenID Connect authorization server on a loopback address.

    Everything is kept in memory and guarded by a lock, so tests may read the
    records and change the knobs while the server thread answers requests.

    :param host: the loopback address to listen on: ``127.0.0.0/8``, ``::1``
        or ``localhost``.
    :param port: the port; ``0`` picks a free one at :meth:`start`.
    :param code_ttl: seconds an authorization code stays valid.
    :param access_token_ttl: seconds an access token stays valid (``expires_in``).
    :param issue_refresh_tokens: issue refresh tokens (rotated on each use).
    :param iss_parameter: add ``iss`` to authorization responses (RFC 9207) and
        announce it in the discovery document.
    :param clock: what codes and tokens expire by (seconds since the epoch); a
        :class:`~flask_social_oauth2.local_idp.ManualClock` lets a test move time on
        instead of sleeping.
    :raises ValueError: if ``host`` is not loopback or a number is out of range.

    .. attribute:: app

        The Flask application serving the endpoints (see :func:`create_idp_app`).

    .. attribute:: auto_approve

        When set to a :class:`LocalUser`, ``GET /authorize`` approves at once
        for that user and redirects back with a code; no page is shown.

    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        code_ttl: int = 60,
        access_token_ttl: int = 3600,
        issue_refresh_tokens: bool = True,
        iss_parameter: bool = False,
        clock: Clock = system_clock,
    ) -> None:
        if not is_loopback(host):
            raise ValueError(
                f"LocalIdentityProvider only listens on loopback (127.0.0.0/8, ::1 or"
                f" localhost), not {host!r}: it is a development tool with no TLS."
            )
        if not 0 <= port <= 65535:
            raise ValueError(f"port must be between 0 and 65535, not {port}.")
        if code_ttl <= 0 or access_token_ttl <= 0:
            raise ValueError("code_ttl and access_token_ttl must be positive.")
        self._host = host.strip().strip("[]")
        self._port = port
        self._iss_parameter = iss_parameter
        self._lock = threading.Lock()
        self._serving: LoopbackServer | None = None
        self._bound_port: int | None = None
        self._started = False

        self.auto_approve: LocalUser | None = None
        #: Clients, users, codes and tokens.
        self.store = Store(
            clock,
            code_ttl=code_ttl,
            access_token_ttl=access_token_ttl,
            refresh_tokens=issue_refresh_tokens,
        )
        #: The requests received, for tests.
        self.records = Records()
        #: Faults asked for with :meth:`deny_next` and :meth:`fail_next_token`.
        self.next_answers = NextAnswers()
        #: The ID-token signing keys.
        self.keys = SigningKeys()
        #: Authlib's authorization server over :attr:`store` and :attr:`keys`.
        self.authorization_server = LocalAuthorizationServer(
            self.store, self.keys, lambda: self.issuer, iss_parameter=iss_parameter
        )
        self.app: Flask = create_idp_app(self)

    # -- ID-token knobs --------------------------------------------------------------

    @property
    def id_token_tamper(self) -> IdTokenTamper | None:
        """An :data:`IdTokenTamper` applied to the ID token's header and claims
        just before signing, to test a client's ID-token verification."""
        return self.keys.tamper

    @id_token_tamper.setter
    def id_token_tamper(self, tamper: IdTokenTamper | None) -> None:
        self.keys.tamper = tamper

    @property
    def sign_id_token_with(self) -> IdTokenSigning:
        """Which key signs ID tokens.

        ``"key"`` (default: the published key), ``"other_key"`` (an unpublished
        key carrying the published ``kid``) or ``"none"`` (an unsigned token,
        ``alg: none``). With ``"key"`` or ``"other_key"`` the header's ``alg``
        (possibly changed by :attr:`id_token_tamper`) must be an RSA algorithm.

        :raises ValueError: when set to anything else.
        """
        return self.keys.signing

    @sign_id_token_with.setter
    def sign_id_token_with(self, value: IdTokenSigning) -> None:
        self.keys.signing = value

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> LocalIdentityProvider:
        """Listen and serve on a daemon thread; return ``self``.

        :raises RuntimeError: if the provider was already started.
        :raises OSError: if the address cannot be bound (e.g. the port is taken).
        """
        with self._lock:
            if self._started:
                raise RuntimeError("This LocalIdentityProvider was already started.")
            self._serving = LoopbackServer(self.app, self._host, self._port)
            self._bound_port = self._serving.port
            self._started = True
        log.info("Local identity provider listening on %s", self.url)
        return self

    def stop(self) -> None:
        """Stop serving and wait for the server thread. Calling it again is harmless."""
        with self._lock:
            serving, self._serving = self._serving, None
        if serving is not None:
            serving.stop()

    @property
    def running(self) -> bool:
        """Whether the server thread is serving."""
        with self._lock:
            return self._serving is not None

    def __enter__(self) -> LocalIdentityProvider:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = self.url if self.port else "not started"
        return f"<LocalIdentityProvider {where} clients={self.store.client_ids()}>"

    # -- addresses ----------------------------------------------------------------

    @property
    def host(self) -> str:
        """The loopback host it listens on."""
        return self._host

    @property
    def port(self) -> int:
        """The bound port once started, else the configured one (0: not chosen yet)."""
        return self._bound_port or self._port

    @property
    def url(self) -> str:
        """The base URL, e.g. ``http://127.0.0.1:54321``.

        :raises RuntimeError: if the port is 0 and the provider has not started.
        """
        port = self.port
        if not port:
            raise RuntimeError("The LocalIdentityProvider has no address yet: call start() first.")
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{port}"

    @property
    def issuer(self) -> str:
        """The issuer identifier; equal to :attr:`url`."""
        return self.url

    @property
    def authorization_url(self) -> str:
        """The authorization endpoint."""
        return f"{self.url}/authorize"

    @property
    def token_url(self) -> str:
        """The token endpoint."""
        return f"{self.url}/token"

    @property
    def userinfo_url(self) -> str:
        """The userinfo endpoint (the ``apiURL`` of a settings block)."""
        return f"{self.url}/userinfo"

    @property
    def revocation_url(self) -> str:
        """The RFC 7009 revocation endpoint (announced as ``revocation_endpoint``)."""
        return f"{self.url}/revoke"

    @property
    def end_session_url(self) -> str:
        """The OpenID Connect RP-Initiated Logout endpoint (``end_session_endpoint``)."""
        return f"{self.url}/logout"

    def logout_token(
        self, client_id: str, *, sub: str | None = None, sid: str | None = None
    ) -> str:
        """A Back-Channel Logout 1.0 logout token this provider signs for ``client_id``, ending
        the sessions of ``sub`` (or of the session ``sid``), to POST to the app's
        ``<url rule>/backchannel-logout`` as the provider's server would."""
        return self.keys.logout_token(self.issuer, client_id, sub=sub, sid=sid)

    @property
    def api_base_url(self) -> str:
        """The base of the protected API (``customProperties.apiBaseURL``): ``GET me``
        answers the bearer token's user."""
        return f"{self.url}/api/"

    @property
    def jwks_url(self) -> str:
        """The JSON Web Key Set with the ID-token signing key."""
        return f"{self.url}/jwks"

    @property
    def discovery_url(self) -> str:
        """The OpenID Connect discovery document."""
        return f"{self.url}/.well-known/openid-configuration"

    def endpoints(self) -> dict[str, str]:
        """Every address a client needs, by name: discovery, authorization, token,
        userinfo, jwks, revocation, api."""
        return {
            "discovery": self.discovery_url,
            "authorization": self.authorization_url,
            "token": self.token_url,
            "userinfo": self.userinfo_url,
            "jwks": self.jwks_url,
            "revocation": self.revocation_url,
            "api": self.api_base_url,
        }

    @property
    def jwks(self) -> dict[str, Any]:
        """The public JWKS, as served at :attr:`jwks_url`."""
        return self.keys.jwks()

    def metadata(self) -> dict[str, Any]:
        """Return the discovery document (validated with Authlib's
        ``OpenIDProviderMetadata``)."""
        grant_types = ["authorization_code"]
        if self.store.refresh_tokens:
            grant_types.append("refresh_token")
        metadata = OpenIDProviderMetadata(
            issuer=self.issuer,
            authorization_endpoint=self.authorization_url,
            token_endpoint=self.token_url,
            userinfo_endpoint=self.userinfo_url,
            jwks_uri=self.jwks_url,
            scopes_supported=sorted(self.store.scopes()),
            response_types_supported=["code"],
            response_modes_supported=["query"],
            grant_types_supported=grant_types,
            subject_types_supported=["public"],
            id_token_signing_alg_values_supported=["RS256"],
            token_endpoint_auth_methods_supported=[
                "client_secret_basic",
                "client_secret_post",
            ],
            code_challenge_methods_supported=["S256"],
            revocation_endpoint=self.revocation_url,
            revocation_endpoint_auth_methods_supported=[
                "client_secret_basic",
                "client_secret_post",
            ],
            claims_supported=sorted(_SUPPORTED_CLAIMS),
        )
        metadata["end_session_endpoint"] = self.end_session_url
        metadata["backchannel_logout_supported"] = True
        if self._iss_parameter:
            metadata["authorization_response_iss_parameter_supported"] = True
        metadata.validate()
        return dict(metadata)

    def settings_block(
        self,
        client_id: str,
        client_secret: str,
        redirect_url: str,
        scope: str = DEFAULT_SCOPE,
    ) -> dict[str, str]:
        """Return a provider configuration block (the spec's camelCase keys).

        :param client_id: the ``clientID``.
        :param client_secret: the ``clientSecret``.
        :param redirect_url: the ``redirectURL``, absolute or a path.
        :param scope: the ``scope``.
        """
        return {
            "authorizationURL": self.authorization_url,
            "accessTokenURL": self.token_url,
            "redirectURL": redirect_url,
            "apiURL": self.userinfo_url,
            "clientID": client_id,
            "clientSecret": client_secret,
            "scope": scope,
        }

    # -- configuration ------------------------------------------------------------

    def register_client(
        self,
        client_id: str,
        client_secret: str,
        redirect_uris: Sequence[str],
        *,
        token_endpoint_auth_method: str = "client_secret_post",  # noqa: S107 - a method name
        scope: str = DEFAULT_SCOPE,
    ) -> None:
        """Register (or replace) a confidential client.

        :param client_id: the client identifier.
        :param client_secret: the client secret.
        :param redirect_uris: the exact redirect URIs the client may use.
        :param token_endpoint_auth_method: ``"client_secret_post"``,
            ``"client_secret_basic"`` or ``"any"`` (both accepted).
        :param scope: the scopes the client may obtain, separated by spaces; a
            request without ``scope`` gets all of them.
        :raises ValueError: on an empty id or secret, no or bad redirect URIs, or
            an unknown authentication method.
        """
        self.store.register_client(
            client_id, client_secret, redirect_uris, token_endpoint_auth_method, scope
        )

    def deny_next(self, error: str = "access_denied", description: str | None = None) -> None:
        """Make the next valid authorization request redirect back with ``error``.

        :param error: the ``error`` code, e.g. ``"access_denied"``.
        :param description: an optional ``error_description``.
        :raises ValueError: if either holds characters RFC 6749 forbids there.
        """
        self.next_answers.deny(error, description)

    def fail_next_token(self, kind: TokenFailure | str) -> None:
        """Make the next token request answer badly.

        :param kind: ``"server_error"`` (HTTP 500 with a JSON error),
            ``"invalid_grant"`` (HTTP 400 OAuth error), ``"no_access_token"``
            (HTTP 200 JSON without ``access_token``), ``"html"`` (HTTP 200
            ``text/html`` page) or ``"error_in_200"`` (HTTP 200 JSON
            ``{"error": "bad_verification_code"}``, as GitHub answers).
        :raises ValueError: for an unknown kind.
        """
        self.next_answers.fail_token(kind)

    def rotate_signing_key(self, *, keep_old: bool = False) -> str:
        """Sign ID tokens from now on with a new key (and a new ``kid``), published in the JWKS.

        :param keep_old: keep publishing the previous key too, as providers do while tokens
            signed with it may still be in use.
        :return: the new key's ``kid``.
        """
        return self.keys.rotate(keep_old=keep_old)

    def revoke_refresh_tokens(self) -> None:
        """Revoke every refresh token issued so far."""
        self.store.revoke_refresh_tokens()

    def revoke_access_tokens(self) -> None:
        """Revoke every access token issued so far (userinfo then answers 401)."""
        self.store.revoke_access_tokens()

    # -- records ------------------------------------------------------------------

    @property
    def authorization_requests(self) -> list[dict[str, str]]:
        """A copy of the query of every ``GET /authorize`` (first value of each key)."""
        return self.records.authorization()

    @property
    def token_requests(self) -> list[RecordedTokenRequest]:
        """A copy of the list of token requests received, oldest first."""
        return self.records.token()

    @property
    def userinfo_requests(self) -> list[dict[str, str]]:
        """A copy of the headers of every userinfo request."""
        return self.records.userinfo()

    @property
    def revocation_requests(self) -> list[RecordedTokenRequest]:
        """A copy of the list of revocation requests received, oldest first."""
        return self.records.revocation()

    @property
    def logout_requests(self) -> list[dict[str, str]]:
        """A copy of the query of each RP-initiated logout request received, oldest first."""
        return self.records.logout()

    @property
    def api_requests(self) -> list[dict[str, str]]:
        """A copy of the headers of every request to the protected API."""
        return self.records.api()

    @property
    def jwks_requests(self) -> int:
        """How many times the JWKS was fetched."""
        return self.records.documents("jwks")

    @property
    def discovery_requests(self) -> int:
        """How many times the discovery document was fetched."""
        return self.records.documents("discovery")

    def reset_records(self) -> None:
        """Forget the recorded requests (clients, codes and tokens stay)."""
        self.records.clear()
