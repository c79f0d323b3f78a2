"""The pages' security: a Content-Security-Policy nonce per request, the security headers of
every response, and the CSRF token of the pages' POST forms (sign out, call an API, unlink).
"""

from __future__ import annotations

import hmac
import secrets
from typing import Any, Final

from flask import Response, g, render_template, request, session

__all__ = [
    "CSRF_KEY",
    "csrf_token",
    "make_nonce",
    "refuse_without_csrf",
    "render",
    "security_headers",
]

#: The session key, and the form field, of the CSRF token.
CSRF_KEY: Final = "csrf_token"


def make_nonce() -> None:
    """Make this request's nonce for the page's ``<style>`` (and ``<script>``) elements."""
    g.csp_nonce = secrets.token_urlsafe(16)


def security_headers(response: Response) -> Response:
    """Add the security headers a view has not set: a Content-Security-Policy that lets in only
    the nonce's styles and forms sent to this app (and to the servers ``g.form_action_sources``
    names), no referrer, no framing, and no caching of pages."""
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


def render(template: str, status: int = 200, **context: Any) -> Response:
    """The page ``template`` rendered with ``context`` and this request's nonce."""
    page = render_template(template, csp_nonce=g.get("csp_nonce", ""), **context)
    return Response(page, status=status, mimetype="text/html")


def csrf_token() -> str:
    """The session's CSRF token, made on first use, for the page's POST forms."""
    token = session.get(CSRF_KEY)
    if not isinstance(token, str):
        token = secrets.token_urlsafe(32)
        session[CSRF_KEY] = token
    return token


def refuse_without_csrf(
    title: str = "Request refused",
    message: str = "The form has expired. Go back, reload the page and try again.",
) -> Response | None:
    """``None`` when the POSTed form carries the session's CSRF token, else the 400 page
    saying ``title`` and ``message``: another site cannot make the user's browser send it."""
    sent = request.form.get(CSRF_KEY, "")
    expected = session.get(CSRF_KEY)
    if isinstance(expected, str) and hmac.compare_digest(sent.encode(), expected.encode()):
        return None
    return render("error.html", 400, title=title, message=message, provider_label=None, code=400)
