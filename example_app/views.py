"""The example's pages, on the ``example`` blueprint: sign-in, the client-side sign-in, the
account page and its forms (call an API, unlink, sign out), the icon, and the 404 page.

The pages' security headers and CSRF checks are in :mod:`example_app.security`; what the
account page lists, in :mod:`example_app.account`.
"""

from __future__ import annotations

import hashlib
from typing import Final

from flask import (
    Blueprint,
    Response,
    current_app,
    flash,
    g,
    get_flashed_messages,
    redirect,
    request,
    session,
    url_for,
)
from flask.typing import ResponseReturnValue
from flask_login import current_user, logout_user
from werkzeug.exceptions import MethodNotAllowed

from flask_social_oauth2.errors import AuthenticationError, SignInRequiredError

from . import bluesky
from .account import (
    API_CALLS,
    PROFILE_FIELDS,
    PROFILE_KEY,
    ApiAnswer,
    account,
    owns,
    shown_handle,
    shows_identity,
)
from .providers import ProviderChoice, label, social
from .security import csrf_token, refuse_without_csrf, render
from .sign_in import sign_in_failed

__all__ = ["CLIENT_SIDE_PROVIDER", "bp", "method_not_allowed", "not_found"]

#: The provider the client-side page signs in with (configured without authorizationURL).
CLIENT_SIDE_PROVIDER: Final = "local-spa"

_FAVICON: Final = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">'
    '<defs><linearGradient id="g" x1="0" y1="0" x2="1" y2="1">'
    '<stop offset="0" stop-color="#3056d3"/><stop offset="1" stop-color="#7b4fd6"/>'
    '</linearGradient></defs><rect width="32" height="32" rx="8" fill="url(#g)"/>'
    '<circle cx="16" cy="12.5" r="5" fill="#fff"/>'
    '<path d="M6.5 26c1.6-5 5.3-7.5 9.5-7.5s7.9 2.5 9.5 7.5z" fill="#fff"/></svg>'
)

#: The pages; ``create_app`` registers it.
bp = Blueprint("example", __name__)


