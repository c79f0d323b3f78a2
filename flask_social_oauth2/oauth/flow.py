"""The protocol messages of the authorization code flow (RFC 6749 4.1, RFC 7636).

oauthlib builds the messages; this module adds what oauthlib leaves to its process-wide switches
(transport security and scope handling are checked when the configuration is loaded) and reads
token responses strictly. Nothing here knows about Flask.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
import secrets
from collections.abc import Mapping, Sequence
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode

from ..config.settings import OAuth2Info, OAuth2Settings
from ..errors import UnexpectedResponseError
from .provider_response import ProviderResponse

#: Bytes of randomness in a state: 192 bits, above RFC 6749 10.10's 160.
STATE_BYTES: Final = 24
#: Bytes of randomness in a PKCE verifier: 43 characters, RFC 7636 4.1's minimum length.
VERIFIER_BYTES: Final = 32
_SAFE_ERROR_CODE: Final = re.compile(r"[A-Za-z0-9_.\-]{1,64}\Z")
#: RFC 6749 A.12: an access token is visible ASCII (VSCHAR).
_VSCHARS: Final = re.compile(r"[\x20-\x7e]+")
#: The largest ``expires_in`` read (2**31 - 1 seconds, 68 years); beyond it an answer is broken.
MAX_EXPIRES_IN: Final = 2**31 - 1
_SECONDS: Final = re.compile(r"[0-9]{1,10}")


def new_state() -> str:
    """A fresh state value from :mod:`secrets`."""
    return secrets.token_urlsafe(STATE_BYTES)


def new_verifier() -> str:
    """A fresh PKCE code verifier."""
    return secrets.token_urlsafe(VERIFIER_BYTES)


def new_nonce() -> str:
    """A fresh OpenID Connect nonce."""
    return secrets.token_urlsafe(16)


def code_challenge(verifier: str) -> str:
    """The S256 code challenge of ``verifier`` (RFC 7636 4.2); ``plain`` is never used."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def authorization_url(
    settings: OAuth2Settings,
    *,
    redirect_uri: str,
    state: str,
    verifier: str,
    nonce: str | None = None,
    endpoint: str | None = None,
    extra: Sequence[tuple[str, str]] = (),
) -> str:
    """The address that starts the flow at the provider.

    A query already present in the endpoint is kept, and every ``authorizationParams`` entry is
    added.

    :param endpoint: The authorization endpoint; ``authorizationURL`` by default (a provider
        passes the discovered one when the block leaves it out).
    """
    base = endpoint or settings.authorization_url
    assert base is not None
    challenge = code_challenge(verifier)
    if not extra and "?" not in base and "#" not in base and _URLSAFE.match(state + (nonce or "")):
        # The common case, built from a per-(client, redirect_uri, scope) prefix encoded once:
        # the same query as below, without oauthlib's parse and re-encode, which every sign-in
        # start would pay for. state, challenge and nonce need no quoting.
        prefix = _query_prefix(settings.client_id, redirect_uri, settings.scope)
        nonce_part = "" if nonce is None else f"&nonce={nonce}"
        configured = settings.authorization_params
        extra_part = f"&{urlencode(tuple(configured.items()))}" if configured else ""
        return (
            f"{base}?{prefix}&state={state}&code_challenge={challenge}"
            f"&code_challenge_method=S256{nonce_part}{extra_part}"
        )
    params = authorization_params(
        settings,
        redirect_uri=redirect_uri,
        state=state,
        verifier=verifier,
        nonce=nonce,
        extra=extra,
    )
    from oauthlib.common import add_params_to_uri  # imported at first use, not with the app

    url: str = add_params_to_uri(base, params)
    return url


