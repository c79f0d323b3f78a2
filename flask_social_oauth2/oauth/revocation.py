"""Token revocation (RFC 7009): where to send it, what to send, how to read the answer.

The provider sends the request with its client authentication; nothing here knows about Flask.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final
from urllib.parse import urlencode

from ..config.provider_options import ProviderOptions
from ..config.settings import OAuth2Info, OAuth2Settings
from ..errors import UnexpectedResponseError
from .flow import read_token_fields
from .provider_response import ProviderResponse

#: The ``customProperties`` key naming a provider's revocation endpoint.
REVOCATION_URL_KEY: Final = "revocationURL"
STEP: Final = "revocation request"


#: The ``customProperties`` key of the base of relative API URLs after sign-in.
API_BASE_URL_KEY: Final = "apiBaseURL"
#: The ``customProperties`` key naming the OpenID Connect RP-Initiated Logout endpoint.
END_SESSION_URL_KEY: Final = "endSessionURL"


def endpoint(
    options: ProviderOptions, built_in: str | None, discovered: Callable[[], str | None]
) -> str | None:
    """The revocation endpoint: ``customProperties.revocationURL``, else the provider's
    built-in one, else the discovery document's ``revocation_endpoint`` (read only when the
    first two are absent)."""
    return options.revocation_url or built_in or discovered()


def request_body(
    settings: OAuth2Settings, info: OAuth2Info, client_fields: Sequence[tuple[str, str]] = ()
) -> str:
    """The form body: the refresh token when there is one (revoking it ends the grant, RFC 7009
    2.1), else the access token, each with its ``token_type_hint``; ``client_id`` always, and
    the client's authentication fields."""
    if info.refresh_token:
        fields = [("token", info.refresh_token), ("token_type_hint", "refresh_token")]
    else:
        fields = [("token", info.access_token), ("token_type_hint", "access_token")]
    fields.append(("client_id", settings.client_id))
    fields.extend(client_fields)
    return urlencode(fields)


def check_answer(provider: str, response: ProviderResponse) -> None:
    """Accept a 2xx answer (RFC 7009 2.2: 200, the body ignored, also for a token the server
    did not know); anything else is the provider's fault.

    :raises UnexpectedResponseError: for another status, naming the error code if any (e.g.
        ``unsupported_token_type``), never the body.
    """
    if 200 <= response.status < 300:
        return
    read_token_fields(provider, response, STEP)  # raises with the error code when there is one
    raise UnexpectedResponseError(provider, f"{STEP} failed: HTTP {response.status}")
