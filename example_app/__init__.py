"""The example app of flask-social-oauth2: sign in, link a second provider, call the
providers' APIs with kept and refreshed tokens, unlink, sign out.

Its users and the identities linked to them live in a SQLite file in the app's instance folder
(``EXAMPLE_INSTANCE_PATH`` moves it); Flask-Login keeps the signed-in user.

Run it with a local identity provider beside it (no account anywhere needed)::

    pip install -e ".[example]" && python -m example_app

or as any Flask app, ``flask --app example_app run``, with the providers whose variables are
set in the environment (see ``providers.yaml``).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from flask import (
    Blueprint,
    Flask,
    Response,
    current_app,
    flash,
    g,
    get_flashed_messages,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from flask.typing import ResponseReturnValue
from flask_login import LoginManager, current_user, login_user, logout_user

from flask_social_oauth2 import OAuth2Info, SocialOAuth2, SocialProfile, SocialProvider, signals
from flask_social_oauth2.config import expand_environment, load_yaml_blocks
from flask_social_oauth2.errors import (
    AccessDeniedError,
    AuthenticationError,
    ConfigurationError,
    ConfigurationProblem,
    SignInRequiredError,
    StateError,
)

from . import bluesky
from .access_log import hide_callback_queries
from .users import Users

__all__ = ["PROVIDERS_FILE", "create_app", "select_blocks"]

#: The example's provider blocks.
PROVIDERS_FILE: Final = Path(__file__).with_name("providers.yaml")
#: The provider the client-side page signs in with (configured without authorizationURL).
CLIENT_SIDE_PROVIDER: Final = "local-spa"
#: Where the extension's default success handler keeps the profile.
PROFILE_KEY: Final = "social_profile"
_CSRF_KEY: Final = "csrf_token"
#: What the account page's "Call the API" button asks each provider: a URL relative to the
#: block's API base (``customProperties.apiBaseURL`` or the built-in one), or an absolute one.
API_CALLS: Final[Mapping[str, str]] = {
    "local": "me",
    "local-two": "me",
    "github": "user",
    "google": "https://openidconnect.googleapis.com/v1/userinfo",
    "bluesky": "xrpc/com.atproto.server.getSession",  # on the account's own PDS
}
_VARIABLE: Final = re.compile(r"\$\{([^}]*)\}")
_LABELS: Final[Mapping[str, tuple[str, str]]] = {
    "local": ("Local identity provider", "Runs on this machine; no account needed"),
    "local-two": ("Second local identity provider", "Another account, to link to this user"),
    "local-spa": (
        "Local identity provider, from the browser",
        "A single-page app's flow: PKCE made with WebCrypto, the code POSTed as JSON",
    ),
    "apple": ("Apple", "Your Apple Account (or the local Apple-like server)"),
    "bluesky": ("Bluesky", "Your Bluesky handle, or that of any AT Protocol account"),
    "github": ("GitHub", "Your GitHub account"),
    "google": ("Google", "Your Google account"),
}
_PROFILE_FIELDS: Final = (
    ("provider_id", "Provider"),
    ("provider_key", "Provider key (user id)"),
    ("username", "Username"),
    ("full_name", "Full name"),
    ("first_name", "First name"),
    ("last_name", "Last name"),
    ("email", "E-mail"),
    ("avatar_url", "Avatar URL"),
)

_FAVICON: Final = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">'
    '<defs><linearGradient id="g" x1="0" y1="0" x2="1" y2="1">'
    '<stop offset="0" stop-color="#3056d3"/><stop offset="1" stop-color="#7b4fd6"/>'
    '</linearGradient></defs><rect width="32" height="32" rx="8" fill="url(#g)"/>'
    '<circle cx="16" cy="12.5" r="5" fill="#fff"/>'
    '<path d="M6.5 26c1.6-5 5.3-7.5 9.5-7.5s7.9 2.5 9.5 7.5z" fill="#fff"/></svg>'
)

bp = Blueprint("example", __name__)


@dataclass(frozen=True)
class ProviderChoice:
    """A provider as the sign-in page shows it.

    :param name: The block's name.
    :param label: The name people know it by.
    :param note: A line under the label.
    :param missing: The ``${VAR}`` names to set to turn it on; empty when it is on.
    """

    name: str
    label: str
    note: str
    missing: tuple[str, ...] = ()
    client_side: bool = False

    @property
    def initial(self) -> str:
        """The letter on the provider's badge."""
        return self.label[:1].upper()


