"""Callbacks by ``response_mode=form_post`` (OAuth 2.0 Form Post Response Mode): the provider's
page POSTs the fields to the app. The ``apple`` provider always asks for it; any other block
with ``customProperties.responseMode: form_post`` (:func:`settings_problems`,
:func:`request_params`).

That POST comes from the provider's site, and a browser sends no ``SameSite=Lax`` cookie with
a cross-site POST, so the state cookie is missing. The cookie stays Lax; instead the first
POST is answered with a tiny page of the app's own origin that POSTs the same fields once
more, now same-site, with the cookie (:func:`hop_page`). The fields travel in POST bodies
only: never the ``user`` JSON, a code or a token in an address.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Final

from flask import Response, current_app, request
from markupsafe import escape

from ..config.provider_options import RESPONSE_MODES, ProviderOptions
from ..config.settings import OAuth2Settings
from ..errors import ConfigurationProblem, InvalidCallbackError
from .callback import Callback, single_values
from .state_cookie import FLOW_PAGE_HEADERS

#: The form field that marks the second, same-site POST.
HOP_FIELD: Final = "social_oauth2_hop"
#: Longest ``user`` field accepted (Apple's holds a name and an e-mail address).
MAX_USER_FIELD: Final = 4096
_FIELDS: Final = ("code", "state", "error", "iss", "user")
_FORM_TYPE: Final = "application/x-www-form-urlencoded"
#: The ``customProperties`` key that chooses how the provider answers the authorization request.
MODE_KEY: Final = "responseMode"
#: Its values: ``query`` (the default: a ``GET`` with the answer in the query) and
#: ``form_post`` (a form ``POST``).
MODES: Final = RESPONSE_MODES
#: ``authorizationParams`` may name the response mode itself.
_PARAM: Final = "response_mode"


def settings_problems(
    settings: OAuth2Settings, options: ProviderOptions, *, always: bool
) -> list[ConfigurationProblem]:
    """A ``responseMode`` that contradicts the ``response_mode`` of ``authorizationParams``, or
    ``query`` for a provider whose callback is ``always`` a form post (Apple). (That it is one
    of :data:`MODES` is checked by
    :func:`~flask_social_oauth2.config.provider_options.read_provider_options`.)"""
    mode = options.response_mode
    if mode is None:
        return []
    key = f"customProperties.{MODE_KEY}"
    if always and mode != "form_post":
        return [
            ConfigurationProblem(
                None, key, "must be form_post or left out: this provider always uses form_post"
            )
        ]
    named = settings.authorization_params.get(_PARAM)
    if named is not None and named != mode:
        return [
            ConfigurationProblem(
                None,
                f"authorizationParams.{_PARAM}",
                f"is {named!r} but {key} is {mode!r}: name the response mode in {key} only",
            )
        ]
    return []


def is_form_post(settings: OAuth2Settings, options: ProviderOptions) -> bool:
    """Whether the provider answers ``settings``' authorization request with a form ``POST``:
    ``customProperties.responseMode``, else ``authorizationParams``' ``response_mode``, is
    ``form_post``."""
    mode = options.response_mode or settings.authorization_params.get(_PARAM)
    return mode == "form_post"


def request_params(
    settings: OAuth2Settings, options: ProviderOptions
) -> tuple[tuple[str, str], ...]:
    """What the authorization request adds for ``customProperties.responseMode``:
    ``response_mode=form_post``, unless ``authorizationParams`` sends a ``response_mode``
    itself (then it is the same one: :func:`settings_problems`); nothing for ``query``, the
    default mode of the code flow, which needs no parameter."""
    if options.response_mode != "form_post":
        return ()
    if _PARAM in settings.authorization_params:
        return ()
    return ((_PARAM, "form_post"),)


@dataclass(frozen=True, slots=True)
class FormPost:
    """The fields of a form-post callback (empty strings where absent)."""

    state: str
    code: str
    error: str | None
    iss: str | None
    user: str | None
    #: Whether this is the second, same-site POST of :func:`hop_page`.
    hopped: bool

    def callback(self) -> Callback:
        """The fields as a ``GET`` callback carries them (all but ``user``)."""
        return Callback(state=self.state, code=self.code, error=self.error, iss=self.iss)

    def __repr__(self) -> str:
        shown = {"code": self.code, "user": self.user, "error": self.error}
        present = ", ".join(name for name, value in shown.items() if value)
        return f"<FormPost state='***' fields=[{present}] iss={self.iss!r} hopped={self.hopped}>"


def read_form_post(provider: str) -> FormPost:
    """The current request's form-post callback fields.

    :raises InvalidCallbackError: 415 for a body that is not a form, 400 for a field given
        twice or too long, or a POST with none of ``code``, ``state`` and ``error``.
    """
    if request.mimetype != _FORM_TYPE:
        raise InvalidCallbackError(
            provider, "POST callback must be a form (response_mode=form_post)", status_code=415
        )
    code, state, error, iss, user, hop = single_values(
        request.form, (*_FIELDS, HOP_FIELD), provider, limits={"user": MAX_USER_FIELD}
    )
    if not (code or state or error):
        raise InvalidCallbackError(provider, "POST callback has no code, state or error")
    return FormPost(
        state=state or "",
        code=code or "",
        error=error or None,
        iss=iss or None,
        user=user or None,
        hopped=hop == "1",
    )


def hop_page(received: FormPost) -> Response:
    """The same-origin page that POSTs ``received`` once more, to the same address.

    Its one script runs by a fresh CSP nonce; ``form-action 'self'`` keeps the fields on the
    app's origin; it is never cached and sends no referrer. Without JavaScript, a button
    submits the form.
    """
    nonce = secrets.token_urlsafe(16)
    fields = {
        "code": received.code,
        "state": received.state,
        "error": received.error,
        "iss": received.iss,
        "user": received.user,
        HOP_FIELD: "1",
    }
    inputs = "".join(
        f'<input type="hidden" name="{name}" value="{escape(value)}">'
        for name, value in fields.items()
        if value
    )
    action = escape(request.script_root + request.path)  # the app may be mounted under a prefix
    page = _HOP_PAGE.format(action=action, inputs=inputs, nonce=nonce)
    response = current_app.response_class(page, status=200, mimetype="text/html")
    response.headers["Content-Security-Policy"] = (
        f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}';"
        " form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    )
    response.headers["X-Frame-Options"] = "DENY"
    response.headers.update(FLOW_PAGE_HEADERS)
    return response


_HOP_PAGE: Final = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Signing in…</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style nonce="{nonce}">body{{font:16px/1.5 system-ui,sans-serif;max-width:32rem;
margin:4rem auto;padding:0 1rem;color:#222}}</style></head>
<body><form id="social-oauth2-hop" method="post" action="{action}">{inputs}
<noscript><p>JavaScript is off: continue to finish signing in.</p>
<button type="submit">Continue</button></noscript></form>
<script nonce="{nonce}">document.getElementById("social-oauth2-hop").submit();</script>
</body></html>
"""
