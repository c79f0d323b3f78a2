"""A local OAuth 2.0 + OpenID Connect identity provider for development and tests.

:class:`LocalIdentityProvider` runs a real authorization server on a loopback
address, built from Authlib's server classes: the authorization code grant with
PKCE (S256 only, mandatory), OpenID Connect ID tokens signed with a fresh RS256
key, refresh tokens, a bearer-protected userinfo endpoint, a JWKS and a discovery
document. It serves three purposes:

* the test suite of this package uses it as "the authorization server" that
  checks what the client sends (PKCE, redirect URI, client authentication,
  single-use codes) and records every request it receives;
* the example application signs a newcomer in with it, with no external account;
* application developers can use it in their own tests.

Typical use in a test::

    from flask_social_oauth2.local_idp import LocalIdentityProvider, LocalUser

    with LocalIdentityProvider() as idp:
        idp.register_client("app", "s3cret", ["http://127.0.0.1:5000/authenticate/local"])
        idp.auto_approve = LocalUser.from_name_email("Ada Lovelace", "ada@example.test")
        app.config["SOCIAL_OAUTH2_PROVIDERS"] = {
            "local": idp.settings_block("app", "s3cret", "/authenticate/local")
        }
        ...

From a shell (foreground, Ctrl-C to stop)::

    python -m flask_social_oauth2.local_idp --client-id app --client-secret s3cret \\
        --redirect-uri http://127.0.0.1:5000/authenticate/local

This module needs Authlib (the ``example`` and ``test`` extras install it); the
package itself never imports it. It is a development tool: it keeps everything in
memory, serves plain HTTP, and refuses to listen on anything but loopback.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import html
import json
import logging
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from email.utils import parseaddr
from types import TracebackType
from typing import Any, ClassVar, Final, Literal, get_args
from urllib.parse import quote, urlsplit

from authlib.integrations.flask_oauth2 import (
    AuthorizationServer,
    ResourceProtector,
)
from authlib.oauth2.base import (
    invalid_error_characters,
)
from authlib.oauth2.rfc6749 import (
    InvalidRequestError,
    OAuth2Error,
)
from authlib.oauth2.rfc6749.grants import (
    AuthorizationCodeGrant,
    RefreshTokenGrant,
)
from authlib.oauth2.rfc6750 import (
    BearerTokenGenerator,
    BearerTokenValidator,
)
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oauth2.rfc7636.challenge import (
    compare_s256_code_challenge,
)
from authlib.oauth2.rfc9207 import IssuerParameter
from authlib.oidc.core import OpenIDCode, UserInfo
from authlib.oidc.discovery import (
    OpenIDProviderMetadata,
)
from flask import Flask, Response, abort, request
from joserfc import jwt
from joserfc.jwk import RSAKey
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from .urls import is_loopback_host

__all__ = [
    "IdTokenSigning",
    "IdTokenTamper",
    "LocalIdentityProvider",
    "LocalUser",
    "RecordedTokenRequest",
    "TokenFailure",
    "create_idp_app",
    "main",
]

log = logging.getLogger(__name__)

#: The ways :meth:`LocalIdentityProvider.fail_next_token` can answer badly.
TokenFailure = Literal["server_error", "invalid_grant", "no_access_token", "html", "error_in_200"]
#: Which key signs ID tokens, see :attr:`LocalIdentityProvider.sign_id_token_with`.
IdTokenSigning = Literal["key", "other_key", "none"]
#: ``(header, claims) -> (header, claims)``, applied to an ID token before signing.
IdTokenTamper = Callable[[dict[str, Any], dict[str, Any]], tuple[dict[str, Any], dict[str, Any]]]

_AUTH_METHODS: Final[Mapping[str, frozenset[str]]] = {
    "client_secret_post": frozenset({"client_secret_post"}),
    "client_secret_basic": frozenset({"client_secret_basic"}),
    "any": frozenset({"client_secret_post", "client_secret_basic"}),
}
_DEFAULT_SCOPE: Final = "openid profile email"
#: Form fields of the consent page that are not OAuth parameters.
_FORM_FIELDS: Final = frozenset({"name", "email", "decision", "csrf_token"})
#: Token-request fields whose values :class:`RecordedTokenRequest` never prints.
_SENSITIVE_FIELDS: Final = frozenset(
    {"client_secret", "code", "code_verifier", "refresh_token", "client_assertion"}
)
_MAX_USED_CODES: Final = 10_000
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
_EMAIL_RE: Final = re.compile(r"[^@\s]{1,64}@[^@\s]{1,190}")
_CONTROL_RE: Final = re.compile(r"[\x00-\x1f\x7f]")
_CSP_SOURCE_RE: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:(//[A-Za-z0-9.\-\[\]:]+)?")


def _is_loopback_host(host: str) -> bool:
    """Tell whether ``host`` names a loopback interface: 127.0.0.0/8, ::1 or localhost."""
    candidate = host.strip()
    if candidate.startswith("[") and candidate.endswith("]"):
        candidate = candidate[1:-1]
    return is_loopback_host(candidate.lower())


def _new_secret_token(**_: Any) -> str:
    """Generate an access or refresh token (Authlib's generator signature)."""
    return secrets.token_urlsafe(32)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


# --------------------------------------------------------------------------- data


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


@dataclass(frozen=True, repr=False)
class RecordedTokenRequest:
    """One request received by the token endpoint.

    Its ``repr`` names the fields and the status but never prints a secret, a
    code, a verifier or a token.

    :param form: the form fields, first value of each.
    :param form_multi: every form field with all its values, in order.
    :param headers: the request headers (Werkzeug's Title-Case names).
    :param status_code: the HTTP status the provider answered with.
    :param query: the query string parameters, if any were sent.
    """

    form: dict[str, str]
    form_multi: dict[str, list[str]]
    headers: dict[str, str]
    status_code: int
    query: dict[str, str] = field(default_factory=dict)

    @property
    def grant_type(self) -> str | None:
        """The ``grant_type`` form field."""
        return self.form.get("grant_type")

    @property
    def auth_method(self) -> str:
        """How the client authenticated: ``client_secret_basic``,
        ``client_secret_post``, ``both`` or ``none``."""
        basic = self.header("Authorization", "").lower().startswith("basic ")
        post = "client_secret" in self.form
        if basic and post:
            return "both"
        if basic:
            return "client_secret_basic"
        if post:
            return "client_secret_post"
        return "none"

    def header(self, name: str, default: str = "") -> str:
        """Return a request header by case-insensitive name."""
        lowered = name.lower()
        for key, value in self.headers.items():
            if key.lower() == lowered:
                return value
        return default

    def __repr__(self) -> str:
        fields = ", ".join(
            f"{key}={'<redacted>' if key in _SENSITIVE_FIELDS else repr(value)}"
            for key, value in self.form.items()
        )
        return (
            f"RecordedTokenRequest(status_code={self.status_code}, "
            f"auth_method={self.auth_method!r}, form={{{fields}}})"
        )


class _TokenResponse(dict[str, Any]):
    """A token response whose ``repr`` hides its values.

    Authlib logs ``"Issue token %r"`` at DEBUG; this keeps tokens out of that line.
    """

    def __repr__(self) -> str:
        return f"<token response with {sorted(self)}>"


@dataclass(frozen=True)
class _Client:
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
        if endpoint == "token":
            return method in self.auth_methods
        return True

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        if grant_type == "refresh_token":
            return self.refresh_tokens
        return grant_type == "authorization_code"


@dataclass(eq=False)
class _AuthorizationCode:
    """An issued authorization code, shaped like Authlib's ``AuthorizationCodeMixin``."""

    code: str = field(repr=False)
    client_id: str
    redirect_uri: str
    scope: str
    user: LocalUser
    code_challenge: str
    code_challenge_method: str
    nonce: str | None
    auth_time: int
    expires_at: float
    grant_id: str

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
        return time.monotonic() >= self.expires_at


@dataclass(eq=False)
class _Token:
    """An issued access token (and its refresh token), shaped like ``TokenMixin``."""

    access_token: str = field(repr=False)
    refresh_token: str | None = field(repr=False)
    client_id: str
    user: LocalUser
    scope: str
    expires_in: int
    expires_at: float
    grant_id: str
    access_revoked: bool = False
    refresh_revoked: bool = False

    def check_client(self, client: _Client) -> bool:
        return self.client_id == client.client_id

    def get_scope(self) -> str:
        return self.scope

    def get_expires_in(self) -> int:
        return self.expires_in

    def is_expired(self) -> bool:
        return time.monotonic() >= self.expires_at

    def is_revoked(self) -> bool:
        return self.access_revoked

    def get_user(self) -> LocalUser:
        return self.user


# ------------------------------------------------------------------ Authlib glue


class _AuthorizationServer(AuthorizationServer):  # type: ignore[misc]
    """Authlib's Flask authorization server, wired to a provider's stores."""

    def __init__(self, provider: LocalIdentityProvider) -> None:
        super().__init__()
        self.provider = provider

    def query_client(self, client_id: str) -> _Client | None:
        return self.provider._get_client(client_id)

    def save_token(self, token: Mapping[str, Any], request: Any) -> None:
        self.provider._save_token(token, request)


class _CodeGrant(AuthorizationCodeGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS: ClassVar[list[str]] = ["client_secret_basic", "client_secret_post"]

    def save_authorization_code(self, code: str, request: Any) -> None:
        self.server.provider._save_code(code, request)

    def query_authorization_code(self, code: str, client: _Client) -> _AuthorizationCode | None:
        return self.server.provider._query_code(code, client)  # type: ignore[no-any-return]

    def delete_authorization_code(self, authorization_code: _AuthorizationCode) -> None:
        self.server.provider._use_code(authorization_code)

    def authenticate_user(self, authorization_code: _AuthorizationCode) -> LocalUser:
        return authorization_code.user


class _RefreshGrant(RefreshTokenGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS: ClassVar[list[str]] = ["client_secret_basic", "client_secret_post"]
    INCLUDE_NEW_REFRESH_TOKEN = True

    def authenticate_refresh_token(self, refresh_token: str) -> _Token | None:
        return self.server.provider._find_refresh_token(refresh_token)  # type: ignore[no-any-return]

    def authenticate_user(self, refresh_token: _Token) -> LocalUser:
        return refresh_token.user

    def revoke_old_credential(self, refresh_token: _Token) -> None:
        self.server.provider._revoke_refresh_token(refresh_token)


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

    def __init__(self, provider: LocalIdentityProvider) -> None:
        super().__init__(require_nonce=False)
        self.provider = provider

    def exists_nonce(self, nonce: str, request: Any) -> bool:
        return self.provider._nonce_used(request.payload.client_id, nonce)

    def resolve_client_private_key(self, client: _Client) -> RSAKey:
        return self.provider._signing_key

    def get_client_algorithm(self, client: _Client) -> str:
        return "RS256"

    def get_encode_header(self, client: _Client) -> dict[str, Any]:
        return {"alg": "RS256", "kid": self.provider._kid}

    def get_client_claims(self, client: _Client) -> dict[str, Any]:
        return {"iss": self.provider.issuer, "aud": client.client_id}

    def generate_user_info(self, user: LocalUser, scope: str) -> dict[str, Any]:
        return self.provider._user_claims(user, scope)

    def encode_id_token(self, token: Mapping[str, Any], request: Any) -> str:
        signed: str = super().encode_id_token(token, request)
        return self.provider._finish_id_token(signed)


class _IssuerParameter(IssuerParameter):  # type: ignore[misc]
    """Authlib's RFC 9207 extension: ``iss`` in authorization responses."""

    def __init__(self, provider: LocalIdentityProvider) -> None:
        self.provider = provider

    def get_issuer(self) -> str:
        return self.provider.issuer


class _BearerValidator(BearerTokenValidator):  # type: ignore[misc]
    def __init__(self, provider: LocalIdentityProvider) -> None:
        super().__init__()
        self.provider = provider

    def authenticate_token(self, token_string: str) -> _Token | None:
        return self.provider._find_access_token(token_string)


# ------------------------------------------------------------------------- pages

_CSS: Final = (
    ":root{color-scheme:light dark;--bg:#f3f4f7;--card:#fff;--fg:#1c2130;"
    "--muted:#5a6273;--accent:#2f5bd3;--border:#d7dbe3;--err:#b42318;--errbg:#fdecea}"
    "@media (prefers-color-scheme:dark){:root{--bg:#121418;--card:#1c1f26;"
    "--fg:#e7e9ee;--muted:#9aa2b1;--accent:#7d9dff;--border:#343946;--err:#ff9b91;"
    "--errbg:#3a1d1b}}"
    "*{box-sizing:border-box}"
    "body{margin:0;min-height:100vh;display:grid;place-items:center;padding:1rem;"
    "background:var(--bg);color:var(--fg);"
    'font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}'
    "main{width:min(27rem,100%);background:var(--card);border:1px solid var(--border);"
    "border-radius:14px;padding:2rem;box-shadow:0 10px 30px rgba(15,20,30,.08)}"
    ".tag{display:inline-block;font-size:.75rem;font-weight:600;letter-spacing:.04em;"
    "text-transform:uppercase;color:var(--accent);margin-bottom:.5rem}"
    "h1{font-size:1.4rem;line-height:1.25;margin:0 0 .5rem}"
    "p{margin:.25rem 0}.muted{color:var(--muted);font-size:.93rem}"
    "code{font:.9em ui-monospace,SFMono-Regular,Menlo,monospace;"
    "overflow-wrap:anywhere}"
    "ul.scopes{display:flex;flex-wrap:wrap;gap:.4rem;list-style:none;padding:0;"
    "margin:.75rem 0 0}"
    "ul.scopes li{border:1px solid var(--border);border-radius:999px;"
    "padding:.1rem .65rem;font-size:.85rem}"
    "label{display:block;font-weight:600;margin:1.1rem 0 .35rem}"
    "input{width:100%;padding:.6rem .75rem;border:1px solid var(--border);"
    "border-radius:8px;background:transparent;color:inherit;font:inherit}"
    "input:focus,button:focus-visible{outline:2px solid var(--accent);"
    "outline-offset:1px}"
    ".actions{display:flex;gap:.75rem;margin-top:1.6rem}"
    "button{flex:1;padding:.65rem 1rem;border-radius:8px;font:inherit;font-weight:600;"
    "cursor:pointer;border:1px solid var(--border);background:transparent;"
    "color:inherit}"
    "button.primary{background:var(--accent);border-color:var(--accent);color:#fff}"
    ".error{background:var(--errbg);color:var(--err);border-radius:8px;"
    "padding:.6rem .8rem;margin:1rem 0 0}"
    ".error+p{margin-top:1rem}"
    "footer{margin-top:1.5rem;font-size:.8rem;color:var(--muted)}"
)
_CSS_HASH: Final = base64.b64encode(hashlib.sha256(_CSS.encode()).digest()).decode()
_PAGE_CSP: Final = (
    f"default-src 'none'; style-src 'sha256-{_CSS_HASH}'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)


def _esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def _page(title: str, body: str) -> str:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{_esc(title)}</title><style>{_CSS}</style></head>"
        f"<body><main>{body}<footer>flask-social-oauth2 local identity provider"
        " &middot; for development and tests only</footer></main></body></html>"
    )


def _html_response(body: str, status: int = 200, *, form_target: str | None = None) -> Response:
    response = Response(body, status=status, mimetype="text/html")
    csp = _PAGE_CSP
    if form_target:
        # Chromium applies form-action to the redirect that follows the POST,
        # so the client's redirect target must be allowed too.
        csp = f"{csp} {form_target}"
    response.headers["Content-Security-Policy"] = csp
    return response


def _csp_origin(uri: str) -> str | None:
    """Return a CSP source expression for ``uri``'s origin, if it can be expressed."""
    parts = urlsplit(uri)
    if not parts.scheme:
        return None
    source = f"{parts.scheme}://{parts.netloc}" if parts.netloc else f"{parts.scheme}:"
    return source if _CSP_SOURCE_RE.fullmatch(source) else None


def _error_page(error: str, description: str | None, status: int = 400) -> Response:
    body = (
        '<span class="tag">Sign-in request refused</span>'
        "<h1>This sign-in request is not valid</h1>"
        f'<p class="error"><code>{_esc(error)}</code>'
        f"{': ' + _esc(description) if description else ''}</p>"
        '<p class="muted">The request was not sent back to the application, '
        "because its client or redirect address could not be verified. "
        "Start the sign-in again from the application.</p>"
    )
    return _html_response(_page("Sign-in request refused", body), status)


def _consent_page(
    *,
    client_id: str,
    redirect_uri: str,
    scope: str,
    hidden: Iterable[tuple[str, str]],
    csrf_token: str,
    name: str = "",
    email: str = "",
    message: str | None = None,
    status: int = 200,
) -> Response:
    target = _csp_origin(redirect_uri)
    host = urlsplit(redirect_uri).netloc or redirect_uri
    scopes = "".join(f"<li>{_esc(s)}</li>" for s in scope.split())
    hidden_inputs = "".join(
        f'<input type="hidden" name="{_esc(k)}" value="{_esc(v)}">' for k, v in hidden
    )
    error = f'<p class="error" role="alert">{_esc(message)}</p>' if message else ""
    body = (
        '<span class="tag">Local identity provider</span>'
        f"<h1>Sign in to <code>{_esc(client_id)}</code></h1>"
        f'<p class="muted">You will be sent back to <code>{_esc(host)}</code>. '
        "No password is needed: pick any name and e-mail address.</p>"
        f"{f'<ul class=scopes>{scopes}</ul>' if scopes else ''}"
        f"{error}"
        '<form method="post" action="/authorize" autocomplete="on">'
        f"{hidden_inputs}"
        f'<input type="hidden" name="csrf_token" value="{_esc(csrf_token)}">'
        '<label for="name">Name</label>'
        '<input id="name" name="name" type="text" autocomplete="name" required '
        f'maxlength="100" value="{_esc(name)}" autofocus>'
        '<label for="email">E-mail</label>'
        '<input id="email" name="email" type="email" autocomplete="email" required '
        f'maxlength="254" value="{_esc(email)}">'
        '<div class="actions">'
        '<button type="submit" id="deny" name="decision" value="deny" '
        "formnovalidate>Deny</button>"
        '<button type="submit" id="approve" name="decision" value="approve" '
        'class="primary">Approve</button>'
        "</div></form>"
    )
    return _html_response(
        _page("Sign in - local identity provider", body), status, form_target=target
    )


def _avatar_svg(user: LocalUser | None, sub: str) -> str:
    if user is not None:
        initials = "".join(part[0] for part in user.name.split()[:2]).upper() or "?"
    else:
        initials = "?"
    hue = int(hashlib.sha256(sub.encode("utf-8")).hexdigest()[:4], 16) % 360
    return (
        '<svg xmlns="http://www.w3.org/2000/svg" width="96" height="96" '
        'viewBox="0 0 96 96" role="img">'
        f'<rect width="96" height="96" rx="48" fill="hsl({hue},55%,45%)"/>'
        '<text x="48" y="50" dominant-baseline="middle" text-anchor="middle" '
        'font-family="system-ui,sans-serif" font-size="38" font-weight="600" '
        f'fill="#fff">{_esc(initials)}</text></svg>'
    )


def _validate_identity(name: str, email: str) -> str | None:
    """Return a message for the user if the form's name or e-mail is not usable."""
    if not name:
        return "Enter a name."
    if len(name) > 100 or _CONTROL_RE.search(name):
        return "The name must be at most 100 printable characters."
    if not email:
        return "Enter an e-mail address."
    if len(email) > 254 or not _EMAIL_RE.fullmatch(email):
        return "Enter an e-mail address such as ada@example.test."
    return None


# ----------------------------------------------------------------------- the app


def create_idp_app(provider: LocalIdentityProvider) -> Flask:
    """Create the Flask application that serves ``provider``'s endpoints.

    :meth:`LocalIdentityProvider.start` serves this application on its own
    thread; call this directly to serve it some other way (for example with
    Flask's test client, or mounted in a larger WSGI app). The issuer is then
    ``http://<host>:<port>`` from the provider's constructor, so give it a
    fixed port.

    Routes: ``GET/POST /authorize``, ``POST /token``, ``GET/POST /userinfo``,
    ``GET /jwks``, ``GET /.well-known/openid-configuration`` (also served as
    ``/.well-known/oauth-authorization-server``), ``GET /avatar/<sub>.svg`` and
    a small index page at ``/``.

    :param provider: the provider whose clients, codes and tokens are served.
    """
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = 64 * 1024
    server = provider._server

    @app.before_request
    def check_host() -> None:
        # Authlib refuses non-loopback http URLs with an exception; refuse a
        # foreign Host header (DNS rebinding, spoofing) cleanly instead.
        hostname = urlsplit(f"//{request.host}").hostname or ""
        if not _is_loopback_host(hostname):
            abort(400, description="This identity provider only answers on loopback.")

    @app.after_request
    def security_headers(response: Response) -> Response:
        response.headers.setdefault("Referrer-Policy", "no-referrer")
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault(
            "Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'"
        )
        if request.path in ("/authorize", "/token", "/userinfo"):
            response.headers["Cache-Control"] = "no-store"
        return response

    @app.get("/")
    def index() -> Response:
        links = "".join(
            f"<li><code>{_esc(label)}</code> {_esc(url)}</li>"
            for label, url in (
                ("discovery", provider.discovery_url),
                ("authorization", provider.authorization_url),
                ("token", provider.token_url),
                ("userinfo", provider.userinfo_url),
                ("jwks", provider.jwks_url),
            )
        )
        body = (
            '<span class="tag">Local identity provider</span>'
            f"<h1>{_esc(provider.issuer)}</h1>"
            f'<ul class="muted">{links}</ul>'
        )
        return _html_response(_page("Local identity provider", body))

    @app.route("/authorize", methods=["GET", "POST"])
    def authorize() -> Response:
        if request.method == "GET":
            provider._record_authorization_request(request.args.to_dict())
            params = [(k, v) for k, v in request.args.items(multi=True) if k not in _FORM_FIELDS]
            end_user = provider.auto_approve
        else:
            if request.query_string:
                return _error_page(
                    "invalid_request", "The consent form must not carry a query string."
                )
            params = [(k, v) for k, v in request.form.items(multi=True) if k not in _FORM_FIELDS]
            end_user = None
            # Before anything else: a form this provider did not render for
            # exactly these parameters (a cross-site POST) changes nothing.
            if not hmac.compare_digest(
                request.form.get("csrf_token", "").encode(),
                provider._csrf_token(params).encode(),
            ):
                return _error_page(
                    "invalid_request",
                    "The consent form was not issued by this provider for this request. "
                    "Start the sign-in again.",
                )

        try:
            grant = server.get_consent_grant(end_user=end_user)
        except OAuth2Error as error:
            if error.redirect_uri:
                return provider._with_issuer(server.handle_error_response(None, error))
            return _error_page(error.error, error.get_error_description())
        except ValueError:
            # Authlib refuses to build an error description containing some
            # characters of the request (quotes, backslashes, non-ASCII).
            return _error_page(
                "invalid_request", "The request contains characters that are not allowed."
            )

        denial = provider._take_denial()
        if denial is not None:
            denied = OAuth2Error(
                error=denial[0],
                description=denial[1],
                state=request.values.get("state"),
                redirect_uri=grant.redirect_uri,
            )
            return provider._with_issuer(server.handle_error_response(None, denied))

        if request.method == "GET":
            if end_user is not None:
                return server.create_authorization_response(  # type: ignore[no-any-return]
                    grant=grant, grant_user=end_user
                )
            login_hint = request.args.get("login_hint", "")
            return _consent_page(
                client_id=grant.client.client_id,
                redirect_uri=grant.redirect_uri,
                scope=grant.request.scope or "",
                hidden=params,
                csrf_token=provider._csrf_token(params),
                email=login_hint if _EMAIL_RE.fullmatch(login_hint) else "",
            )

        decision = request.form.get("decision")
        if decision == "deny":
            return server.create_authorization_response(  # type: ignore[no-any-return]
                grant=grant, grant_user=None
            )
        if decision != "approve":
            return _error_page("invalid_request", "Choose Approve or Deny.")
        name = " ".join(request.form.get("name", "").split())
        email = request.form.get("email", "").strip()
        message = _validate_identity(name, email)
        if message is not None:
            return _consent_page(
                client_id=grant.client.client_id,
                redirect_uri=grant.redirect_uri,
                scope=grant.request.scope or "",
                hidden=params,
                csrf_token=provider._csrf_token(params),
                name=name,
                email=email,
                message=message,
                status=400,
            )
        user = LocalUser.from_name_email(name, email)
        return server.create_authorization_response(  # type: ignore[no-any-return]
            grant=grant, grant_user=user
        )

    @app.post("/token")
    def token() -> Response:
        try:
            with provider._token_lock:
                response = provider._token_response()
        except Exception:
            provider._record_token_request(500)
            raise
        provider._record_token_request(response.status_code)
        return response

    protector = ResourceProtector()
    protector.register_token_validator(_BearerValidator(provider))

    @app.route("/userinfo", methods=["GET", "POST"])
    def userinfo() -> Response:
        provider._record_userinfo_request(dict(request.headers))
        with protector.acquire() as current:
            claims = provider._user_claims(current.user, current.scope)
        return Response(json.dumps(claims), mimetype="application/json")

    @app.get("/jwks")
    def jwks() -> Response:
        provider._count_document_request("jwks")
        return Response(json.dumps(provider.jwks), mimetype="application/json")

    @app.get("/.well-known/openid-configuration")
    @app.get("/.well-known/oauth-authorization-server")
    def discovery() -> Response:
        provider._count_document_request("discovery")
        return Response(json.dumps(provider.metadata()), mimetype="application/json")

    @app.get("/avatar/<sub>.svg")
    def avatar(sub: str) -> Response:
        response = Response(_avatar_svg(provider._known_user(sub), sub), mimetype="image/svg+xml")
        response.headers["Content-Security-Policy"] = "default-src 'none'"
        response.headers["Cross-Origin-Resource-Policy"] = "cross-origin"
        return response

    return app


class _RequestHandler(WSGIRequestHandler):
    """Werkzeug's handler, logging at DEBUG without query strings."""

    # One request per connection, so that stop() leaves nothing behind.
    protocol_version = "HTTP/1.0"

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        path = getattr(self, "path", "").partition("?")[0]
        log.debug("%s %s -> %s", getattr(self, "command", "-"), path, code)

    def log(self, type: str, message: str, *args: Any) -> None:
        log.debug("local identity provider %s: " + message, type, *args)


# ------------------------------------------------------------------ the provider


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
    :raises ValueError: if ``host`` is not loopback or a number is out of range.

    .. attribute:: app

        The Flask application serving the endpoints (see :func:`create_idp_app`).

    .. attribute:: auto_approve

        When set to a :class:`LocalUser`, ``GET /authorize`` approves at once
        for that user and redirects back with a code; no page is shown.

    .. attribute:: id_token_tamper

        An :data:`IdTokenTamper` applied to the ID token's header and claims
        just before signing, to test a client's ID-token verification.

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
    ) -> None:
        if not _is_loopback_host(host):
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
        self._code_ttl = code_ttl
        self._access_token_ttl = access_token_ttl
        self._issue_refresh_tokens = issue_refresh_tokens
        self._iss_parameter = iss_parameter

        self.auto_approve: LocalUser | None = None
        self.id_token_tamper: IdTokenTamper | None = None
        self._sign_id_token_with: IdTokenSigning = "key"  # noqa: S105 - a key choice

        self._lock = threading.RLock()
        # Token requests are handled one at a time, so that checking and
        # spending a code or a refresh token cannot race.
        self._token_lock = threading.Lock()
        self._clients: dict[str, _Client] = {}
        self._codes: dict[str, _AuthorizationCode] = {}
        self._used_codes: dict[str, str] = {}
        self._tokens: dict[str, _Token] = {}
        self._refresh_tokens: dict[str, _Token] = {}
        self._nonces: set[tuple[str, str]] = set()
        self._users: dict[str, LocalUser] = {}
        self._denial: tuple[str, str | None] | None = None
        self._token_failure: TokenFailure | None = None
        self._authorization_requests: list[dict[str, str]] = []
        self._token_requests: list[RecordedTokenRequest] = []
        self._userinfo_requests: list[dict[str, str]] = []
        self._document_requests: dict[str, int] = {"jwks": 0, "discovery": 0}
        self._retired_keys: list[RSAKey] = []
        self._csrf_key = secrets.token_bytes(32)

        self._signing_key = RSAKey.generate_key(
            2048, parameters={"use": "sig", "alg": "RS256"}, auto_kid=True
        )
        self._kid: str = self._signing_key.kid or self._signing_key.thumbprint()
        self._other_key: RSAKey | None = None

        self._server = self._create_authorization_server()
        self._wsgi_server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None
        self._bound_port: int | None = None
        self._started = False
        self.app: Flask = create_idp_app(self)

    @property
    def sign_id_token_with(self) -> IdTokenSigning:
        """Which key signs ID tokens.

        ``"key"`` (default: the published key), ``"other_key"`` (an unpublished
        key carrying the published ``kid``) or ``"none"`` (an unsigned token,
        ``alg: none``). With ``"key"`` or ``"other_key"`` the header's ``alg``
        (possibly changed by :attr:`id_token_tamper`) must be an RSA algorithm.

        :raises ValueError: when set to anything else.
        """
        return self._sign_id_token_with

    @sign_id_token_with.setter
    def sign_id_token_with(self, value: IdTokenSigning) -> None:
        if value not in get_args(IdTokenSigning):
            raise ValueError(f"sign_id_token_with must be one of {get_args(IdTokenSigning)}.")
        self._sign_id_token_with = value

    def _create_authorization_server(self) -> _AuthorizationServer:
        server = _AuthorizationServer(self)
        bearer = BearerTokenGenerator(
            _new_secret_token,
            _new_secret_token if self._issue_refresh_tokens else None,
            self._access_token_ttl,
        )

        def generate_token(**kwargs: Any) -> _TokenResponse:
            return _TokenResponse(bearer(**kwargs))

        server.register_token_generator("default", generate_token)
        server.register_grant(_CodeGrant, [_S256Challenge(required=True), _OpenIDCode(self)])
        if self._issue_refresh_tokens:
            server.register_grant(_RefreshGrant)
        self._issuer_parameter = _IssuerParameter(self) if self._iss_parameter else None
        if self._issuer_parameter is not None:
            server.register_extension(self._issuer_parameter)
        return server

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> LocalIdentityProvider:
        """Listen and serve on a daemon thread; return ``self``.

        :raises RuntimeError: if the provider was already started.
        :raises OSError: if the address cannot be bound (e.g. the port is taken).
        """
        with self._lock:
            if self._started:
                raise RuntimeError("This LocalIdentityProvider was already started.")
            family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
            # Bind here: Werkzeug's make_server calls sys.exit() when it cannot bind.
            sock = socket.create_server((self._host, self._port), family=family)
            try:
                wsgi_server = make_server(
                    self._host,
                    sock.getsockname()[1],
                    self.app,
                    threaded=True,
                    request_handler=_RequestHandler,
                    fd=sock.fileno(),
                )
            finally:
                sock.close()
            self._wsgi_server = wsgi_server
            self._bound_port = wsgi_server.port
            self._thread = threading.Thread(
                target=wsgi_server.serve_forever,
                kwargs={"poll_interval": 0.05},
                name=f"local-idp-{wsgi_server.port}",
                daemon=True,
            )
            self._started = True
            self._thread.start()
        log.info("Local identity provider listening on %s", self.url)
        return self

    def stop(self) -> None:
        """Stop serving and wait for the server thread. Calling it again is harmless."""
        with self._lock:
            wsgi_server, thread = self._wsgi_server, self._thread
            self._wsgi_server = self._thread = None
        if wsgi_server is None or thread is None:
            return
        wsgi_server.shutdown()
        thread.join(timeout=10)
        wsgi_server.server_close()

    @property
    def running(self) -> bool:
        """Whether the server thread is serving."""
        with self._lock:
            return self._wsgi_server is not None

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
        with self._lock:
            clients = sorted(self._clients)
        return f"<LocalIdentityProvider {where} clients={clients}>"

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
    def jwks_url(self) -> str:
        """The JSON Web Key Set with the ID-token signing key."""
        return f"{self.url}/jwks"

    @property
    def discovery_url(self) -> str:
        """The OpenID Connect discovery document."""
        return f"{self.url}/.well-known/openid-configuration"

    @property
    def jwks(self) -> dict[str, Any]:
        """The public JWKS, as served at :attr:`jwks_url`."""
        with self._lock:
            keys = [self._signing_key, *self._retired_keys]
        return {"keys": [key.as_dict(private=False) for key in keys]}

    def metadata(self) -> dict[str, Any]:
        """Return the discovery document (validated with Authlib's
        ``OpenIDProviderMetadata``)."""
        with self._lock:
            scopes = {"openid", "profile", "email"}
            for client in self._clients.values():
                scopes.update(client.scope.split())
        grant_types = ["authorization_code"]
        if self._issue_refresh_tokens:
            grant_types.append("refresh_token")
        metadata = OpenIDProviderMetadata(
            issuer=self.issuer,
            authorization_endpoint=self.authorization_url,
            token_endpoint=self.token_url,
            userinfo_endpoint=self.userinfo_url,
            jwks_uri=self.jwks_url,
            scopes_supported=sorted(scopes),
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
            claims_supported=sorted(_SUPPORTED_CLAIMS),
        )
        if self._iss_parameter:
            metadata["authorization_response_iss_parameter_supported"] = True
        metadata.validate()
        return dict(metadata)

    def settings_block(
        self,
        client_id: str,
        client_secret: str,
        redirect_url: str,
        scope: str = _DEFAULT_SCOPE,
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
        scope: str = _DEFAULT_SCOPE,
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
        methods = _AUTH_METHODS.get(token_endpoint_auth_method)
        if methods is None:
            raise ValueError(
                f"token_endpoint_auth_method must be one of {sorted(_AUTH_METHODS)},"
                f" not {token_endpoint_auth_method!r}."
            )
        client = _Client(
            client_id=client_id,
            client_secret=client_secret,
            redirect_uris=tuple(redirect_uris),
            auth_methods=methods,
            scope=" ".join(scope.split()),
            refresh_tokens=self._issue_refresh_tokens,
        )
        with self._lock:
            self._clients[client_id] = client

    def deny_next(self, error: str = "access_denied", description: str | None = None) -> None:
        """Make the next valid authorization request redirect back with ``error``.

        :param error: the ``error`` code, e.g. ``"access_denied"``.
        :param description: an optional ``error_description``.
        :raises ValueError: if either holds characters RFC 6749 forbids there.
        """
        for text in (error, description or ""):
            if invalid_error_characters(text):
                raise ValueError('error and description must be printable ASCII without " or \\.')
        if not error:
            raise ValueError("error must not be empty.")
        with self._lock:
            self._denial = (error, description)

    def fail_next_token(self, kind: TokenFailure | str) -> None:
        """Make the next token request answer badly.

        :param kind: ``"server_error"`` (HTTP 500 with a JSON error),
            ``"invalid_grant"`` (HTTP 400 OAuth error), ``"no_access_token"``
            (HTTP 200 JSON without ``access_token``), ``"html"`` (HTTP 200
            ``text/html`` page) or ``"error_in_200"`` (HTTP 200 JSON
            ``{"error": "bad_verification_code"}``, as GitHub answers).
        :raises ValueError: for an unknown kind.
        """
        if kind not in get_args(TokenFailure):
            raise ValueError(f"kind must be one of {get_args(TokenFailure)}, not {kind!r}.")
        with self._lock:
            self._token_failure = kind  # type: ignore[assignment]

    def rotate_signing_key(self, *, keep_old: bool = False) -> str:
        """Sign ID tokens from now on with a new key (and a new ``kid``), published in the JWKS.

        :param keep_old: keep publishing the previous key too, as providers do while tokens
            signed with it may still be in use.
        :return: the new key's ``kid``.
        """
        key = RSAKey.generate_key(2048, parameters={"use": "sig", "alg": "RS256"}, auto_kid=True)
        with self._lock:
            if keep_old:
                self._retired_keys.append(self._signing_key)
            self._signing_key = key
            self._kid = key.kid or key.thumbprint()
            self._other_key = None
            return self._kid

    def revoke_refresh_tokens(self) -> None:
        """Revoke every refresh token issued so far."""
        with self._lock:
            for record in self._refresh_tokens.values():
                record.refresh_revoked = True

    def revoke_access_tokens(self) -> None:
        """Revoke every access token issued so far (userinfo then answers 401)."""
        with self._lock:
            for record in self._tokens.values():
                record.access_revoked = True

    # -- records ------------------------------------------------------------------

    @property
    def authorization_requests(self) -> list[dict[str, str]]:
        """A copy of the query of every ``GET /authorize`` (first value of each key)."""
        with self._lock:
            return [dict(entry) for entry in self._authorization_requests]

    @property
    def token_requests(self) -> list[RecordedTokenRequest]:
        """A copy of the list of token requests received, oldest first."""
        with self._lock:
            return list(self._token_requests)

    @property
    def userinfo_requests(self) -> list[dict[str, str]]:
        """A copy of the headers of every userinfo request."""
        with self._lock:
            return [dict(entry) for entry in self._userinfo_requests]

    @property
    def jwks_requests(self) -> int:
        """How many times the JWKS was fetched."""
        with self._lock:
            return self._document_requests["jwks"]

    @property
    def discovery_requests(self) -> int:
        """How many times the discovery document was fetched."""
        with self._lock:
            return self._document_requests["discovery"]

    def reset_records(self) -> None:
        """Forget the recorded requests (clients, codes and tokens stay)."""
        with self._lock:
            self._document_requests.update(jwks=0, discovery=0)
            self._authorization_requests.clear()
            self._token_requests.clear()
            self._userinfo_requests.clear()

    # -- internals used by the app and the Authlib classes ---------------------------

    def _record_authorization_request(self, query: dict[str, str]) -> None:
        with self._lock:
            self._authorization_requests.append(query)

    def _record_token_request(self, status_code: int) -> None:
        multi = {key: request.form.getlist(key) for key in request.form}
        record = RecordedTokenRequest(
            form={key: values[0] for key, values in multi.items()},
            form_multi=multi,
            headers=dict(request.headers),
            status_code=status_code,
            query=request.args.to_dict(),
        )
        with self._lock:
            self._token_requests.append(record)

    def _count_document_request(self, name: str) -> None:
        with self._lock:
            self._document_requests[name] += 1

    def _record_userinfo_request(self, headers: dict[str, str]) -> None:
        with self._lock:
            self._userinfo_requests.append(headers)

    def _take_denial(self) -> tuple[str, str | None] | None:
        with self._lock:
            denial, self._denial = self._denial, None
        return denial

    def _csrf_token(self, params: Iterable[tuple[str, str]]) -> str:
        canonical = "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in sorted(params))
        return hmac.new(self._csrf_key, canonical.encode(), hashlib.sha256).hexdigest()

    def _with_issuer(self, response: Response) -> Response:
        if self._issuer_parameter is not None:
            self._issuer_parameter.add_issuer_parameter(self._server, response)
        return response

    def _get_client(self, client_id: str) -> _Client | None:
        with self._lock:
            return self._clients.get(client_id)

    def _known_user(self, sub: str) -> LocalUser | None:
        with self._lock:
            return self._users.get(sub)

    def _nonce_used(self, client_id: str, nonce: str) -> bool:
        with self._lock:
            return (client_id, nonce) in self._nonces

    def _save_code(self, code: str, oauth_request: Any) -> None:
        data = oauth_request.payload.data
        user: LocalUser = oauth_request.user
        record = _AuthorizationCode(
            code=code,
            client_id=oauth_request.client.client_id,
            redirect_uri=oauth_request.payload.redirect_uri,
            scope=oauth_request.scope or "",
            user=user,
            code_challenge=data.get("code_challenge"),
            code_challenge_method=data.get("code_challenge_method"),
            nonce=data.get("nonce") or None,
            auth_time=int(time.time()),
            expires_at=time.monotonic() + self._code_ttl,
            grant_id=secrets.token_hex(8),
        )
        with self._lock:
            for stale in [c for c, r in self._codes.items() if r.is_expired()]:
                del self._codes[stale]
            self._codes[code] = record
            self._users[user.sub] = user
            if record.nonce:
                self._nonces.add((record.client_id, record.nonce))

    def _query_code(self, code: str, client: _Client) -> _AuthorizationCode | None:
        with self._lock:
            grant_id = self._used_codes.get(code)
            if grant_id is not None:
                # RFC 6749 4.1.2: a code used twice also revokes what it gave.
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

    def _use_code(self, authorization_code: _AuthorizationCode) -> None:
        with self._lock:
            self._codes.pop(authorization_code.code, None)
            self._used_codes[authorization_code.code] = authorization_code.grant_id
            while len(self._used_codes) > _MAX_USED_CODES:
                del self._used_codes[next(iter(self._used_codes))]

    def _save_token(self, token: Mapping[str, Any], oauth_request: Any) -> None:
        source = oauth_request.authorization_code or oauth_request.refresh_token
        record = _Token(
            access_token=token["access_token"],
            refresh_token=token.get("refresh_token"),
            client_id=oauth_request.client.client_id,
            user=oauth_request.user,
            scope=token.get("scope", ""),
            expires_in=int(token.get("expires_in", self._access_token_ttl)),
            expires_at=time.monotonic() + int(token.get("expires_in", self._access_token_ttl)),
            grant_id=source.grant_id if source is not None else secrets.token_hex(8),
        )
        with self._lock:
            self._tokens[record.access_token] = record
            if record.refresh_token:
                self._refresh_tokens[record.refresh_token] = record

    def _find_access_token(self, access_token: str) -> _Token | None:
        with self._lock:
            return self._tokens.get(access_token)

    def _find_refresh_token(self, refresh_token: str) -> _Token | None:
        with self._lock:
            record = self._refresh_tokens.get(refresh_token)
            if record is None or record.refresh_revoked:
                return None
            return record

    def _revoke_refresh_token(self, record: _Token) -> None:
        with self._lock:
            record.refresh_revoked = True

    def _user_claims(self, user: LocalUser, scope: str) -> dict[str, Any]:
        claims = user.claims()
        if user.picture is None:
            claims["picture"] = f"{self.issuer}/avatar/{quote(user.sub, safe='')}.svg"
        filtered: dict[str, Any] = dict(UserInfo(claims).filter(scope))
        filtered["sub"] = user.sub
        return filtered

    def _other_signing_key(self) -> RSAKey:
        with self._lock:
            if self._other_key is None:
                self._other_key = RSAKey.generate_key(
                    2048,
                    parameters={"use": "sig", "alg": "RS256", "kid": self._kid},
                )
            return self._other_key

    def _finish_id_token(self, signed: str) -> str:
        """Apply :attr:`id_token_tamper` and :attr:`sign_id_token_with` to an ID token."""
        tamper, signing = self.id_token_tamper, self.sign_id_token_with
        if tamper is None and signing == "key":
            return signed
        decoded = jwt.decode(signed, self._signing_key, algorithms=["RS256"])
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
        key = self._signing_key if signing == "key" else self._other_signing_key()
        return jwt.encode(
            header, claims, key, algorithms=[str(header.get("alg"))], default_type=None
        )

    def _token_response(self) -> Response:
        with self._lock:
            failure, self._token_failure = self._token_failure, None
        if failure is not None:
            return _failure_response(failure, self._access_token_ttl)
        repeated = sorted(key for key in request.form if len(request.form.getlist(key)) > 1)
        if repeated:
            error = InvalidRequestError(f"Repeated parameter: {repeated[0]}.")
            return self._server.handle_error_response(None, error)  # type: ignore[no-any-return]
        basic = request.headers.get("Authorization", "").lower().startswith("basic ")
        if basic and "client_secret" in request.form:
            error = InvalidRequestError("The client used more than one authentication method.")
            return self._server.handle_error_response(None, error)  # type: ignore[no-any-return]
        try:
            return self._server.create_token_response()  # type: ignore[no-any-return]
        except ValueError:
            # Authlib builds some error descriptions from request values and
            # refuses characters such as quotes in them.
            error = InvalidRequestError("The request contains characters that are not allowed.")
            return self._server.handle_error_response(None, error)  # type: ignore[no-any-return]


def _failure_response(kind: TokenFailure, expires_in: int) -> Response:
    note = "The local identity provider was told to fail this token request."
    headers = {"Cache-Control": "no-store", "Pragma": "no-cache"}
    if kind == "html":
        body = _page("Error", f"<h1>Something went wrong</h1><p>{_esc(note)}</p>")
        return Response(body, 200, headers, mimetype="text/html")
    payloads: dict[str, tuple[int, dict[str, Any]]] = {
        "server_error": (500, {"error": "server_error", "error_description": note}),
        "invalid_grant": (400, {"error": "invalid_grant", "error_description": note}),
        "no_access_token": (200, {"token_type": "Bearer", "expires_in": expires_in}),
        "error_in_200": (
            200,
            {
                "error": "bad_verification_code",
                "error_description": "The code passed is incorrect or expired.",
            },
        ),
    }
    status, payload = payloads[kind]
    return Response(json.dumps(payload), status, headers, mimetype="application/json")


# ---------------------------------------------------------------------------- CLI


def main(argv: Sequence[str] | None = None) -> int:
    """Run a provider in the foreground until interrupted (``python -m ...``).

    :param argv: the command-line arguments, without the program name.
    :return: the process exit status.
    """
    parser = argparse.ArgumentParser(
        prog="python -m flask_social_oauth2.local_idp",
        description="A local OAuth 2.0 / OpenID Connect identity provider for development.",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="loopback address (default: %(default)s)"
    )
    parser.add_argument(
        "--port", type=int, default=5001, help="port, 0 for any (default: %(default)s)"
    )
    parser.add_argument("--client-id", required=True)
    parser.add_argument(
        "--client-secret",
        required=True,
        help="the client secret (it is never printed)",
    )
    parser.add_argument(
        "--redirect-uri", required=True, action="append", help="may be given several times"
    )
    parser.add_argument(
        "--auth-method",
        choices=sorted(_AUTH_METHODS),
        default="any",
        help="token endpoint client authentication (default: %(default)s)",
    )
    parser.add_argument("--scope", default=_DEFAULT_SCOPE)
    parser.add_argument(
        "--auto-approve",
        metavar='"NAME <EMAIL>"',
        help="approve every request at once for this user, e.g. 'Ada Lovelace <ada@example.test>'",
    )
    parser.add_argument("--iss-parameter", action="store_true", help="send iss (RFC 9207)")
    parser.add_argument("--no-refresh-tokens", action="store_true")
    args = parser.parse_args(argv)

    try:
        provider = LocalIdentityProvider(
            args.host,
            args.port,
            issue_refresh_tokens=not args.no_refresh_tokens,
            iss_parameter=args.iss_parameter,
        )
        provider.register_client(
            args.client_id,
            args.client_secret,
            args.redirect_uri,
            token_endpoint_auth_method=args.auth_method,
            scope=args.scope,
        )
        if args.auto_approve:
            name, email = parseaddr(args.auto_approve)
            provider.auto_approve = LocalUser.from_name_email(name or email, email)
    except ValueError as error:
        parser.error(str(error))

    try:
        provider.start()
    except OSError as error:
        print(f"Cannot listen on {args.host}:{args.port}: {error.strerror}")
        return 1
    print(f"Local identity provider at {provider.url}")
    for label, url in (
        ("discovery", provider.discovery_url),
        ("authorization", provider.authorization_url),
        ("token", provider.token_url),
        ("userinfo", provider.userinfo_url),
        ("jwks", provider.jwks_url),
    ):
        print(f"  {label + ':':15} {url}")
    print("Provider settings block (clientSecret: the value you passed):")
    block = provider.settings_block(args.client_id, "<secret>", args.redirect_uri[0], args.scope)
    for key, value in block.items():
        print(f"  {key}: {json.dumps(value)}")
    print("Press Ctrl-C to stop.", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        provider.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