def _label(name: str) -> tuple[str, str]:
    return _LABELS.get(name, (name.replace("-", " ").title(), f"Sign in with {name}"))


def _variables(value: Any) -> set[str]:
    if isinstance(value, str):
        return set(_VARIABLE.findall(value))
    if isinstance(value, Mapping):
        return set().union(*(_variables(item) for item in value.values()))
    return set()


def select_blocks(
    blocks: Mapping[str, Any], environ: Mapping[str, str]
) -> tuple[dict[str, Any], dict[str, tuple[str, ...]]]:
    """Split provider blocks into those whose ``${VAR}`` references are all set in
    ``environ`` (returned with the references filled in) and the others.

    The extension's loader treats a missing variable as a configuration error, which is right
    for a real app; the example instead turns such a provider off and tells why.

    :return: ``(enabled blocks, {name: missing variable names})``.
    :raises ConfigurationError: for a reference that is not a valid variable name.
    """
    enabled: dict[str, Any] = {}
    missing: dict[str, tuple[str, ...]] = {}
    problems: list[ConfigurationProblem] = []
    for name, block in blocks.items():
        absent = tuple(sorted(v for v in _variables(block) if v not in environ))
        if absent:
            missing[name] = absent
        elif isinstance(block, Mapping):
            enabled[name] = {
                key: expand_environment(value, name, str(key), environ, problems)
                for key, value in block.items()
            }
        else:
            enabled[name] = block  # the extension reports what is wrong with it
    if problems:
        raise ConfigurationError(problems)
    return enabled, missing


def create_app(
    environ: Mapping[str, str] | None = None, config: Mapping[str, Any] | None = None
) -> Flask:
    """Create the example app.

    :param environ: Variables for the ``${VAR}`` references of ``providers.yaml``, on top of
        ``os.environ`` (``python -m example_app`` passes the local identity provider's
        ``LOCAL_IDP_URL`` and ``LOCAL_IDP_CLIENT_SECRET`` this way), both on top of
        :data:`~example_app.bluesky.DEFAULT_VARIABLES`.
    :param config: Flask configuration applied last, e.g. ``TRUSTED_HOSTS``.
    :raises ConfigurationError: when an enabled provider block is invalid.
    """
    variables = {**bluesky.DEFAULT_VARIABLES, **os.environ, **(environ or {})}
    enabled, missing = select_blocks(load_yaml_blocks(PROVIDERS_FILE), variables)
    app = Flask(__name__, instance_path=variables.get("EXAMPLE_INSTANCE_PATH") or None)
    app.config.update(
        # One process serves the example, so a random key per run is enough. Every process of
        # a real deployment must share one SECRET_KEY: it signs the session and the state.
        SECRET_KEY=variables.get("EXAMPLE_SECRET_KEY") or secrets.token_hex(32),
        # A relative redirectURL is resolved against the request's Host: only these count.
        TRUSTED_HOSTS=["127.0.0.1", "localhost"],
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SOCIAL_OAUTH2_PROVIDERS=enabled,
        # Users, their linked identities and the identities' encrypted tokens, in one SQLite
        # file in the instance folder: the API calls of the account page use them.
        SOCIAL_OAUTH2_TOKEN_STORE="sqlite:///example.sqlite3",
        EXAMPLE_DISABLED_PROVIDERS=missing,
        # Where the client-side page sends the browser: a single-page app knows its provider's
        # authorization endpoint itself (the block has no authorizationURL).
        EXAMPLE_BROWSER_AUTHORIZATION_URL=(
            f"{variables['LOCAL_IDP_URL']}/authorize" if "LOCAL_IDP_URL" in variables else None
        ),
    )
    app.config.update(config or {})
    social = SocialOAuth2(app)
    social.on_error(_sign_in_failed)
    social.on_authenticated(_signed_in)
    users = Users()
    app.extensions["example_users"] = users
    login_manager = LoginManager(app)
    login_manager.user_loader(users.get)
    signals.token_updated.connect(_note_refresh, app, weak=False)
    hide_callback_queries(app.config["SOCIAL_OAUTH2_URL_RULE"])
    app.register_blueprint(bp)
    app.register_error_handler(404, _not_found)
    app.before_request(_make_nonce)
    app.after_request(_security_headers)
    return app


