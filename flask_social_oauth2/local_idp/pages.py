"""The local identity provider's pages, rendered from the Jinja templates in ``templates/``
(package data, loaded with Jinja's package loader)."""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable
from functools import cache
from importlib.resources import files
from typing import Any, Final
from urllib.parse import urlsplit

from flask import Response
from jinja2 import Environment, PackageLoader, select_autoescape

from .models import LocalUser

__all__ = [
    "avatar_svg",
    "consent_page",
    "favicon",
    "html_response",
    "index_page",
    "refused_page",
    "render",
]

_CSP_SOURCE_RE: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:(//[A-Za-z0-9.\-\[\]:]+)?")
_PACKAGE: Final = "flask_social_oauth2.local_idp"
_ENVIRONMENT: Final = Environment(
    loader=PackageLoader(_PACKAGE, "templates"),
    autoescape=select_autoescape(["html", "svg"]),
    auto_reload=False,
)


def render(template: str, **context: Any) -> str:
    """Render one of the package's templates."""
    return _ENVIRONMENT.get_template(template).render(**context)


@cache
def _page_csp() -> str:
    # The pages' only style is the included stylesheet: allow exactly it, by its hash.
    css = render("idp.css").encode()
    digest = base64.b64encode(hashlib.sha256(css).digest()).decode()
    return (
        f"default-src 'none'; style-src 'sha256-{digest}'; img-src 'self' data:; "
        "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    )


@cache
def favicon() -> bytes:
    """The provider's icon, an SVG."""
    return (
        files(__package__ or "flask_social_oauth2.local_idp") / "static/favicon.svg"
    ).read_bytes()


def html_response(body: str, status: int = 200, *, form_target: str | None = None) -> Response:
    """An HTML page with the pages' Content-Security-Policy.

    :param form_target: A CSP source the consent form's redirect may go to.
    """
    response = Response(body, status=status, mimetype="text/html")
    csp = _page_csp()
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


def index_page(issuer: str, links: Iterable[tuple[str, str]]) -> Response:
    """The page at ``/``: the issuer and its endpoints."""
    return html_response(
        render("index.html", title="Local identity provider", issuer=issuer, links=links)
    )


def refused_page(error: str, description: str | None, status: int = 400) -> Response:
    """The page for an authorization request that cannot go back to its client."""
    page = render(
        "refused.html", title="Sign-in request refused", error=error, description=description
    )
    return html_response(page, status)


def consent_page(
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
    """The sign-in form: any name and e-mail, Approve or Deny."""
    page = render(
        "consent.html",
        title="Sign in - local identity provider",
        client_id=client_id,
        host=urlsplit(redirect_uri).netloc or redirect_uri,
        scopes=scope.split(),
        hidden=list(hidden),
        csrf_token=csrf_token,
        name=name,
        email=email,
        message=message,
    )
    return html_response(page, status, form_target=_csp_origin(redirect_uri))


def avatar_svg(user: LocalUser | None, sub: str) -> str:
    """A generated initials avatar for ``sub``."""
    initials = "?"
    if user is not None:
        initials = "".join(part[0] for part in user.name.split()[:2]).upper() or "?"
    hue = int(hashlib.sha256(sub.encode("utf-8")).hexdigest()[:4], 16) % 360
    return render("avatar.svg", hue=hue, initials=initials)