def authorization_params(
    settings: OAuth2Settings,
    *,
    redirect_uri: str,
    state: str,
    verifier: str,
    nonce: str | None = None,
    extra: Sequence[tuple[str, str]] = (),
) -> list[tuple[str, str]]:
    """Every parameter of the authorization request, in order: in the browser's URL, or pushed
    (PAR, RFC 9126). ``extra`` (e.g. ``dpop_jkt``) goes before ``authorizationParams``."""
    params: list[tuple[str, str]] = [
        ("response_type", "code"),
        ("client_id", settings.client_id),
        ("redirect_uri", redirect_uri),
    ]
    if settings.scope:
        params.append(("scope", settings.scope))
    params += [
        ("state", state),
        ("code_challenge", code_challenge(verifier)),
        ("code_challenge_method", "S256"),
    ]
    if nonce is not None:
        params.append(("nonce", nonce))
    params.extend(extra)
    params.extend(settings.authorization_params.items())
    return params


_URLSAFE: Final = re.compile(r"[A-Za-z0-9_\-]*\Z")


@functools.lru_cache(maxsize=512)
def _query_prefix(client_id: str, redirect_uri: str, scope: str | None) -> str:
    params = [("response_type", "code"), ("client_id", client_id), ("redirect_uri", redirect_uri)]
    if scope:
        params.append(("scope", scope))
    return urlencode(params)


def token_request_body(
    settings: OAuth2Settings,
    *,
    code: str,
    redirect_uri: str,
    verifier: str | None,
    client_fields: Sequence[tuple[str, str]] = (),
) -> str:
    """The form body of the authorization code token request, with the client's
    authentication fields (see :mod:`flask_social_oauth2.oauth.client_auth`): the body oauthlib's
    ``prepare_token_request`` builds, in its order, encoded by :func:`urllib.parse.urlencode`
    alone (oauthlib parses an empty query and re-encodes every value first, for the same
    bytes)."""
    extra: dict[str, str] = dict(settings.access_token_params)
    extra.update(client_fields)
    if "client_id" in extra or "scope" in extra:  # oauthlib's own handling of these
        from oauthlib.oauth2.rfc6749.parameters import prepare_token_request

        body: str = prepare_token_request(
            "authorization_code",
            code=code,
            redirect_uri=redirect_uri,
            code_verifier=verifier,
            client_id=settings.client_id,
            include_client_id=True,
            **extra,
        )
        return body
    params = [("grant_type", "authorization_code"), ("client_id", settings.client_id)]
    if verifier is not None:
        params.append(("code_verifier", verifier))
    client_secret = extra.pop("client_secret", None)
    if client_secret is not None:
        params.append(("client_secret", client_secret))
    params.extend(
        (name, value)
        for name, value in (("code", code), ("redirect_uri", redirect_uri), *extra.items())
        if value
    )
    return urlencode(params)


def refresh_request_body(
    settings: OAuth2Settings,
    *,
    refresh_token: str,
    scope: str | None,
    client_fields: Sequence[tuple[str, str]] = (),
) -> str:
    """The form body of a refresh_token grant (RFC 6749 6), with the client's authentication
    fields."""
    extra: dict[str, str] = dict(client_fields)
    if scope:
        extra["scope"] = scope
    from oauthlib.oauth2.rfc6749.parameters import prepare_token_request

    body: str = prepare_token_request(
        "refresh_token",
        refresh_token=refresh_token,
        client_id=settings.client_id,
        include_client_id=True,
        **extra,
    )
    return body


def safe_error_code(value: str) -> str:
    """A provider's ``error`` value fit for a log line or a message."""
    return value if _SAFE_ERROR_CODE.match(value) else "<malformed>"


def read_token_fields(provider: str, response: ProviderResponse, step: str) -> dict[str, Any]:
    """The fields of a token endpoint's answer, JSON or form-encoded.

    :raises UnexpectedResponseError: for a non-2xx status, HTML, a body that is not an object,
        or an ``error`` field (also in a 200 answer, as GitHub sends). The message names the
        provider, the step, the status and the error code, never the body.
    """
    media_type = response.media_type
    fields: Any = None
    if media_type in ("application/x-www-form-urlencoded", "text/plain") and not _looks_like_json(
        response.body
    ):
        try:
            fields = dict(parse_qsl(response.body.decode("utf-8"), strict_parsing=True))
        except (UnicodeDecodeError, ValueError):
            fields = None
    elif (
        media_type == "application/json"
        or media_type.endswith("+json")
        or _looks_like_json(response.body)
    ):
        try:
            fields = response.json()
        except ValueError:
            fields = None
    status = response.status
    if isinstance(fields, dict) and isinstance(fields.get("error"), str):
        code = safe_error_code(fields["error"])
        raise UnexpectedResponseError(
            provider, f"{step} failed: HTTP {status}, error {code!r}", error_code=code
        )
    if not 200 <= status < 300:
        raise UnexpectedResponseError(provider, f"{step} failed: HTTP {status}")
    if media_type == "text/html":
        raise UnexpectedResponseError(provider, f"{step}: HTTP {status} answered an HTML page")
    if not isinstance(fields, dict):
        what = "a JSON array" if isinstance(fields, list) else "no JSON object or form"
        raise UnexpectedResponseError(provider, f"{step}: HTTP {status} answered {what}")
    return fields