# -- pages -------------------------------------------------------------------------------------


def _make_nonce() -> None:
    g.csp_nonce = secrets.token_urlsafe(16)


def _security_headers(response: Response) -> Response:
    nonce = g.get("csp_nonce", "")
    forms = "'self'" + g.get("form_action_sources", "")
    response.headers.setdefault(
        "Content-Security-Policy",
        f"default-src 'none'; style-src 'nonce-{nonce}'; img-src 'self'; form-action {forms};"
        " frame-ancestors 'none'; base-uri 'none'",
    )
    response.headers.setdefault("Referrer-Policy", "no-referrer")
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("X-Frame-Options", "DENY")
    if response.mimetype == "text/html":
        response.headers.setdefault("Cache-Control", "no-store")
    return response


def _render(template: str, status: int = 200, **context: Any) -> Response:
    page = render_template(template, csp_nonce=g.get("csp_nonce", ""), **context)
    return Response(page, status=status, mimetype="text/html")


def _csrf_token() -> str:
    token = session.get(_CSRF_KEY)
    if not isinstance(token, str):
        token = secrets.token_urlsafe(32)
        session[_CSRF_KEY] = token
    return token


@bp.get("/")
def index() -> ResponseReturnValue:
    """The sign-in page: one button per configured provider."""
    if isinstance(session.get(PROFILE_KEY), dict):
        return redirect(url_for(".profile"))
    social: SocialOAuth2 = current_app.extensions["social_oauth2"].extension
    enabled = [
        ProviderChoice(name, *_label(name), client_side=provider.settings.authorization_url is None)
        for name, provider in social.providers.items()
        if name != bluesky.PROVIDER  # a form, not a link
    ]
    disabled = [
        ProviderChoice(name, *_label(name), missing=variables)
        for name, variables in current_app.config["EXAMPLE_DISABLED_PROVIDERS"].items()
    ]
    return _render(
        "signin.html",
        enabled=enabled,
        disabled=disabled,
        notices=get_flashed_messages(),
        handle_form=_handle_form(),
    )


@bp.get("/client-side")
def client_side() -> ResponseReturnValue:
    """A single-page app's sign-in, run by the page's script: it makes the PKCE pair with
    WebCrypto, sends the browser to the provider, checks the state when the provider sends it
    back here, and POSTs the code with the verifier to ``/authenticate/local-spa``."""
    social: SocialOAuth2 = current_app.extensions["social_oauth2"].extension
    authorization_url = current_app.config["EXAMPLE_BROWSER_AUTHORIZATION_URL"]
    if CLIENT_SIDE_PROVIDER not in social.providers or not authorization_url:
        return redirect(url_for(".index"))
    settings = social.provider(CLIENT_SIDE_PROVIDER).settings
    client = {
        "authorizationURL": authorization_url,
        "clientID": settings.client_id,
        "scope": settings.scope or "",
        "redirectURI": url_for(".client_side", _external=True),
        "postURL": url_for("social_oauth2.authenticate", provider=CLIENT_SIDE_PROVIDER),
    }
    response = _render("client_side.html", client=client)
    nonce = g.get("csp_nonce", "")
    response.headers["Content-Security-Policy"] = (
        f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}';"
        " connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none';"
        " base-uri 'none'"
    )
    return response


@bp.get("/favicon.ico")
def favicon() -> ResponseReturnValue:
    """The app's icon (an SVG; browsers ask for this path)."""
    response = Response(_FAVICON, mimetype="image/svg+xml")
    response.headers["Cache-Control"] = "public, max-age=86400"
    return response


@bp.get("/profile")
def profile(api_answer: ApiAnswer | None = None) -> ResponseReturnValue:
    """The signed-in page: the user's linked identities (call an API, unlink, link another
    provider) and the normalized profile of the last sign-in."""
    data = session.get(PROFILE_KEY)
    if not isinstance(data, dict):
        return redirect(url_for(".index"))
    name = (
        data.get("full_name")
        or data.get("email")
        or data.get("username")  # a Bluesky handle: no e-mail address is shared
        or data.get("provider_key")
        or "?"
    )
    initials = "".join(part[0] for part in str(name).split()[:2]).upper()
    hue = int(hashlib.sha256(str(data.get("provider_key")).encode()).hexdigest()[:2], 16) % 8
    return _render(
        "profile.html",
        display_name=name,
        initials=initials or "?",
        hue=hue,
        provider_label=_label(str(data.get("provider_id")))[0],
        email=data.get("email"),
        handle=_shown_handle(data, str(name)),
        rows=[(label, data.get(key)) for key, label in _PROFILE_FIELDS],
        csrf_token=_csrf_token(),
        account=_account(),
        handle_form=_handle_form(),
        api_answer=api_answer,
    )


