"""The contenders: one small Flask app each, doing the same sign-in.

Every app has the same base configuration (``SECRET_KEY``, ``TRUSTED_HOSTS``, an index page),
the same scope, the same provider (the loopback server of :mod:`benchmarks.provider_server`) and
ends a successful sign-in the same way: the profile kept in the session, a redirect to ``/``.

- ``project``: flask-social-oauth2 as a user configures it (state cookie, PKCE S256).
- ``bare``: a hand-written view with a pooled :class:`requests.Session`: a random state kept in
  Flask's session, checked (constant time) and removed on the callback, the code POSTed, the
  profile fetched. No PKCE: the bare minimum the issue describes.
- ``bare-urllib3``: the same views, the callback's token POST and profile GET made with one
  module-level :class:`urllib3.PoolManager` (:data:`POOL`) instead: the floor on this stack
  (issue 13), in the whole-flow section only (its redirect step is ``bare``'s).
- ``project-none``: the project configured for sign-in only (``SOCIAL_OAUTH2_TOKEN_STORE =
  "none"``): like the bare views it keeps the profile and no token, so it is the one measured
  against the floor; the default ``project`` also keeps the tokens, encrypted, in the session.
  In the whole-flow section only.
- ``project-loaded``: the project with no provider configured and the same block given by a
  provider loader (``@social.provider_loader`` and ``social.build_provider``), its answer
  cached: the redirect step of a customer's provider loaded at runtime. In the redirect step
  only, judged against ``project``.
- ``authlib``: ``authlib.integrations.flask_client.OAuth`` with PKCE (``code_challenge_method``
  S256); ``authorize_redirect`` and ``authorize_access_token`` then ``.get("userinfo")``.
- ``flask-dance``: an ``OAuth2ConsumerBlueprint`` with ``use_pkce=True``; the profile is fetched
  in the ``oauth_authorized`` handler, as its documentation shows. The token stays in its default
  session storage.

The peers need ``AUTHLIB_INSECURE_TRANSPORT`` / ``OAUTHLIB_INSECURE_TRANSPORT`` for plain http
on loopback; :func:`allow_peers_insecure_transport` sets them in the benchmark process only,
after the project's own flow has been checked without them.

Every app also has the view of the "api call" section, ``GET /api-call``: one call of the loopback
server's protected ``GET /api/me`` for the browser signed in, answering the ``client`` named in
the API's JSON (the server names the client_id its token was issued to). With ``api=True`` the
bare and Authlib apps keep the access token in Flask's session at sign-in, as an app that calls
the API later must (the project and Flask-Dance keep it in any case):

- ``project``: ``social.api("bench").get("me")``, relative to ``customProperties.apiBaseURL``,
  the token in the default (session) store, or in a SQL store (``token_store``), or bound to
  the sign-in's key with DPoP (``dpop``: a fresh proof on every call);
- ``bare``: the pooled ``requests.Session`` and a bearer header from Flask's session;
- ``authlib``: ``oauth.bench.get("api/me", token=...)``, the token from Flask's session;
- ``flask-dance``: ``blueprint.session.get("api/me")``, the token in its default session storage.

``create_app`` is also the gunicorn factory: ``benchmarks.apps:create_app()`` reads the contender
and the provider address from ``BENCH_CONTENDER`` and ``BENCH_PROVIDER_URL``.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
from typing import Any, Final
from urllib.parse import urlencode

import requests
import urllib3
from flask import Flask, abort, redirect, request, session
from flask.typing import ResponseReturnValue

from flask_social_oauth2 import SocialOAuth2

from .provider_server import CLIENT_SECRET

CONTENDERS: Final = ("project", "bare", "authlib", "flask-dance")
#: The whole-flow section's floor (issue 13); not in the other sections.
BARE_URLLIB3: Final = "bare-urllib3"
#: The project keeping no token (sign-in only), measured against the floor; whole flow only.
PROJECT_NONE: Final = "project-none"
#: The project with its provider given by a provider loader; redirect step only.
PROJECT_LOADED: Final = "project-loaded"
#: The pool of ``bare-urllib3``'s callbacks, one per process.
POOL: Final = urllib3.PoolManager()
#: The view of the "api call" section, in every app.
API_PATH: Final = "/api-call"
SCOPE: Final = "profile email"
#: Where each contender's sign-in starts.
START_PATHS: Final = {
    "project": "/authenticate/bench",
    "bare": "/authenticate/bench",
    "bare-urllib3": "/authenticate/bench",
    "project-none": "/authenticate/bench",
    "project-loaded": "/authenticate/bench",
    "authlib": "/login",
    "flask-dance": "/login/bench",
}


def allow_peers_insecure_transport() -> None:
    """Let Authlib and requests-oauthlib use plain http on loopback, in this process only."""
    os.environ["AUTHLIB_INSECURE_TRANSPORT"] = "1"
    os.environ["OAUTHLIB_INSECURE_TRANSPORT"] = "1"


def base_app(contender: str) -> Flask:
    """The configuration every contender shares."""
    app = Flask(f"bench_{contender.replace('-', '_')}")
    app.config.update(
        SECRET_KEY="bench-secret-key-0123456789abcdef",
        TRUSTED_HOSTS=["localhost", "127.0.0.1"],
    )

    @app.get("/")
    def index() -> str:
        return "index"

    return app


def project_app(
    provider_url: str,
    *,
    client_id: str = "project",
    token_store: str = "session",  # noqa: S107 - SOCIAL_OAUTH2_TOKEN_STORE, not a secret
    dpop: bool = False,
    par: bool = False,
) -> Flask:
    """flask-social-oauth2; ``token_store`` is ``SOCIAL_OAUTH2_TOKEN_STORE``; ``dpop`` sets
    ``customProperties.dpop`` (the sign-in's tokens bound to a key, RFC 9449); ``par`` pushes
    every authorization request to the provider server's ``/par`` (RFC 9126:
    ``pushedAuthorization: required``, ``pushedAuthorizationURL``)."""
    app = base_app("project" if client_id == "project" else client_id)
    app.config["SOCIAL_OAUTH2_TOKEN_STORE"] = token_store
    app.config["SOCIAL_OAUTH2_PROVIDERS"] = {
        "bench": {
            "authorizationURL": f"{provider_url}/authorize",
            "accessTokenURL": f"{provider_url}/token",
            "apiURL": f"{provider_url}/userinfo",
            "redirectURL": "/authenticate/bench",
            "clientID": client_id,
            "clientSecret": CLIENT_SECRET,
            "scope": SCOPE,
            "customProperties": {"apiBaseURL": f"{provider_url}/api"}
            | ({"dpop": "true"} if dpop else {})
            | (
                {"pushedAuthorization": "required", "pushedAuthorizationURL": f"{provider_url}/par"}
                if par
                else {}
            ),
        }
    }
    social = SocialOAuth2(app)

    @app.get(API_PATH)
    def api_call() -> str:
        answer = social.api("bench").get("me")
        answer.raise_for_status()
        return str(answer.json()["client"])

    return app


def loaded_app(provider_url: str) -> Flask:
    """flask-social-oauth2 with no provider configured: the provider loader gives ``bench``,
    the block of :func:`project_app`, validated by ``social.build_provider`` at the first ask
    and cached after (``SOCIAL_OAUTH2_PROVIDER_CACHE_TTL``)."""
    block = project_app(provider_url).config["SOCIAL_OAUTH2_PROVIDERS"]["bench"]
    app = base_app(PROJECT_LOADED)
    social = SocialOAuth2(app)

    @social.provider_loader
    def customer(name: str) -> Any:
        return social.build_provider(name, block) if name == "bench" else None

    return app


def bare_app(provider_url: str, *, api: bool = False) -> Flask:
    """A bare Flask view and a pooled requests.Session: the minimum the same flow costs.
    With ``api``, the access token is kept in Flask's session for the API view."""
    app = base_app("bare")
    http = requests.Session()
    authorize_url = f"{provider_url}/authorize"
    token_url = f"{provider_url}/token"
    userinfo_url = f"{provider_url}/userinfo"
    api_url = f"{provider_url}/api/me"

    @app.get("/authenticate/bench")
    def authenticate() -> ResponseReturnValue:
        args = request.args
        redirect_uri = f"{request.scheme}://{request.host}/authenticate/bench"
        if "code" not in args:
            state = secrets.token_urlsafe(24)
            session["oauth_state"] = state
            query = urlencode(
                {
                    "response_type": "code",
                    "client_id": "bare",
                    "redirect_uri": redirect_uri,
                    "scope": SCOPE,
                    "state": state,
                }
            )
            return redirect(f"{authorize_url}?{query}")
        expected = session.pop("oauth_state", None)
        if not isinstance(expected, str) or not hmac.compare_digest(
            expected.encode(), args.get("state", "").encode()
        ):
            abort(403)
        token = http.post(
            token_url,
            data={
                "grant_type": "authorization_code",
                "code": args["code"],
                "redirect_uri": redirect_uri,
                "client_id": "bare",
                "client_secret": CLIENT_SECRET,
            },
            headers={"Accept": "application/json"},
            timeout=10,
        )
        token.raise_for_status()
        access_token = token.json()["access_token"]
        profile = http.get(
            userinfo_url, headers={"Authorization": f"Bearer {access_token}"}, timeout=10
        )
        profile.raise_for_status()
        session["profile"] = profile.json()
        if api:
            session["access_token"] = access_token
        return redirect("/")

    @app.get(API_PATH)
    def api_call() -> str:
        access_token = session.get("access_token")
        if not isinstance(access_token, str):
            abort(401)
        answer = http.get(api_url, headers={"Authorization": f"Bearer {access_token}"}, timeout=10)
        answer.raise_for_status()
        return str(answer.json()["client"])

    return app


