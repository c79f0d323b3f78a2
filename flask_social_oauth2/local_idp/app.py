"""The Flask application that serves a local identity provider's endpoints."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import threading
from collections.abc import Iterable
from typing import Any, Final, Protocol
from urllib.parse import quote, urlsplit

from authlib.integrations.flask_oauth2 import ResourceProtector
from authlib.oauth2.rfc6749 import OAuth2Error
from flask import Flask, Response, abort, request
from oauthlib.common import add_params_to_uri

from .models import LocalUser, TokenFailure, user_claims
from .pages import avatar_svg, consent_page, favicon, index_page, refused_page, render
from .records import NextAnswers, RecordedTokenRequest, Records
from .server import BearerValidator, LocalAuthorizationServer
from .serving import is_loopback
from .store import Store

__all__ = ["IdentityProvider", "create_idp_app"]

#: Form fields of the consent page that are not OAuth parameters.
_FORM_FIELDS: Final = frozenset({"name", "email", "decision", "csrf_token"})
_EMAIL_RE: Final = re.compile(r"[^@\s]{1,64}@[^@\s]{1,190}")
_CONTROL_RE: Final = re.compile(r"[\x00-\x1f\x7f]")


class IdentityProvider(Protocol):
    """What :func:`create_idp_app` serves: a
    :class:`~flask_social_oauth2.local_idp.LocalIdentityProvider`."""

    store: Store
    records: Records
    next_answers: NextAnswers
    authorization_server: LocalAuthorizationServer
    auto_approve: LocalUser | None

    @property
    def issuer(self) -> str: ...

    def endpoints(self) -> dict[str, str]: ...

    def metadata(self) -> dict[str, Any]: ...

    @property
    def jwks(self) -> dict[str, Any]: ...


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


def _failure_response(kind: TokenFailure, expires_in: int) -> Response:
    note = "The local identity provider was told to fail this token request."
    headers = {"Cache-Control": "no-store", "Pragma": "no-cache"}
    if kind == "html":
        return Response(render("failure.html", title="Error", note=note), 200, headers)
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


def _recorded_token_request(status_code: int) -> RecordedTokenRequest:
    multi = {key: request.form.getlist(key) for key in request.form}
    return RecordedTokenRequest(
        form={key: values[0] for key, values in multi.items()},
        form_multi=multi,
        headers=dict(request.headers),
        status_code=status_code,
        query=request.args.to_dict(),
    )


def create_idp_app(provider: IdentityProvider) -> Flask:
    """Create the Flask application that serves ``provider``'s endpoints.

    :meth:`LocalIdentityProvider.start` serves this application on its own
    thread; call this directly to serve it some other way (for example with
    Flask's test client, or mounted in a larger WSGI app). The issuer is then
    ``http://<host>:<port>`` from the provider's constructor, so give it a
    fixed port.

    Routes: ``GET/POST /authorize``, ``POST /token``, ``POST /revoke`` (RFC 7009),
    ``GET/POST /userinfo``, ``GET /api/me`` (a protected API answering the token's user),
    ``GET /jwks``, ``GET /.well-known/openid-configuration`` (also served as
    ``/.well-known/oauth-authorization-server``), ``GET /avatar/<sub>.svg``,
    ``GET /favicon.ico`` and a small index page at ``/``.

    :param provider: the provider whose clients, codes and tokens are served.
    """
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = 64 * 1024
    server = provider.authorization_server
    store = provider.store
    records = provider.records
    # Token requests are handled one at a time, so that checking and
    # spending a code or a refresh token cannot race.
    token_lock = threading.Lock()
    csrf_key = secrets.token_bytes(32)

    def csrf_token(params: Iterable[tuple[str, str]]) -> str:
        canonical = "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in sorted(params))
        return hmac.new(csrf_key, canonical.encode(), hashlib.sha256).hexdigest()

    @app.before_request
    def check_host() -> None:
        # Authlib refuses non-loopback http URLs with an exception; refuse a
        # foreign Host header (DNS rebinding, spoofing) cleanly instead.
        hostname = urlsplit(f"//{request.host}").hostname or ""
        if not is_loopback(hostname):
            abort(400, description="This identity provider only answers on loopback.")

    @app.after_request
    def security_headers(response: Response) -> Response:
        response.headers.setdefault("Referrer-Policy", "no-referrer")
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault(
            "Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'"
        )
        if request.path in ("/authorize", "/token", "/userinfo", "/revoke", "/api/me"):
            response.headers["Cache-Control"] = "no-store"
        return response

    @app.get("/")
    def index() -> Response:
        return index_page(provider.issuer, provider.endpoints().items())

    @app.get("/favicon.ico")
    def icon() -> Response:
        response = Response(favicon(), mimetype="image/svg+xml")
        response.headers["Cache-Control"] = "public, max-age=86400"
        return response

    @app.route("/authorize", methods=["GET", "POST"])
    def authorize() -> Response:
        if request.method == "GET":
            records.add_authorization(request.args.to_dict())
            params = [(k, v) for k, v in request.args.items(multi=True) if k not in _FORM_FIELDS]
            end_user = provider.auto_approve
        else:
            if request.query_string:
                return refused_page(
                    "invalid_request", "The consent form must not carry a query string."
                )
            params = [(k, v) for k, v in request.form.items(multi=True) if k not in _FORM_FIELDS]
            end_user = None
            # Before anything else: a form this provider did not render for
            # exactly these parameters (a cross-site POST) changes nothing.
            if not hmac.compare_digest(
                request.form.get("csrf_token", "").encode(), csrf_token(params).encode()
            ):
                return refused_page(
                    "invalid_request",
                    "The consent form was not issued by this provider for this request. "
                    "Start the sign-in again.",
                )

        try:
            grant = server.get_consent_grant(end_user=end_user)
        except OAuth2Error as error:
            if error.redirect_uri:
                return server.with_issuer(server.handle_error_response(None, error))
            return refused_page(error.error, error.get_error_description())
        except ValueError:
            # Authlib refuses to build an error description containing some
            # characters of the request (quotes, backslashes, non-ASCII).
            return refused_page(
                "invalid_request", "The request contains characters that are not allowed."
            )

        denial = provider.next_answers.take_denial()
        if denial is not None:
            denied = OAuth2Error(
                error=denial[0],
                description=denial[1],
                state=request.values.get("state"),
                redirect_uri=grant.redirect_uri,
            )
            return server.with_issuer(server.handle_error_response(None, denied))

        consent = {
            "client_id": grant.client.client_id,
            "redirect_uri": grant.redirect_uri,
            "scope": grant.request.scope or "",
            "hidden": params,
            "csrf_token": csrf_token(params),
        }
        if request.method == "GET":
            if end_user is not None:
                return server.create_authorization_response(  # type: ignore[no-any-return]
                    grant=grant, grant_user=end_user
                )
            login_hint = request.args.get("login_hint", "")
            return consent_page(
                **consent, email=login_hint if _EMAIL_RE.fullmatch(login_hint) else ""
            )

        decision = request.form.get("decision")
        if decision == "deny":
            return server.create_authorization_response(  # type: ignore[no-any-return]
                grant=grant, grant_user=None
            )
        if decision != "approve":
            return refused_page("invalid_request", "Choose Approve or Deny.")
        name = " ".join(request.form.get("name", "").split())
        email = request.form.get("email", "").strip()
        message = _validate_identity(name, email)
        if message is not None:
            return consent_page(**consent, name=name, email=email, message=message, status=400)
        user = LocalUser.from_name_email(name, email)
        return server.create_authorization_response(  # type: ignore[no-any-return]
            grant=grant, grant_user=user
        )

    def token_response() -> Response:
        failure = provider.next_answers.take_token_failure()
        if failure is not None:
            return _failure_response(failure, store.access_token_ttl)
        repeated = sorted(key for key in request.form if len(request.form.getlist(key)) > 1)
        if repeated:
            return server.error_response(f"Repeated parameter: {repeated[0]}.")
        basic = request.headers.get("Authorization", "").lower().startswith("basic ")
        if basic and "client_secret" in request.form:
            return server.error_response("The client used more than one authentication method.")
        try:
            return server.create_token_response()  # type: ignore[no-any-return]
        except ValueError:
            # Authlib builds some error descriptions from request values and
            # refuses characters such as quotes in them.
            return server.error_response("The request contains characters that are not allowed.")

    @app.post("/token")
    def token() -> Response:
        try:
            with token_lock:
                response = token_response()
        except Exception:
            records.add_token(_recorded_token_request(500))
            raise
        records.add_token(_recorded_token_request(response.status_code))
        return response

    @app.post("/revoke")
    def revoke() -> Response:
        with token_lock:
            response: Response = server.create_endpoint_response("revocation")
        records.add_revocation(_recorded_token_request(response.status_code))
        return response

    @app.get("/logout")
    def logout() -> Response:
        """RP-Initiated Logout 1.0: forget the browser's sign-in here (this provider keeps
        none) and return to ``post_logout_redirect_uri`` when it is on the origin of one of the
        client's redirect URIs, with ``state``; otherwise a plain "signed out" page."""
        query = request.args.to_dict()
        records.add_logout(query)
        client = store.client(query.get("client_id", ""))
        target = query.get("post_logout_redirect_uri")
        if client is not None and target and _same_origin_as_one(target, client.redirect_uris):
            if "state" in query:
                target = add_params_to_uri(target, [("state", query["state"])])
            response = Response(status=302)
            response.headers["Location"] = target
            return response
        return Response("You are signed out.", mimetype="text/plain")

    protector = ResourceProtector()
    protector.register_token_validator(BearerValidator(store))

    @app.get("/api/me")
    def api_me() -> Response:
        records.add_api(dict(request.headers))
        with protector.acquire() as current:
            claims = user_claims(current.user, current.scope, provider.issuer)
        answer = {"sub": claims["sub"], "scope": current.scope, "claims": claims}
        return Response(json.dumps(answer), mimetype="application/json")

    @app.route("/userinfo", methods=["GET", "POST"])
    def userinfo() -> Response:
        records.add_userinfo(dict(request.headers))
        with protector.acquire() as current:
            claims = user_claims(current.user, current.scope, provider.issuer)
        return Response(json.dumps(claims), mimetype="application/json")

    @app.get("/jwks")
    def jwks() -> Response:
        records.count_document("jwks")
        return Response(json.dumps(provider.jwks), mimetype="application/json")

    @app.get("/.well-known/openid-configuration")
    @app.get("/.well-known/oauth-authorization-server")
    def discovery() -> Response:
        records.count_document("discovery")
        return Response(json.dumps(provider.metadata()), mimetype="application/json")

    @app.get("/avatar/<sub>.svg")
    def avatar(sub: str) -> Response:
        response = Response(avatar_svg(store.known_user(sub), sub), mimetype="image/svg+xml")
        response.headers["Content-Security-Policy"] = "default-src 'none'"
        response.headers["Cross-Origin-Resource-Policy"] = "cross-origin"
        return response

    return app


def _same_origin_as_one(url: str, registered: Iterable[str]) -> bool:
    def origin(address: str) -> tuple[str, str]:
        parts = urlsplit(address)
        return parts.scheme, parts.netloc

    return any(origin(url) == origin(uri) for uri in registered)