def _shown_handle(data: Mapping[str, Any], name: str) -> str | None:
    """``@username`` under the name, for a profile without an e-mail address (a Bluesky
    handle), unless it is the name shown already."""
    username = data.get("username")
    if not username or data.get("email") or username == name:
        return None
    return f"@{username}"


@bp.post("/sign-out")
def sign_out() -> ResponseReturnValue:
    """Forget the signed-in user. A POST with the session's CSRF token, so that another site
    cannot sign the user out."""
    sent = request.form.get(_CSRF_KEY, "")
    expected = session.get(_CSRF_KEY)
    if not isinstance(expected, str) or not hmac.compare_digest(sent.encode(), expected.encode()):
        return _render(
            "error.html",
            400,
            title="Sign-out refused",
            message="The sign-out form has expired. Go back, reload the page and try again.",
            provider_label=None,
            code=400,
        )
    _social().sign_out()
    logout_user()
    session.clear()
    flash("You are signed out.")
    return redirect(url_for(".index"), code=303)


@bp.post("/call/<provider>/<key>")
def call_api(provider: str, key: str) -> ResponseReturnValue:
    """Call ``provider``'s API as the user's identity ``key``, refreshing its token first when
    it is due, and show the answer on the account page."""
    refused = _refuse_without_csrf()
    if refused is not None:
        return refused
    if not _owns(provider, key) or provider not in API_CALLS:
        return _not_found(None)
    try:
        answer = _social().api(provider, key=key).get(API_CALLS[provider])
    except SignInRequiredError:
        flash(f"{_label(provider)[0]} needs you to sign in with it again.")
        return redirect(url_for(".profile"), code=303)
    except AuthenticationError as error:
        return _sign_in_failed(provider, error)
    try:
        body = answer.json()
    except ValueError:
        body = answer.text[:500]
    return profile(
        ApiAnswer(
            provider=_label(provider)[0],
            status=answer.status_code,
            body=body,
            refreshed=bool(g.get("example_refreshed")),
        )
    )


@bp.post("/unlink/<provider>/<key>")
def unlink(provider: str, key: str) -> ResponseReturnValue:
    """Unlink the user's identity ``key`` of ``provider``: its tokens are revoked and deleted.
    Unlinking the last identity signs the user out."""
    refused = _refuse_without_csrf()
    if refused is not None:
        return refused
    if not _owns(provider, key):
        return _not_found(None)
    social = _social()
    social.unlink(provider, key)
    if not social.identities(current_user.id):
        social.sign_out()
        logout_user()
        session.clear()
        flash(
            f"{_label(provider)[0]} is unlinked; it was your last sign-in, so you are signed out."
        )
        return redirect(url_for(".index"), code=303)
    flash(f"{_label(provider)[0]} is unlinked.")
    return redirect(url_for(".profile"), code=303)


@dataclass(frozen=True)
class ApiAnswer:
    """What the account page shows of an API call."""

    provider: str
    status: int
    body: Any
    refreshed: bool


@dataclass(frozen=True)
class LinkedIdentity:
    """An identity of the signed-in user, as the account page shows it."""

    provider: str
    key: str
    label: str
    can_call: bool
    expires_in: int | None