def bare_urllib3_app(provider_url: str) -> Flask:
    """The bare views, the callback's provider calls made with the module-level urllib3 pool
    (:data:`POOL`): the floor of the whole flow on this stack."""
    app = base_app("bare-urllib3")
    authorize_url = f"{provider_url}/authorize"
    token_url = f"{provider_url}/token"
    userinfo_url = f"{provider_url}/userinfo"

    @app.get("/authenticate/bench")
    def authenticate() -> ResponseReturnValue:
        args = request.args
        redirect_uri = f"{request.scheme}://{request.host}/authenticate/bench"
        if "code" not in args:
            state = secrets.token_urlsafe(24)
            session["oauth_state"] = state
            query = urlencode(
                {
                    "response_type": "code",
                    "client_id": BARE_URLLIB3,
                    "redirect_uri": redirect_uri,
                    "scope": SCOPE,
                    "state": state,
                }
            )
            return redirect(f"{authorize_url}?{query}")
        expected = session.pop("oauth_state", None)
        if not isinstance(expected, str) or not hmac.compare_digest(
            expected.encode(), args.get("state", "").encode()
        ):
            abort(403)
        token = POOL.request(
            "POST",
            token_url,
            body=urlencode(
                {
                    "grant_type": "authorization_code",
                    "code": args["code"],
                    "redirect_uri": redirect_uri,
                    "client_id": BARE_URLLIB3,
                    "client_secret": CLIENT_SECRET,
                }
            ),
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                "Accept": "application/json",
            },
            timeout=10,
        )
        if token.status != 200:
            abort(502)
        access_token = json.loads(token.data)["access_token"]
        profile = POOL.request(
            "GET", userinfo_url, headers={"Authorization": f"Bearer {access_token}"}, timeout=10
        )
        if profile.status != 200:
            abort(502)
        session["profile"] = json.loads(profile.data)
        return redirect("/")

    return app


