"""Reading what comes back to the authenticate route: the provider's callback, the code a
client-side framework posts, and what binds a callback to the flow that started it.

Everything here is checked before any request to a provider is sent.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from flask import Response, current_app, g, request
from werkzeug.datastructures import MultiDict

from ..errors import InvalidCallbackError
from .state_cookie import FLOW_PAGE_HEADERS, PendingFlow

#: Longest ``code``, ``state``, ``error`` or ``iss`` accepted in a callback.
MAX_CALLBACK_VALUE: Final = 2048
#: Largest JSON body a client-side framework may post: a code and a verifier fit many times.
MAX_POSTED_BODY: Final = 8 * 1024
_CALLBACK_PARAMS: Final = ("code", "state", "error", "iss")
#: RFC 7636 4.1: ``code-verifier = 43*128unreserved``.
_CODE_VERIFIER: Final = re.compile(r"[A-Za-z0-9\-._~]{43,128}\Z")
_G_FINISHED: Final = "_social_oauth2_finished"


@dataclass(frozen=True, slots=True)
class Callback:
    """The parameters of a provider's redirect back to the app."""

    state: str
    code: str
    error: str | None
    iss: str | None

    def __repr__(self) -> str:
        error = "None" if self.error is None else "'...'"
        return f"<Callback state='***' code='***' error={error} iss={self.iss!r}>"


def read_callback(provider: str) -> Callback | None:
    """The callback parameters of the current request, or ``None`` when it starts a flow
    (neither ``code``, ``state`` nor ``error``).

    :raises InvalidCallbackError: when one of them is repeated or too long.
    """
    args = request.args
    if not args:
        return None
    code, state, error, iss = single_values(args, _CALLBACK_PARAMS, provider)
    if error is None and code is None and state is None:
        return None
    return Callback(state=state or "", code=code or "", error=error, iss=iss)


def single_values(
    fields: MultiDict[str, str],
    names: Sequence[str],
    provider: str,
    *,
    limits: Mapping[str, int] | None = None,
) -> list[str | None]:
    """The value of each of ``names`` in a callback's ``fields`` (its query or its form),
    ``None`` for one that is absent.

    :raises InvalidCallbackError: when one is given more than once, or is longer than its
        limit (``limits``, else :data:`MAX_CALLBACK_VALUE`).
    """
    found: list[str | None] = []
    for name in names:
        # looked for first: for a missing name werkzeug's getlist raises and catches a KeyError
        values = fields.getlist(name) if name in fields else []
        if len(values) > 1:
            raise InvalidCallbackError(provider, f"callback has {name!r} more than once")
        limit = MAX_CALLBACK_VALUE if limits is None else limits.get(name, MAX_CALLBACK_VALUE)
        if values and len(values[0]) > limit:
            raise InvalidCallbackError(provider, f"callback's {name!r} is too long")
        found.append(values[0] if values else None)
    return found


def head_response() -> Response:
    """The answer to a ``HEAD`` request on the route: link previews and prefetchers get an
    empty page and never touch a flow (no token request, no state consumed)."""
    response = current_app.response_class(status=200)
    response.headers.update(FLOW_PAGE_HEADERS)
    return response


def read_posted_code(provider: str) -> tuple[str, str]:
    """``code`` and ``code_verifier`` of a client-side framework's JSON POST.

    Only from the app's own origin (a present ``Origin`` header must name it), only JSON (a
    cross-site form cannot post it), and only with the RFC 7636 verifier of the PKCE pair the
    browser made, which the token request forwards: a stolen code alone is worthless (RFC 9700
    4.5).

    :raises InvalidCallbackError: 403 for a foreign origin, 415 for a body that is not JSON,
        400 for a body without a code and a well-formed verifier.
    """
    origin = request.headers.get("Origin")
    if origin is not None and origin.lower() != f"{request.scheme}://{request.host}".lower():
        raise InvalidCallbackError(
            provider, "POST from another origin refused (code injection)", status_code=403
        )
    if request.mimetype != "application/json":
        raise InvalidCallbackError(provider, "POST body must be JSON", status_code=415)
    length = request.content_length
    too_long = length is not None and length > MAX_POSTED_BODY
    data = b"" if too_long else request.stream.read(MAX_POSTED_BODY + 1)
    if not data or len(data) > MAX_POSTED_BODY:
        raise InvalidCallbackError(provider, "POST body is empty or too large")
    try:
        body = json.loads(data)
    except (ValueError, RecursionError):
        body = None
    code = body.get("code") if isinstance(body, dict) else None
    if not isinstance(code, str) or not code or len(code) > MAX_CALLBACK_VALUE:
        raise InvalidCallbackError(provider, "POST body must be a JSON object with a 'code' string")
    verifier = body.get("code_verifier") if isinstance(body, dict) else None
    if not isinstance(verifier, str) or not _CODE_VERIFIER.match(verifier):
        raise InvalidCallbackError(
            provider,
            "POST body must carry the 'code_verifier' of the PKCE pair (RFC 7636: 43 to 128"
            " letters, digits and -._~)",
        )
    return code, verifier


def flow_binding(
    *,
    token_url: str,
    client_id: str,
    redirect_uri: str,
    issuer: str | None,
    openid: bool,
) -> str:
    """A digest of what must not change between the start and the end of a flow, kept with
    the pending flow: a callback finished under other settings (another tenant's token
    endpoint, client or issuer) must not send this flow's code and verifier anywhere."""
    parts = (token_url, client_id, redirect_uri, issuer or "", "openid" if openid else "")
    digest = hashlib.sha256("\0".join(parts).encode("utf-8")).digest()[:16]
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def remember_finished(pending: PendingFlow) -> None:
    """Keep, for this request only, the flow that the callback finished."""
    setattr(g, _G_FINISHED, pending)


def finished_flow() -> PendingFlow | None:
    """The flow the current request finished, if any."""
    found = g.get(_G_FINISHED)
    return found if isinstance(found, PendingFlow) else None