def _account() -> dict[str, Any] | None:
    """The signed-in user, their identities and the providers they can still link."""
    if not current_user.is_authenticated:
        return None
    social = _social()
    store = current_app.extensions["social_oauth2"].runtime.token_store
    identities = []
    for found in social.identities(current_user.id):
        try:
            token = store.load(found.provider, found.provider_key)
        except AuthenticationError:
            token = None
        expires = token.expires_at if token is not None else None
        identities.append(
            LinkedIdentity(
                provider=found.provider,
                key=found.provider_key,
                label=_label(found.provider)[0],
                can_call=token is not None and found.provider in API_CALLS,
                expires_in=None if expires is None else max(0, int(expires - time.time())),
            )
        )
    linked = {identity.provider for identity in identities}
    can_link = [
        ProviderChoice(name, *_label(name))
        for name, provider in social.providers.items()
        if name not in linked
        and name != bluesky.PROVIDER  # a form, not a link
        and provider.settings.authorization_url is not None
    ]
    return {
        "name": current_user.name,
        "identities": identities,
        "can_link": can_link,
        "can_link_bluesky": bluesky.PROVIDER in social.providers and bluesky.PROVIDER not in linked,
        "notices": get_flashed_messages(),
    }


def _handle_form() -> bluesky.HandleForm | None:
    """The Bluesky handle form, when the block is configured; its redirect to the account's
    server is allowed by the page's Content-Security-Policy."""
    social = _social()
    form = bluesky.handle_form(social, request)
    if form is not None:
        g.form_action_sources = bluesky.form_action_sources(social)
    return form


def _owns(provider: str, key: str) -> bool:
    """Whether the signed-in user has the identity ``key`` of ``provider``: another user's
    identity is never reached, whatever the URL says."""
    if not current_user.is_authenticated:
        return False
    found = _social().identity(provider, key)
    return found is not None and found.user_id == current_user.id


def _refuse_without_csrf() -> Response | None:
    sent = request.form.get(_CSRF_KEY, "")
    expected = session.get(_CSRF_KEY)
    if isinstance(expected, str) and hmac.compare_digest(sent.encode(), expected.encode()):
        return None
    return _render(
        "error.html",
        400,
        title="Request refused",
        message="The form has expired. Go back, reload the page and try again.",
        provider_label=None,
        code=400,
    )


def _social() -> SocialOAuth2:
    social: SocialOAuth2 = current_app.extensions["social_oauth2"].extension
    return social


def _signed_in(provider: SocialProvider, info: OAuth2Info, profile: SocialProfile) -> Any:
    """After a sign-in: the app's user of this identity (found by the identity alone, never
    by e-mail), else the user already signed in (who is adding a provider), else a new user;
    the identity is linked to that user, who is signed in with Flask-Login."""
    social = _social()
    users: Users = current_app.extensions["example_users"]
    found = social.identity(provider.name, profile.provider_key)
    user = users.get(found.user_id) if found is not None and found.user_id else None
    if user is None and current_user.is_authenticated:
        user = users.get(current_user.id)
    if user is None:
        name = profile.full_name or profile.username or profile.email or "New user"
        user = users.create(name)
    social.link(user.id)
    login_user(user)
    session[PROFILE_KEY] = profile.to_dict()
    target = social.next_url(url_for("example.profile"))
    if request.is_json:  # the client-side page's POST: its script goes on to `next`
        return {"signed_in": True, "provider": provider.name, "next": target}
    return redirect(target)


def _note_refresh(app: Flask, **changes: Any) -> None:
    g.example_refreshed = True


def _sign_in_failed(provider_name: str, error: AuthenticationError) -> ResponseReturnValue:
    if isinstance(error, StateError) and isinstance(session.get(PROFILE_KEY), dict):
        # Back to a used callback after signing in: the flow is over, the user is signed in.
        return redirect(url_for("example.profile"))
    title = "Sign-in cancelled" if isinstance(error, AccessDeniedError) else "Sign-in failed"
    return _render(
        "error.html",
        error.status_code,
        title=title,
        message=error.public_message,
        provider_label=_label(provider_name)[0],
        code=error.status_code,
    )


def _not_found(error: Exception | None) -> ResponseReturnValue:
    provider = (request.view_args or {}).get("provider")
    if request.endpoint != "social_oauth2.authenticate" or not isinstance(provider, str):
        return _render(
            "error.html",
            404,
            title="Page not found",
            message="There is no page at this address.",
            provider_label=None,
            code=404,
        )
    missing = current_app.config["EXAMPLE_DISABLED_PROVIDERS"].get(provider)
    if missing:
        message = f"{_label(provider)[0]} is not configured: set {', '.join(missing)} and restart."
    else:
        message = "This example has no provider of that name."
    return _render(
        "error.html",
        404,
        title="Unknown provider",
        message=message,
        provider_label=None,
        code=404,
    )