@bp.get("/")
def index() -> ResponseReturnValue:
    """The sign-in page: one button per configured provider."""
    if isinstance(session.get(PROFILE_KEY), dict) or current_user.is_authenticated:
        return redirect(url_for(".profile"))
    enabled = [
        ProviderChoice(name, *label(name), client_side=provider.settings.authorization_url is None)
        for name, provider in social().providers.items()
        if name != bluesky.PROVIDER  # a form, not a link
    ]
    disabled = [
        ProviderChoice(name, *label(name), missing=variables)
        for name, variables in current_app.config["EXAMPLE_DISABLED_PROVIDERS"].items()
    ]
    return render(
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
    extension = social()
    authorization_url = current_app.config["EXAMPLE_BROWSER_AUTHORIZATION_URL"]
    if CLIENT_SIDE_PROVIDER not in extension.providers or not authorization_url:
        return redirect(url_for(".index"))
    settings = extension.provider(CLIENT_SIDE_PROVIDER).settings
    client = {
        "authorizationURL": authorization_url,
        "clientID": settings.client_id,
        "scope": settings.scope or "",
        "redirectURI": url_for(".client_side", _external=True),
        "postURL": url_for("social_oauth2.authenticate", provider=CLIENT_SIDE_PROVIDER),
    }
    response = render("client_side.html", client=client)
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
    provider) and the normalized profile of the last sign-in, while its identity is linked;
    once it is unlinked, the page is headed by the user alone."""
    data = session.get(PROFILE_KEY)
    if not isinstance(data, dict):
        if not current_user.is_authenticated:
            return redirect(url_for(".index"))
        data = {"full_name": current_user.name, "provider_key": f"user {current_user.id}"}
    name = (
        data.get("full_name")
        or data.get("email")
        or data.get("username")  # a Bluesky handle: no e-mail address is shared
        or data.get("provider_key")
        or "?"
    )
    initials = "".join(part[0] for part in str(name).split()[:2]).upper()
    hue = int(hashlib.sha256(str(data.get("provider_key")).encode()).hexdigest()[:2], 16) % 8
    provider = data.get("provider_id")
    return render(
        "profile.html",
        display_name=name,
        initials=initials or "?",
        hue=hue,
        provider_label=label(provider)[0] if isinstance(provider, str) else None,
        email=data.get("email"),
        handle=shown_handle(data, str(name)),
        rows=[(title, data.get(key)) for key, title in PROFILE_FIELDS] if provider else [],
        csrf_token=csrf_token(),
        account=account(),
        handle_form=_handle_form(),
        api_answer=api_answer,
    )


@bp.post("/sign-out")
def sign_out() -> ResponseReturnValue:
    """Forget the signed-in user. A POST with the session's CSRF token, so that another site
    cannot sign the user out."""
    refused = refuse_without_csrf(
        "Sign-out refused",
        "The sign-out form has expired. Go back, reload the page and try again.",
    )
    if refused is not None:
        return refused
    social().sign_out()
    logout_user()
    session.clear()
    flash("You are signed out.")
    return redirect(url_for(".index"), code=303)


@bp.post("/call/<provider>/<key>")
def call_api(provider: str, key: str) -> ResponseReturnValue:
    """Call ``provider``'s API as the user's identity ``key``, refreshing its token first when
    it is due, and show the answer on the account page."""
    refused = refuse_without_csrf()
    if refused is not None:
        return refused
    if not owns(provider, key) or provider not in API_CALLS:
        return not_found(None)
    try:
        answer = social().api(provider, key=key).get(API_CALLS[provider])
    except SignInRequiredError:
        flash(f"{label(provider)[0]} needs you to sign in with it again.")
        return redirect(url_for(".profile"), code=303)
    except AuthenticationError as error:
        return sign_in_failed(provider, error)
    try:
        body = answer.json()
    except ValueError:
        body = answer.text[:500]
    return profile(
        ApiAnswer(
            provider=label(provider)[0],
            status=answer.status_code,
            body=body,
            refreshed=bool(g.get("example_refreshed")),
        )
    )


@bp.post("/unlink/<provider>/<key>")
def unlink(provider: str, key: str) -> ResponseReturnValue:
    """Unlink the user's identity ``key`` of ``provider``: its tokens are revoked and deleted.
    Unlinking the last identity signs the user out."""
    refused = refuse_without_csrf()
    if refused is not None:
        return refused
    if not owns(provider, key):
        return not_found(None)
    extension = social()
    extension.unlink(provider, key)
    if shows_identity(provider, key):  # the page's header no longer names it
        session.pop(PROFILE_KEY)
    if not extension.identities(current_user.id):
        extension.sign_out()
        logout_user()
        session.clear()
        flash(f"{label(provider)[0]} is unlinked; it was your last sign-in, so you are signed out.")
        return redirect(url_for(".index"), code=303)
    flash(f"{label(provider)[0]} is unlinked.")
    return redirect(url_for(".profile"), code=303)


@bp.get("/call/<provider>/<key>")
@bp.get("/unlink/<provider>/<key>")
def account_form_address(provider: str, key: str) -> ResponseReturnValue:
    """A ``GET`` of a button's address (the address bar shows the call's after "Call the API";
    a reload from there, a bookmark): nothing is done, the browser goes to the account page,
    where the buttons are."""
    return redirect(url_for(".profile"), code=303)


def method_not_allowed(error: MethodNotAllowed) -> ResponseReturnValue:
    """The 405 page, e.g. for a ``GET`` of the sign-out button's address: the app's page rather
    than Werkzeug's, pointing back to the app."""
    response = render(
        "error.html",
        405,
        title="Use the page's button",
        message="This address answers a button of the app's pages, not a link or a typed address.",
        provider_label=None,
        code=405,
    )
    response.headers["Allow"] = ", ".join(sorted(error.valid_methods or ()))
    return response


def not_found(error: Exception | None) -> ResponseReturnValue:
    """The 404 page; for ``/authenticate/<provider>`` of a provider that is off, it names the
    variables that turn it on."""
    provider = (request.view_args or {}).get("provider")
    if request.endpoint != "social_oauth2.authenticate" or not isinstance(provider, str):
        return render(
            "error.html",
            404,
            title="Page not found",
            message="There is no page at this address.",
            provider_label=None,
            code=404,
        )
    missing = current_app.config["EXAMPLE_DISABLED_PROVIDERS"].get(provider)
    if missing:
        message = f"{label(provider)[0]} is not configured: set {', '.join(missing)} and restart."
    else:
        message = "This example has no provider of that name."
    return render(
        "error.html",
        404,
        title="Unknown provider",
        message=message,
        provider_label=None,
        code=404,
    )


def _handle_form() -> bluesky.HandleForm | None:
    """The Bluesky handle form, when the block is configured; its redirect to the account's
    server is allowed by the page's Content-Security-Policy."""
    extension = social()
    form = bluesky.handle_form(extension, request)
    if form is not None:
        g.form_action_sources = bluesky.form_action_sources(extension)
    return form
