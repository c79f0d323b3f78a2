"""Pushed Authorization Requests (RFC 9126): whether to push, where, and reading the answer.

``customProperties.pushedAuthorization`` is ``auto`` (the default: push when the provider's
metadata names a ``pushed_authorization_request_endpoint``, or the block names one in
``customProperties.pushedAuthorizationURL``), ``required`` (always push; a provider without an
endpoint is a configuration error) or ``off`` (never push). A push that fails is the
provider's fault (502): the flow never falls back to a plain redirect once the provider offers
PAR, so an attacker who breaks the push cannot make the parameters travel in the URL.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final
from urllib.parse import quote

from ..config.provider_options import PAR_MODES, ProviderOptions
from ..errors import ConfigurationError, ConfigurationProblem, UnexpectedResponseError
from .flow import read_token_fields, safe_error_code
from .provider_response import ProviderResponse

if TYPE_CHECKING:
    from .metadata import ProviderMetadata

MODE_KEY: Final = "pushedAuthorization"
URL_KEY: Final = "pushedAuthorizationURL"
MODES: Final = PAR_MODES
STEP: Final = "pushed authorization request"
#: The longest ``request_uri`` accepted (RFC 9126 leaves it to the server; real ones are short).
MAX_REQUEST_URI: Final = 1024


def settings_problems(options: ProviderOptions, *, has_issuer: bool) -> list[ConfigurationProblem]:
    """``required`` with neither an issuer (whose metadata may name the endpoint) nor an
    endpoint (the mode and the endpoint's address are checked by
    :func:`~flask_social_oauth2.config.provider_options.read_provider_options`)."""
    if options.pushed_authorization != "required" or options.pushed_authorization_url:
        return []
    if has_issuer:
        return []
    return [
        ConfigurationProblem(
            None,
            f"customProperties.{MODE_KEY}",
            f"is 'required' but the block names no {URL_KEY} and no issuer whose metadata"
            " could name the endpoint",
        )
    ]


def endpoint(
    provider: str, options: ProviderOptions, metadata: Callable[[], ProviderMetadata | None]
) -> str | None:
    """Where this flow's authorization request is pushed, or ``None`` for a plain redirect.

    :param metadata: Reads the provider's metadata; called only when it decides.
    :raises ConfigurationError: for ``required`` when the metadata names no endpoint.
    """
    mode = options.pushed_authorization
    if mode == "off":
        return None
    configured = options.pushed_authorization_url
    if configured is not None:
        return configured
    found_in = metadata()
    found = None if found_in is None else found_in.pushed_authorization_request_endpoint
    if found is None and mode == "required":
        raise ConfigurationError(
            [
                ConfigurationProblem(
                    provider,
                    f"customProperties.{MODE_KEY}",
                    "is 'required' but the provider's metadata names no"
                    " pushed_authorization_request_endpoint",
                )
            ]
        )
    return found


def read_answer(provider: str, response: ProviderResponse) -> str:
    """The ``request_uri`` of a push's answer (201, or 200 as some servers answer).

    :raises UnexpectedResponseError: for another status (naming the provider's OAuth error
        code when it sends one) or an answer without a usable ``request_uri``.
    """
    if response.status not in (200, 201):
        read_token_fields(provider, response, STEP)  # raises with the error code, if any
        raise UnexpectedResponseError(provider, f"{STEP} failed: HTTP {response.status}")
    try:
        answer = response.json()
    except ValueError:
        answer = None
    request_uri = answer.get("request_uri") if isinstance(answer, dict) else None
    if (
        not isinstance(request_uri, str)
        or not 0 < len(request_uri) <= MAX_REQUEST_URI
        or not request_uri.isprintable()
    ):
        error = answer.get("error") if isinstance(answer, dict) else None
        detail = f" ({safe_error_code(error)})" if isinstance(error, str) else ""
        raise UnexpectedResponseError(
            provider, f"{STEP}: HTTP {response.status} answered no request_uri{detail}"
        )
    return request_uri


def browser_url(authorization_endpoint: str, client_id: str, request_uri: str) -> str:
    """The address the browser goes to after a push: only ``client_id`` and ``request_uri``
    (RFC 9126 4)."""
    separator = "&" if "?" in authorization_endpoint else "?"
    return (
        f"{authorization_endpoint}{separator}client_id={quote(client_id, safe='')}"
        f"&request_uri={quote(request_uri, safe='')}"
    )