def authlib_app(provider_url: str, *, api: bool = False) -> Flask:
    """Authlib's Flask client, PKCE on. With ``api``, the token is kept in Flask's session."""
    from authlib.integrations.flask_client import OAuth

    app = base_app("authlib")
    oauth = OAuth(app)
    oauth.register(
        "bench",
        client_id="authlib",
        client_secret=CLIENT_SECRET,
        authorize_url=f"{provider_url}/authorize",
        access_token_url=f"{provider_url}/token",
        api_base_url=f"{provider_url}/",
        client_kwargs={
            "scope": SCOPE,
            "code_challenge_method": "S256",
            "token_endpoint_auth_method": "client_secret_post",
        },
    )
    client: Any = oauth.create_client("bench")

    @app.get("/login")
    def login() -> ResponseReturnValue:
        redirect_uri = f"{request.scheme}://{request.host}/auth"
        response: ResponseReturnValue = client.authorize_redirect(redirect_uri)
        return response

    @app.get("/auth")
    def auth() -> ResponseReturnValue:
        token = client.authorize_access_token()
        profile = client.get("userinfo", token=token)
        profile.raise_for_status()
        session["profile"] = profile.json()
        if api:
            session["bench_token"] = dict(token)
        return redirect("/")

    @app.get(API_PATH)
    def api_call() -> str:
        token = session.get("bench_token")
        if not isinstance(token, dict):
            abort(401)
        answer = client.get("api/me", token=token)
        answer.raise_for_status()
        return str(answer.json()["client"])

    return app


