"""A local stand-in for Sign in with Apple, on a loopback address, built on Authlib's server
classes: what an app's ``apple`` provider meets in production, without an Apple account.

* ``GET /auth/authorize`` approves at once as :attr:`LocalAppleProvider.auto_approve` and
  answers with ``response_mode=form_post``: a page that POSTs ``code``, ``state`` and, on the
  first authorization of a user for a client only, the ``user`` JSON with the name, to the
  app's callback (a cross-site POST when the app is on another site).
* ``POST /auth/token`` authenticates the client only by ``client_secret_post`` with an ES256
  client-secret JWT, verified with the public half of :attr:`LocalAppleProvider.private_key_pem`
  (``kid``, ``iss`` the team id, ``sub`` the client id, ``aud`` the issuer, ``iat``, ``exp``);
  it enforces PKCE when the authorization request sent a challenge, and answers an RS256 ID
  token whose ``email_verified`` and ``is_private_email`` are strings, as Apple's often are.
* ``POST /auth/token`` with ``grant_type=refresh_token`` answers a new access token only, as
  Apple's does (no new refresh token, no ID token).
* ``POST /auth/revoke`` (RFC 7009, authenticated like the token endpoint).
* ``GET /auth/keys`` and ``GET /.well-known/openid-configuration``.

Use in a test::

    with LocalAppleProvider() as apple:
        apple.register_client("com.example.web", ["http://localhost:5000/authenticate/apple"])
        apple.auto_approve = LocalUser.from_name_email("Ada Lovelace", "ada@example.test")
        app.config["SOCIAL_OAUTH2_PROVIDERS"] = {
            "apple": apple.settings_block("com.example.web", "/authenticate/apple")
        }
"""

from __future__ import annotations

import json
import secrets
import string
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, ClassVar, Final
from urllib.parse import parse_qsl, urlsplit

from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import OAuth2Error
from authlib.oauth2.rfc6749.grants import AuthorizationCodeGrant, RefreshTokenGrant
from authlib.oauth2.rfc6750 import BearerTokenGenerator
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oidc.core import OpenIDCode
from flask import Flask, Response, request
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, RSAKey
from markupsafe import escape

from .clock import Clock, system_clock
from .keys import SigningKeys
from .models import AuthorizationCode, Client, IssuedToken, LocalUser, TokenResponse
from .serving import LoopbackServer, is_loopback
from .store import Store

__all__ = ["LocalAppleProvider"]

#: Apple's relay domain: an address there is a private (hidden) e-mail address.
PRIVATE_RELAY_DOMAIN: Final = "privaterelay.appleid.com"
_SCOPE: Final = "name email"
_MAX_SECRET_LIFETIME: Final = 15_777_000  # Apple's limit: six months


def _new_token(**_: Any) -> str:
    return secrets.token_urlsafe(32)


def _apple_id() -> str:
    """A ten-character id like Apple's team and key ids."""
    alphabet = string.ascii_uppercase + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(10))


@dataclass(frozen=True)
class AppleClient(Client):
    """A Services ID whose "secret" is checked as Apple does: a JWT signed with the key."""

    check_secret: Callable[[str, str], bool] = field(default=lambda *_: False, repr=False)

    def check_client_secret(self, client_secret: str) -> bool:
        return self.check_secret(self.client_id, client_secret)


@dataclass(frozen=True)
class CheckedSecret:
    """A client-secret JWT the token endpoint received, and what was wrong with it."""

    header: Mapping[str, Any]
    claims: Mapping[str, Any]
    problem: str | None
    secret: str = field(repr=False)


