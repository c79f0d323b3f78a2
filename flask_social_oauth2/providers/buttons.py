"""Which sign-in button each configured provider gets, the two Jinja globals that render them
(``social_sign_in_button`` and ``social_sign_in_buttons``, registered by ``init_app``) and the
ready sign-in page (``SOCIAL_OAUTH2_SIGN_IN_PAGE``).

The HTML itself is :mod:`flask_social_oauth2.web.buttons`'s; this module knows the providers: a
built-in provider's brand, Bluesky's handle form, a block's ID-token sign-in.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeGuard
from urllib.parse import quote, urlsplit

from flask import (
    Blueprint,
    Response,
    abort,
    g,
    make_response,
    render_template,
    request,
    url_for,
)
from flask.typing import ResponseReturnValue
from markupsafe import Markup

from ..errors import SocialOAuth2Error
from ..runtime import Runtime, current_runtime
from ..urls import is_loopback_host
from ..web import buttons
from ..web.id_token_sign_in import one_tap
from ..web.provider import SocialProvider
from ..web.redirects import safe_next_path
from ..web.state_cookie import FLOW_PAGE_HEADERS
from .base import BuiltinProvider
from .oauth2 import OAuth2Provider

__all__ = [
    "BRANDS",
    "install",
    "show_sign_in_page",
    "social_sign_in_button",
    "social_sign_in_buttons",
    "work_email_form_applies",
]

#: The built-in providers whose brand button is drawn, by the built-in provider's name.
BRANDS: Final[Mapping[str, str]] = {
    "google": "google",
    "apple": "apple",
    "microsoft": "microsoft",
    "azure": "microsoft",
    "github": "github",
    "facebook": "facebook",
    "linkedin": "linkedin",
    "bluesky": "bluesky",
}
#: The built-in providers whose sign-in starts from a handle typed into a form.
HANDLE_PROVIDERS: Final = frozenset({"bluesky"})
#: The page's template; a file of this name in the app's templates replaces it.
SIGN_IN_TEMPLATE: Final = "social_oauth2/sign_in.html"
#: The query fields of a provider's callback, which the page's e-mail start refuses.
_FLOW_FIELDS: Final = frozenset({"code", "state", "error", "iss"})
#: Google Identity Services' origin, which its script, frames and requests come from.
_GOOGLE_GSI: Final = "https://accounts.google.com/gsi/"


def _kind(provider: SocialProvider) -> str | None:
    """The built-in provider ``provider`` is (by its class, whatever the block's name)."""
    return provider.facts.name if isinstance(provider, BuiltinProvider) else None


def _title(provider: SocialProvider) -> str:
    return provider.title if isinstance(provider, OAuth2Provider) else provider.name


def _signs_in_with_id_token(provider: SocialProvider) -> TypeGuard[OAuth2Provider]:
    return isinstance(provider, OAuth2Provider) and provider.options.id_token_sign_in


def _has_button(provider: SocialProvider) -> bool:
    """Whether a button can start ``provider``'s sign-in: it starts on the server (an
    ``authorizationURL``, or an issuer whose discovery document names the endpoint), or it
    signs in with Google's ID tokens. A block that only redeems a client-side framework's
    code has none."""
    if not isinstance(provider, OAuth2Provider) or _signs_in_with_id_token(provider):
        return True
    return provider.settings.authorization_url is not None or provider.issuer is not None


def _provider(runtime: Runtime, name: str) -> SocialProvider:
    """``social.provider(name)``: the configured provider (or, where the app loads providers
    at runtime, the loaded one).

    :raises UnknownProviderError: naming the configured providers.
    """
    extension: Any = runtime.extension  # typed loosely: it sits above this module
    provider: SocialProvider = extension.provider(name)
    return provider


def _csp_nonce() -> str | None:
    """The page's Content-Security-Policy nonce: ``g.csp_nonce`` (as the docs' apps set it),
    else Flask-Talisman's ``request.csp_nonce``."""
    nonce = g.get("csp_nonce") or getattr(request, "csp_nonce", None)
    return nonce if isinstance(nonce, str) and nonce else None


def _route_paths(runtime: Runtime) -> Callable[[str], str]:
    """The path of the sign-in route for a provider name, built by ``url_for`` once per call
    and filled in per name (as Werkzeug quotes a path segment): a page of buttons would feel
    one ``url_for`` per button."""
    marker = "__social_oauth2_provider__"
    prefix, _, suffix = url_for(runtime.endpoint, provider=marker).partition(marker)
    return lambda name: prefix + quote(name, safe="!$&'()*+,/:;=@") + suffix


def _button(
    runtime: Runtime,
    provider: SocialProvider,
    next_path: str | None,
    text: Any,
    route_path: Callable[[str], str],
) -> Markup:
    name = provider.name
    kind = _kind(provider)
    brand = BRANDS.get(kind) if kind else None
    title = _title(provider)
    wording = str(text) if text else None
    if _signs_in_with_id_token(provider):
        google = one_tap(provider, runtime, next_path)  # a nonce issued to this browser
        return buttons.one_tap_markup(
            client_id=google.client_id,
            login_uri=google.login_uri,
            nonce=google.nonce,
            csp_nonce=_csp_nonce(),
        )
    if kind in HANDLE_PROVIDERS:
        action = route_path(name)
        return buttons.handle_form(name, brand, title, action, next_path, wording)
    href = route_path(name)
    if next_path:  # encoded here as url_for would, at a fraction of its cost
        href = f"{href}?next={quote(next_path, safe='/')}"
    return buttons.link_button(name, brand, title, href, wording)


def social_sign_in_button(name: str, next: str | None = None, text: str | None = None) -> Markup:
    """The sign-in button of the configured provider ``name``: the brand's own button (Google,
    Apple, Microsoft, GitHub, Facebook, LinkedIn, Bluesky), else a neutral one that says
    "Sign in with <title>"; Bluesky's is a form that asks for the handle, and a block with
    ``customProperties.idTokenSignIn`` gets Google's own markup and script.

    :param name: The provider's name.
    :param next: Where to go after the sign-in: a same-origin path, as the route takes it
        (anything else is left out).
    :param text: Wording that replaces the default, e.g. "Sign up with Google".
    :raises UnknownProviderError: when no provider of that name is configured.
    """
    runtime = current_runtime()
    provider = _provider(runtime, name)
    if not _has_button(provider):
        raise SocialOAuth2Error(
            f"provider {name!r} has no sign-in button: it has no authorizationURL, so its"
            " sign-in runs in the browser (a client-side framework POSTs the code)"
        )
    return _button(runtime, provider, safe_next_path(next), text, _route_paths(runtime))


def social_sign_in_buttons(next: str | None = None) -> Markup:
    """Every configured provider's :func:`social_sign_in_button`, in configuration order,
    in a ``<div class="social-buttons">`` (not those whose sign-in only a client-side
    framework runs: they have no ``authorizationURL``)."""
    runtime = current_runtime()
    next_path = safe_next_path(next)
    route_path = _route_paths(runtime)
    inner = Markup("").join(
        _button(runtime, provider, next_path, None, route_path)
        for provider in runtime.providers.values()
        if _has_button(provider)
    )
    return Markup('<div class="social-buttons">{}</div>').format(inner)


def work_email_form_applies(runtime: Runtime) -> bool:
    """Whether the page shows "Sign in with your work e-mail": the extension finds providers by
    e-mail domain (``social.provider_for_email``) and a block names its ``domains`` or the app
    set a domain loader."""
    return (
        bool(runtime.email_domains)
        or getattr(runtime.extension, "_domain_loader", None) is not None
    )


def _page_policy(runtime: Runtime, nonce: str, *, email_form: bool) -> str:
    """The page's Content-Security-Policy: its own style; forms to this app, and on to the
    servers a handle or e-mail form's start redirects to; Google's script where a block signs
    in with ID tokens."""
    providers = list(runtime.providers.values())
    form_action = ["'self'"]
    if email_form or any(_kind(p) in HANDLE_PROVIDERS for p in providers):
        form_action.append("https:")
        # an e-mail's provider is known only once typed: on a development server (loopback),
        # it may be another local server
        on_loopback = email_form and is_loopback_host(urlsplit(f"//{request.host}").hostname or "")
        if on_loopback or any(
            isinstance(p, OAuth2Provider) and p.options.allow_loopback for p in providers
        ):
            form_action += ["http://localhost:*", "http://127.0.0.1:*"]
    script = style = frame = connect = ""
    if any(_signs_in_with_id_token(p) for p in providers):
        script = f"; script-src 'nonce-{nonce}' {buttons.GOOGLE_CLIENT_SCRIPT}"
        style = f" {_GOOGLE_GSI}style"
        frame = f"; frame-src {_GOOGLE_GSI}"
        connect = f"; connect-src {_GOOGLE_GSI}"
    return (
        f"default-src 'none'; style-src 'nonce-{nonce}'{style}{script}{frame}{connect};"
        f" img-src 'self' data:; form-action {' '.join(form_action)};"
        " frame-ancestors 'none'; base-uri 'none'"
    )


def show_sign_in_page(message: str | None = None, status: int = 200) -> Response:
    """The ready sign-in page (template ``social_oauth2/sign_in.html``): every provider's button,
    the work e-mail form where it applies, and ``message`` (a failed sign-in's, escaped).

    The template gets ``next`` (the query's, when it is a same-origin path), ``message``,
    ``email_form`` and ``csp_nonce``; the page's Content-Security-Policy allows what it shows,
    unless the app's own view or hook sets one.
    """
    runtime = current_runtime()
    nonce = _csp_nonce()
    if nonce is None:
        nonce = secrets.token_urlsafe(16)
        g.csp_nonce = nonce  # Google's script tag takes it too
    email_form = work_email_form_applies(runtime)
    page = render_template(
        SIGN_IN_TEMPLATE,
        next=safe_next_path(request.args.get("next")),
        message=message,
        email_form=email_form,
        csp_nonce=nonce,
    )
    response = make_response(page, status)
    response.headers["Content-Security-Policy"] = _page_policy(
        runtime, nonce, email_form=email_form
    )
    for header, value in FLOW_PAGE_HEADERS.items():
        response.headers.setdefault(header, value)
    return response


def _sign_in_page_view() -> ResponseReturnValue:
    """``GET`` the page; with ``?email=`` (its work e-mail form), start that address's
    provider. A ``POST`` is the start confirmation's, for an e-mail start from another
    origin's page."""
    if "email" in request.args:
        return _start_for_email(request.args["email"])
    if request.method != "GET":
        abort(405)
    return show_sign_in_page()


def _start_for_email(address: str) -> ResponseReturnValue:
    """Start the sign-in of the provider ``social.provider_for_email(address)`` names, with
    ``login_hint`` set to the address (the specification's per-request override)."""
    runtime = current_runtime()
    if not work_email_form_applies(runtime) or _FLOW_FIELDS & request.args.keys():
        return show_sign_in_page("This page does not take that request.", 400)
    extension: Any = runtime.extension
    try:
        name = extension.provider_for_email(address)
    except ValueError:
        return show_sign_in_page("That is not an e-mail address.", 400)
    if name is None:
        return show_sign_in_page(
            "No sign-in is set up for that e-mail address. Choose one of the buttons.", 404
        )
    provider = _provider(runtime, name)
    hinted = provider.with_settings(
        lambda s: s.replace(authorization_params={**s.authorization_params, "login_hint": address})
    )
    started = hinted.authenticate()  # a start: callbacks are refused above
    return started if isinstance(started, Response) else abort(400)


def install(blueprint: Blueprint, page_rule: str | None) -> None:
    """Register the Jinja globals on the app ``blueprint`` is registered on, and the sign-in
    page at ``page_rule`` (``SOCIAL_OAUTH2_SIGN_IN_PAGE``) unless it is ``None``."""
    blueprint.add_app_template_global(social_sign_in_button, "social_sign_in_button")
    blueprint.add_app_template_global(social_sign_in_buttons, "social_sign_in_buttons")
    if page_rule is not None:
        blueprint.add_url_rule(
            page_rule, "sign_in_page", _sign_in_page_view, methods=["GET", "POST"]
        )