def flask_dance_app(provider_url: str) -> Flask:
    """Flask-Dance's generic OAuth 2 blueprint, PKCE on."""
    from flask_dance.consumer import OAuth2ConsumerBlueprint, oauth_authorized

    app = base_app("flask-dance")
    blueprint = OAuth2ConsumerBlueprint(
        "bench",
        __name__,
        client_id="flask-dance",
        client_secret=CLIENT_SECRET,
        base_url=f"{provider_url}/",
        authorization_url=f"{provider_url}/authorize",
        token_url=f"{provider_url}/token",
        scope=SCOPE.split(),
        use_pkce=True,
        redirect_url="/",
    )
    app.register_blueprint(blueprint, url_prefix="/login")

    @oauth_authorized.connect_via(blueprint)  # type: ignore[untyped-decorator]
    def signed_in(bp: Any, token: Any) -> None:
        profile = bp.session.get("userinfo")
        profile.raise_for_status()
        session["profile"] = profile.json()

    @app.get(API_PATH)
    def api_call() -> str:
        answer = blueprint.session.get("api/me")
        answer.raise_for_status()
        return str(answer.json()["client"])

    return app


def make_app(contender: str, provider_url: str, *, api: bool = False) -> Flask:
    """The app of ``contender`` (one of :data:`CONTENDERS`, :data:`BARE_URLLIB3`,
    :data:`PROJECT_NONE` or :data:`PROJECT_LOADED`); ``api``: bare and Authlib keep the access
    token in Flask's session for the API view."""
    if contender == "bare":
        return bare_app(provider_url, api=api)
    if contender == BARE_URLLIB3:
        return bare_urllib3_app(provider_url)
    if contender == "authlib":
        return authlib_app(provider_url, api=api)
    if contender == "flask-dance":
        return flask_dance_app(provider_url)
    if contender == "project":
        return project_app(provider_url)
    if contender == PROJECT_NONE:
        return project_app(provider_url, client_id=PROJECT_NONE, token_store="none")
    if contender == PROJECT_LOADED:
        return loaded_app(provider_url)
    raise ValueError(f"unknown contender {contender!r}")


def create_app() -> Flask:
    """The gunicorn factory: the contender and provider address come from the environment."""
    return make_app(os.environ["BENCH_CONTENDER"], os.environ["BENCH_PROVIDER_URL"])