class LocalAppleProvider:
    """An Apple-like authorization server on a loopback address (see the module docs).

    :param host: A loopback address.
    :param port: The port; ``0`` picks a free one at :meth:`start`.
    :param clock: What codes and client secrets are checked against.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, clock: Clock = system_clock):
        if not is_loopback(host):
            raise ValueError(f"LocalAppleProvider only listens on loopback, not {host!r}.")
        self._host, self._port = host, port
        self._lock = threading.Lock()
        self._serving: LoopbackServer | None = None
        self.clock = clock
        #: The team id and key id of the developer account.
        self.team_id = _apple_id()
        self.key_id = _apple_id()
        self._client_key = ECKey.generate_key("P-256", private=True)
        #: Approve every authorization at once as this user.
        self.auto_approve: LocalUser | None = None
        #: Whether ``is_private_email`` and ``email_verified`` are strings (else booleans).
        self.string_booleans = True
        self.store = Store(clock, code_ttl=60, access_token_ttl=3600, refresh_tokens=True)
        self.keys = SigningKeys()
        self._named: set[tuple[str, str]] = set()
        self._clients: dict[str, AppleClient] = {}
        #: Every client secret the token endpoint checked, oldest first.
        self.checked_secrets: list[CheckedSecret] = []
        #: The form fields of every form-post answer, oldest first.
        self.posted_forms: list[dict[str, str]] = []
        #: Every ID token issued.
        self.id_tokens: list[str] = []
        #: Every token revoked at ``/auth/revoke``.
        self.revoked: list[str] = []
        #: The query of every authorization request.
        self.authorization_requests: list[dict[str, str]] = []
        self.server = _AppleServer(self)
        self.app = _create_app(self)

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> LocalAppleProvider:
        """Serve on a daemon thread; return ``self``."""
        with self._lock:
            self._serving = LoopbackServer(self.app, self._host, self._port)
            self._port = self._serving.port
        return self

    def stop(self) -> None:
        """Stop serving."""
        with self._lock:
            serving, self._serving = self._serving, None
        if serving is not None:
            serving.stop()

    def __enter__(self) -> LocalAppleProvider:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """The base URL, which is also the issuer."""
        return f"http://{self._host}:{self._port}"

    @property
    def issuer(self) -> str:
        """The issuer: :attr:`url`."""
        return self.url

    @property
    def private_key_pem(self) -> str:
        """The developer key (the ``.p8`` file's text): the block's ``clientSecret``."""
        pem: bytes = self._client_key.as_pem(private=True)
        return pem.decode("ascii")

    def settings_block(self, client_id: str, redirect_url: str) -> dict[str, Any]:
        """An ``apple`` configuration block for this server."""
        return {
            "authorizationURL": f"{self.url}/auth/authorize",
            "accessTokenURL": f"{self.url}/auth/token",
            "redirectURL": redirect_url,
            "clientID": client_id,
            "clientSecret": self.private_key_pem,
            "customProperties": {
                "teamID": self.team_id,
                "keyID": self.key_id,
                "issuer": self.issuer,
            },
        }

    def register_client(self, client_id: str, redirect_uris: Sequence[str]) -> None:
        """Register a Services ID with its return URLs."""
        client = AppleClient(
            client_id=client_id,
            client_secret="(an ES256 JWT)",  # noqa: S106 - checked by check_secret
            redirect_uris=tuple(redirect_uris),
            auth_methods=frozenset({"client_secret_post"}),
            scope=_SCOPE,
            refresh_tokens=True,
            check_secret=self._check_secret,
        )
        with self._lock:
            self._clients[client_id] = client

    def client(self, client_id: str) -> AppleClient | None:
        """The registered client ``client_id``."""
        with self._lock:
            return self._clients.get(client_id)

    def forget_names(self) -> None:
        """Send the ``user`` JSON again on the next authorization of each user."""
        with self._lock:
            self._named.clear()

    # -- checks --------------------------------------------------------------------------

    def _check_secret(self, client_id: str, secret: str) -> bool:
        header: dict[str, Any] = {}
        claims: dict[str, Any] = {}
        try:
            token = jwt.decode(secret, self._client_key, algorithms=["ES256"])
            header, claims = dict(token.header), dict(token.claims)
            problem = self._secret_problem(client_id, header, claims)
        except (JoseError, ValueError, TypeError) as error:
            problem = f"not an ES256 JWT signed with the key ({type(error).__name__})"
        with self._lock:
            self.checked_secrets.append(CheckedSecret(header, claims, problem, secret))
        return problem is None

    def _secret_problem(
        self, client_id: str, header: Mapping[str, Any], claims: Mapping[str, Any]
    ) -> str | None:
        now = self.clock()
        issued, expires = claims.get("iat"), claims.get("exp")
        if header.get("kid") != self.key_id:
            return "kid is not the key id"
        if claims.get("iss") != self.team_id:
            return "iss is not the team id"
        if claims.get("sub") != client_id:
            return "sub is not the client id"
        if claims.get("aud") != self.issuer:
            return "aud is not the issuer"
        if not isinstance(issued, int) or not isinstance(expires, int):
            return "iat or exp missing"
        if issued > now + 60 or expires <= now or expires - issued > _MAX_SECRET_LIFETIME:
            return "iat/exp out of range"
        return None

    def first_name_form(self, client_id: str, user: LocalUser) -> str | None:
        """The ``user`` JSON for ``user``'s first authorization for ``client_id``, else None."""
        with self._lock:
            if (client_id, user.sub) in self._named:
                return None
            self._named.add((client_id, user.sub))
        name = {"firstName": user.given_name or user.name, "lastName": user.family_name or ""}
        return json.dumps({"name": name, "email": user.email})

    def id_token_claims(self, user: LocalUser) -> dict[str, Any]:
        """The user's claims in an ID token: ``sub``, ``email`` and Apple's flags."""
        private = user.email.endswith("@" + PRIVATE_RELAY_DOMAIN)
        flags: dict[str, Any] = {"email_verified": True, "is_private_email": private}
        if self.string_booleans:
            flags = {key: "true" if value else "false" for key, value in flags.items()}
        return {
            "sub": user.sub,
            "email": user.email,
            **flags,
            "auth_time": int(self.clock()),
            "nonce_supported": True,
        }


class _AppleServer(AuthorizationServer):  # type: ignore[misc]
    """Authlib's authorization server: the code grant, PKCE when sent, and the ID token."""

    def __init__(self, apple: LocalAppleProvider) -> None:
        super().__init__()
        self.apple = apple
        bearer = BearerTokenGenerator(_new_token, _new_token, apple.store.access_token_ttl)
        self.register_token_generator("default", lambda **kwargs: TokenResponse(bearer(**kwargs)))
        self.register_grant(_CodeGrant, [CodeChallenge(required=False), _AppleIdToken(apple)])
        self.register_grant(_RefreshGrant)
        self.register_endpoint(_Revocation)

    def query_client(self, client_id: str) -> AppleClient | None:
        return self.apple.client(client_id)

    def save_token(self, token: Mapping[str, Any], request: Any) -> None:
        self.apple.store.save_token(token, request)


class _CodeGrant(AuthorizationCodeGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS: ClassVar[list[str]] = ["client_secret_post"]
    server: _AppleServer

    def save_authorization_code(self, code: str, request: Any) -> None:
        self.server.apple.store.save_code(code, request)

    def query_authorization_code(self, code: str, client: Client) -> AuthorizationCode | None:
        return self.server.apple.store.query_code(code, client)

    def delete_authorization_code(self, authorization_code: AuthorizationCode) -> None:
        self.server.apple.store.use_code(authorization_code)

    def authenticate_user(self, authorization_code: AuthorizationCode) -> LocalUser:
        return authorization_code.user


class _RefreshGrant(RefreshTokenGrant):  # type: ignore[misc]
    """Apple's refresh: a new access token only; the refresh token stays valid and no new
    refresh token or ID token is issued."""

    TOKEN_ENDPOINT_AUTH_METHODS: ClassVar[list[str]] = ["client_secret_post"]
    INCLUDE_NEW_REFRESH_TOKEN = False
    server: _AppleServer

    def authenticate_refresh_token(self, refresh_token: str) -> IssuedToken | None:
        return self.server.apple.store.refresh_token(refresh_token)

    def authenticate_user(self, refresh_token: IssuedToken) -> LocalUser:
        return refresh_token.user

    def revoke_old_credential(self, refresh_token: IssuedToken) -> None:
        pass


class _Revocation(RevocationEndpoint):  # type: ignore[misc]
    """Apple's ``/auth/revoke``: a refresh token revokes the whole grant."""

    CLIENT_AUTH_METHODS: ClassVar[list[str]] = ["client_secret_post"]
    server: _AppleServer

    def query_token(self, token_string: str, token_type_hint: str | None) -> IssuedToken | None:
        return self.server.apple.store.find_token(token_string, token_type_hint)

    def revoke_token(self, token: IssuedToken, request: Any) -> None:
        sent = request.form["token"]
        refresh = token.refresh_token is not None and token.refresh_token == sent
        self.server.apple.store.revoke(token, refresh_token=refresh)
        self.server.apple.revoked.append(sent)


class _AppleIdToken(OpenIDCode):  # type: ignore[misc]
    """An ID token with every token answer, as Apple does, whatever the scope."""

    def __init__(self, apple: LocalAppleProvider) -> None:
        super().__init__(require_nonce=False)
        self.apple = apple

    def exists_nonce(self, nonce: str, request: Any) -> bool:
        return False

    def resolve_client_private_key(self, client: Client) -> RSAKey:
        return self.apple.keys.key

    def get_client_algorithm(self, client: Client) -> str:
        return "RS256"

    def get_encode_header(self, client: Client) -> dict[str, Any]:
        return {"alg": "RS256", "kid": self.apple.keys.kid}

    def get_client_claims(self, client: Client) -> dict[str, Any]:
        return {"iss": self.apple.issuer, "aud": client.client_id}

    def generate_user_info(self, user: LocalUser, scope: str) -> dict[str, Any]:
        return self.apple.id_token_claims(user)

    def process_token(self, grant: Any, response: Any) -> Any:
        _, token, _ = response
        id_token = self.apple.keys.finish(self.encode_id_token(token, grant.request))
        self.apple.id_tokens.append(id_token)
        token["id_token"] = id_token
        return token

    def __call__(self, grant: Any) -> None:
        grant.register_hook("after_create_token_response", self.process_token)


def _form_post_page(action: str, fields: Mapping[str, str]) -> Response:
    inputs = "".join(
        f'<input type="hidden" name="{escape(name)}" value="{escape(value)}">'
        for name, value in fields.items()
    )
    page = (
        "<!doctype html><html><head><meta charset='utf-8'><title>Apple (local)</title></head>"
        f'<body><form method="post" action="{escape(action)}">{inputs}</form>'
        "<script>document.forms[0].submit()</script></body></html>"
    )
    return Response(page, mimetype="text/html", headers={"Cache-Control": "no-store"})


def _create_app(apple: LocalAppleProvider) -> Flask:
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = 64 * 1024
    server = apple.server
    token_lock = threading.Lock()

    @app.get("/auth/authorize")
    def authorize() -> Response:
        query = request.args.to_dict()
        apple.authorization_requests.append(query)
        if query.get("response_mode") != "form_post":
            return Response("response_mode must be form_post", 400)
        user = apple.auto_approve
        if user is None:
            return Response("no user to approve as (set auto_approve)", 400)
        try:
            grant = server.get_consent_grant(end_user=user)
        except OAuth2Error as error:
            return Response(f"invalid request: {error.error}", 400)
        answer = server.create_authorization_response(grant=grant, grant_user=user)
        location = urlsplit(answer.headers["Location"])
        fields = dict(parse_qsl(location.query))
        name = apple.first_name_form(grant.client.client_id, user)
        if name is not None:
            fields["user"] = name
        apple.posted_forms.append(dict(fields))
        action = location._replace(query="").geturl()
        return _form_post_page(action, fields)

    @app.post("/auth/token")
    def token() -> Response:
        with token_lock:
            return server.create_token_response()  # type: ignore[no-any-return]

    @app.post("/auth/revoke")
    def revoke() -> Response:
        with token_lock:
            return server.create_endpoint_response("revocation")  # type: ignore[no-any-return]

    @app.get("/auth/keys")
    def keys() -> Response:
        return Response(json.dumps(apple.keys.jwks()), mimetype="application/json")

    @app.get("/.well-known/openid-configuration")
    def discovery() -> Response:
        document = {
            "issuer": apple.issuer,
            "authorization_endpoint": f"{apple.url}/auth/authorize",
            "token_endpoint": f"{apple.url}/auth/token",
            "revocation_endpoint": f"{apple.url}/auth/revoke",
            "jwks_uri": f"{apple.url}/auth/keys",
            "response_types_supported": ["code", "code id_token", "id_token"],
            "response_modes_supported": ["query", "fragment", "form_post"],
            "subject_types_supported": ["pairwise"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "scopes_supported": ["openid", "email", "name"],
            "token_endpoint_auth_methods_supported": ["client_secret_post"],
            "claims_supported": [
                "aud",
                "email",
                "email_verified",
                "exp",
                "iat",
                "is_private_email",
                "iss",
                "nonce",
                "nonce_supported",
                "real_user_status",
                "sub",
            ],
        }
        return Response(json.dumps(document), mimetype="application/json")

    return app
