"""Sign-in starts that a stranger's page cannot set off.

Any page on the internet can send a signed-in user's browser to the sign-in route; a provider
that approves silently (an earlier consent) then signs that browser in, or links the identity to
whoever is signed in (login CSRF and forced linking, OmniAuth's CVE-2015-9284). Browsers say
where a navigation came from in ``Sec-Fetch-Site``: a start marked ``cross-site`` or
``same-site`` is answered with a small page of our own whose one button POSTs the start back,
with a token signed for this browser and provider. A page of another origin can neither read
that token nor post it with the browser's cookie and this app's ``Origin``.

Same-origin links, typed URLs and browsers that send no ``Sec-Fetch-Site`` start at once.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Final

from flask import Flask, Response, after_this_request, current_app, request
from itsdangerous import BadData, URLSafeTimedSerializer
from markupsafe import escape
from werkzeug.http import dump_cookie

from ..errors import StartNotConfirmedError

#: The hidden form field of the confirmation page.
TOKEN_FIELD: Final = "start_token"  # noqa: S105 (a form field name)
#: Seconds a confirmation page stays good.
TOKEN_TTL: Final = 600
#: ``Sec-Fetch-Site`` values of a start that needs the user's click.
FOREIGN_SITES: Final = frozenset({"cross-site", "same-site"})
#: Longest token or browser value read (a token is about 120 characters).
_MAX_VALUE: Final = 512
_FORM_TYPE: Final = "application/x-www-form-urlencoded"
_CALLBACK_PARAMS: Final = ("code", "state", "error")


class StartConfirmation:
    """The confirmation of cross-site starts for one app, made in ``init_app``: only app-wide
    values (the cookie's name and path, the signing salt); a request's values go to its
    response.

    :param cookie_name: The name of the cookie that binds a token to the browser (on https it
        gets the ``__Host-`` prefix, as the state cookie does).
    :param path: The cookie's path on plain http.
    :param scope: Mixed into the signing salt (see
        :func:`~flask_social_oauth2.web.state_cookie.app_scope`).
    """

    __slots__ = ("cookie_name", "path", "salt")

    def __init__(self, *, cookie_name: str, path: str = "/", scope: str = "") -> None:
        self.cookie_name = cookie_name
        self.path = path
        self.salt = f"flask-social-oauth2.start/{scope}"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.cookie_name!r}>"

    # -- the GET start -------------------------------------------------------------------------

    @staticmethod
    def needed() -> bool:
        """Whether the current request starts a sign-in from another origin's page: no
        callback parameter in its query and ``Sec-Fetch-Site`` ``cross-site`` or ``same-site``."""
        # read from the WSGI environ: a header lookup that misses raises and catches inside
        # werkzeug, and this runs on every start
        site = request.environ.get("HTTP_SEC_FETCH_SITE")
        if site is None or site.lower() not in FOREIGN_SITES:
            return False
        args = request.args
        return not any(name in args for name in _CALLBACK_PARAMS)

    def page(self, provider: str, title: str, form_origins: tuple[str, ...]) -> Response:
        """The 200 page ("Continue to <title>") whose form POSTs the start back to the same
        address with a token bound to this browser and ``provider``.

        :param form_origins: The origins the provider's authorization address may be on: the
            browser applies the page's ``form-action`` to the redirect that answers the POST.
        """
        browser = self._browser_value()
        token = self._serializer(current_app).dumps([provider, _digest(browser)])
        action = request.script_root + request.path
        if request.query_string:
            action += "?" + request.query_string.decode("latin-1")
        html = _PAGE.format(
            title=escape(title),
            host=escape(request.host),
            action=escape(action),
            field=TOKEN_FIELD,
            token=escape(token),
            home=escape(request.script_root + "/"),
        )
        response = current_app.response_class(html, status=200, mimetype="text/html")
        headers = response.headers
        form_action = " ".join(("'self'", *form_origins))
        headers["Content-Security-Policy"] = (
            "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none';"
            f" frame-ancestors 'none'; form-action {form_action}"
        )
        headers["X-Frame-Options"] = "DENY"
        headers["Cache-Control"] = "no-store"
        headers["X-Content-Type-Options"] = "nosniff"
        # not no-referrer: the button's POST must carry this app's Origin, which Chromium
        # sends as "null" under no-referrer
        headers["Referrer-Policy"] = "same-origin"
        headers["Vary"] = "Cookie, Sec-Fetch-Site"
        return response

    def _browser_value(self) -> str:
        """This browser's random value: the one its cookie holds, else a new one, set on the
        response (so that two confirmation pages open in two tabs both stay good)."""
        name = self._cookie_name()
        value = request.cookies.get(name, "")
        if 32 <= len(value) <= 64 and value.isascii():
            return value
        value = secrets.token_urlsafe(32)
        secure = request.is_secure

        def set_cookie(response: Response) -> Response:
            response.headers.add(
                "Set-Cookie",
                dump_cookie(
                    name,
                    value,
                    max_age=TOKEN_TTL,
                    path="/" if secure else self.path,
                    secure=secure,
                    httponly=True,
                    samesite="Lax",
                    sync_expires=False,
                ),
            )
            return response

        after_this_request(set_cookie)
        return value

    # -- the POST back -------------------------------------------------------------------------

    @staticmethod
    def is_posted() -> bool:
        """Whether the current request is a confirmation page's POST (a form with a token)."""
        return (
            request.method == "POST"
            and request.mimetype == _FORM_TYPE
            and TOKEN_FIELD in request.form
        )

    def check(self, provider: str) -> None:
        """Accept the current confirmation POST for ``provider``: the request comes from this
        app's own page (``Origin`` this app's, or ``null`` or absent with ``Sec-Fetch-Site:
        same-origin``), and its token was signed for this browser and ``provider`` within
        :data:`TOKEN_TTL` seconds.

        :raises StartNotConfirmedError: (403) otherwise; nothing is sent to the provider.
        """
        site = (request.headers.get("Sec-Fetch-Site") or "").lower()
        if site in FOREIGN_SITES or not _from_own_origin(site):
            raise _refused(provider, "posted from another origin")
        tokens = request.form.getlist(TOKEN_FIELD)
        browser = request.cookies.get(self._cookie_name(), "")
        if len(tokens) != 1 or len(tokens[0]) > _MAX_VALUE or not browser:
            raise _refused(provider, "missing token or browser cookie")
        try:
            named, bound = self._serializer(current_app).loads(tokens[0], max_age=TOKEN_TTL)
        except (BadData, ValueError, TypeError):
            raise _refused(provider, "token is forged or expired") from None
        if named != provider or not isinstance(bound, str):
            raise _refused(provider, "token was issued for another provider")
        if len(browser) > _MAX_VALUE or not hmac.compare_digest(bound, _digest(browser)):
            raise _refused(provider, "token was issued to another browser")

    # -- shared --------------------------------------------------------------------------------

    def _cookie_name(self) -> str:
        return f"__Host-{self.cookie_name}" if request.is_secure else self.cookie_name

    def _serializer(self, app: Flask) -> URLSafeTimedSerializer:
        keys = [*(app.config.get("SECRET_KEY_FALLBACKS") or ()), app.secret_key]
        return URLSafeTimedSerializer(keys, salt=self.salt)


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8")).hexdigest()[:32]


def _from_own_origin(site: str) -> bool:
    origin = request.headers.get("Origin")
    if origin is None or origin == "null":
        # no Origin (older browsers), or an opaque one (a no-referrer page): only when the
        # browser says the POST came from this origin, or says nothing at all
        return site in ("same-origin", "")
    return origin.lower() == f"{request.scheme}://{request.host}".lower()


def _refused(provider: str, reason: str) -> StartNotConfirmedError:
    return StartNotConfirmedError(provider, f"sign-in confirmation refused: {reason}")


_PAGE: Final = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Continue to {title}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:4rem auto;
padding:0 1rem;color:#222}}h1{{font-size:1.4rem}}button{{font:inherit;padding:.6rem 1.2rem;
border:0;border-radius:6px;background:#0b57d0;color:#fff;cursor:pointer}}
button:focus-visible{{outline:3px solid #222;outline-offset:2px}}a{{color:#0b57d0}}</style></head>
<body><h1>Sign in with {title}?</h1>
<p>Another site sent you here to sign in to <strong>{host}</strong> with {title}.
Continue only if you meant to.</p>
<form method="post" action="{action}"><input type="hidden" name="{field}" value="{token}">
<button type="submit">Continue to {title}</button></form>
<p><a href="{home}">No, take me to the start page</a></p></body></html>
"""