def _looks_like_json(body: bytes) -> bool:
    return body.lstrip()[:1] in (b"{", b"[")


def parse_token_response(
    provider: str, response: ProviderResponse, step: str = "token request", *, dpop: bool = False
) -> OAuth2Info:
    """Read a token endpoint's answer into :class:`OAuth2Info`.

    ``expires_in`` given as a string is read as a number; an absent ``token_type`` is taken as
    bearer, any other type is refused. With ``dpop`` (the request carried a DPoP proof), the
    ``token_type`` must be ``DPoP``: a bearer answer would be a silent downgrade.

    :raises UnexpectedResponseError: see :func:`read_token_fields`; also for a missing access
        token or a token type other than bearer.
    """
    fields = read_token_fields(provider, response, step)
    access_token = fields.pop("access_token", None)
    if not isinstance(access_token, str) or not access_token:
        raise UnexpectedResponseError(
            provider, f"{step}: HTTP {response.status} answered no access_token"
        )
    if not _VSCHARS.fullmatch(access_token):
        # It goes into an Authorization header, which holds Latin-1 at most.
        raise UnexpectedResponseError(
            provider, f"{step}: access_token has characters other than printable ASCII"
        )
    token_type = fields.pop("token_type", None)
    if dpop and not (isinstance(token_type, str) and token_type.lower() == "dpop"):
        raise UnexpectedResponseError(
            provider, f"{step}: the token is not DPoP-bound (token_type is not DPoP)"
        )
    if not dpop and (
        token_type is not None
        and (not isinstance(token_type, str) or token_type.lower() != "bearer")
    ):
        shown = (
            safe_error_code(token_type)
            if isinstance(token_type, str)
            else type(token_type).__name__
        )
        raise UnexpectedResponseError(provider, f"{step}: unsupported token_type {shown!r}")
    refresh_token = fields.pop("refresh_token", None)
    return OAuth2Info(
        access_token=access_token,
        token_type=token_type if isinstance(token_type, str) else "Bearer",
        expires_in=_seconds(provider, step, fields.pop("expires_in", None)),
        refresh_token=refresh_token if isinstance(refresh_token, str) and refresh_token else None,
        params=fields,
    )


def _seconds(provider: str, step: str, value: object) -> int | None:
    """``expires_in`` as whole seconds: a number or a string of ASCII digits, from 0 to
    :data:`MAX_EXPIRES_IN`; absent or null is ``None``.

    :raises UnexpectedResponseError: for anything else (a negative, fractional-infinite or huge
        number, a string like "²" or "Infinity", a boolean, a list...).
    """
    if value is None:
        return None
    seconds: float | int | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = value
    elif isinstance(value, str) and _SECONDS.fullmatch(value.strip()):
        seconds = int(value.strip())
    if seconds is None or not 0 <= seconds <= MAX_EXPIRES_IN:  # also False for NaN
        raise UnexpectedResponseError(
            provider, f"{step}: expires_in is not a number of seconds from 0 to {MAX_EXPIRES_IN}"
        )
    return int(seconds)


def token_headers(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Headers of a request to the token, PAR or revocation endpoint."""
    headers = {
        "Accept": "application/json",
        "Content-Type": "application/x-www-form-urlencoded",
    }
    if extra:
        headers.update(extra)
    return headers
