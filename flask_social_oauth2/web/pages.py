"""The extension's own fixed pages: a failed sign-in, a misconfigured provider."""

from __future__ import annotations

from typing import Final

from flask import Response, current_app, make_response
from markupsafe import escape

from ..errors import ConfigurationProblem
from .state_cookie import FLOW_PAGE_HEADERS

#: A fixed page of the extension: its ``{title}``, and a ``{message}``.
PAGE: Final = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:4rem auto;
padding:0 1rem;color:#222}}h1{{font-size:1.4rem}}a{{color:#0b57d0}}</style></head>
<body><h1>{title}</h1><p>{message}</p>
<p><a href="/">Back to the start page</a></p></body></html>
"""
#: The page of a failed sign-in, with its ``{message}``.
ERROR_PAGE: Final = PAGE.replace("{title}", "Sign-in failed")
ERROR_PAGE_POLICY: Final = (
    "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
)


def error_page(message: str, status: int, *, title: str = "Sign-in failed") -> Response:
    """The fixed page of a failed sign-in (or sign-out: ``title``): ``message`` (escaped) and
    ``status``, with a CSP that loads nothing and the flow's page headers."""
    page = PAGE.format(title=escape(title), message=escape(message))
    response = make_response(page, status)
    response.headers["Content-Security-Policy"] = ERROR_PAGE_POLICY
    for header, value in FLOW_PAGE_HEADERS.items():
        response.headers.setdefault(header, value)
    return response


def misconfigured_page(problems: list[ConfigurationProblem]) -> Response:
    """The 503 page of a sign-in route whose provider is misconfigured: the problem itself in
    debug mode, a fixed sentence otherwise (the log names the problem)."""
    if current_app.debug:
        message = "This provider is misconfigured: " + "; ".join(map(str, problems))
    else:
        message = (
            "Sign-in with this provider is not available: its configuration has an error,"
            " which the server's log names."
        )
    return error_page(message, 503)
