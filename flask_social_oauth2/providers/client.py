"""How a provider block reaches its server: :class:`ProviderClient`, a part every
:class:`~flask_social_oauth2.providers.oauth2.OAuth2Provider` holds (has-a, not a base class):
the OpenID Connect discovery document, client authentication, DPoP proofs and the requests
themselves, with the app's timeout and size cap.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..config.provider_options import ProviderOptions
from ..config.settings import OAuth2Info, OAuth2Settings
from ..errors import (
    AuthenticationError,
    DiscoveryError,
    ProfileRetrievalError,
    UnexpectedResponseError,
)
from ..oauth import client_auth, dpop, flow
from ..oauth.client_auth import ClientAuthMethod
from ..oauth.dpop import DPoPKey
from ..oauth.provider_response import ProviderResponse
from ..oidc import discovery
from ..runtime import current_runtime

__all__ = ["ProviderClient", "TokenAuthMethod", "document_source"]

#: Kept for subclasses written against 0.1 (two methods then); every method is
#: :data:`~flask_social_oauth2.oauth.client_auth.ClientAuthMethod` now.
TokenAuthMethod = ClientAuthMethod
BodyWith = Callable[[Sequence[tuple[str, str]]], str]


class ProviderClient:
    """How one provider block reaches its server: its OpenID Connect issuer and discovery
    document, client authentication, DPoP proofs, and the requests themselves (to the token
    endpoint and to the provider's API), with the app's timeout and size cap.

    A provider holds one (:attr:`OAuth2Provider.client
    <flask_social_oauth2.providers.oauth2.OAuth2Provider.client>`); everything it varies by
    is given when it is made, so it never asks the provider back.

    :param name: The block's name (for errors and logs).
    :param settings: The block's settings.
    :param options: Their ``customProperties``, parsed.
    :param issuer: The OpenID Connect issuer, or ``None``.
    :param token_auth_method: How the client authenticates at the token endpoint, unless
        ``customProperties.tokenEndpointAuthMethod`` says otherwise.
    :param token_headers: Extra headers of every token endpoint request.
    :param discovery: Whether the issuer's discovery document is read (``False`` for a
        provider whose server metadata is not OpenID Connect's, as the AT Protocol's).
    :param form_of: Makes the form body of a token endpoint request as sent (e.g. JSON).
    """

    __slots__ = (
        "_discovery",
        "_form_of",
        "_issuer",
        "_name",
        "_options",
        "_settings",
        "_token_headers",
        "token_auth_method",
    )

    def __init__(
        self,
        name: str,
        settings: OAuth2Settings,
        options: ProviderOptions,
        *,
        issuer: str | None,
        token_auth_method: str,
        token_headers: Mapping[str, str] | None = None,
        discovery: bool = True,
        form_of: Callable[[str], str] | None = None,
    ) -> None:
        self._name = name
        self._settings = settings
        self._options = options
        self._issuer = issuer
        self._discovery = discovery
        self._token_headers = dict(token_headers or {})
        self._form_of = form_of
        # how the client authenticates at the token, PAR and revocation endpoints
        self.token_auth_method = client_auth.method_of(options, token_auth_method)

    @property
    def issuer(self) -> str | None:
        """The provider's OpenID Connect issuer, or ``None``."""
        return self._issuer

    def __repr__(self) -> str:
        return f"<ProviderClient {self._name!r}>"

    def client_credentials(
        self, url: str, settings: OAuth2Settings | None = None
    ) -> client_auth.ClientCredentials:
        """The client authentication of one request to ``url``, made now from ``settings``
        (default: the block's) (a JWT assertion is fresh each time; its ``aud`` is the issuer,
        else ``url``)."""
        return client_auth.credentials(
            self.token_auth_method,
            settings or self._settings,
            audience=self._issuer or url,
            key_id=self._options.key_id,
        )

    # -- OpenID Connect ----------------------------------------------------------------------

    def openid_metadata(self) -> discovery.ProviderMetadata | None:
        """The provider's discovery document (cached per process, fetched on first use), or
        ``None`` when it has no issuer. Needs an app context.

        :raises DiscoveryError: when it cannot be fetched or names another issuer.
        """
        issuer = self._issuer
        if issuer is None or not self._discovery:
            return None
        return discovery.provider_metadata(
            self.openid_source(), self._settings, self._options, issuer
        )

    def openid_source(self) -> discovery.Source:
        """How discovery and ID token checks reach this provider's documents: GET requests
        with the app's timeout and size cap, and the app's
        ``SOCIAL_OAUTH2_DISCOVERY_FAILURE_TTL``. Needs an app context."""
        return document_source(self._name)

    # -- requests ----------------------------------------------------------------------------

    def post_to_token_endpoint(
        self,
        url: str,
        body: BodyWith,
        *,
        step: str,
        settings: OAuth2Settings | None = None,
        dpop_key: DPoPKey | None = None,
    ) -> ProviderResponse:
        """POST a form body to ``url`` (the token, refresh, PAR or revocation endpoint) with
        the client's authentication made from ``settings`` for this request, and with
        ``dpop_key`` a DPoP proof; a server's ``use_dpop_nonce`` answer is retried once, with
        a fresh proof and a fresh client assertion (the server may have spent the first).

        :param body: Makes the form body from the client's authentication fields.
        :param step: What the request is, for logs and error messages only.
        """

        def send(nonce: str | None) -> ProviderResponse:
            credentials = self.client_credentials(url, settings)
            headers = flow.token_headers({**self._token_headers, **credentials.headers})
            if dpop_key is not None:
                headers["DPoP"] = dpop.proof(dpop_key, "POST", url, nonce=nonce)
            data = body(credentials.fields)
            if self._form_of is not None:
                data = self._form_of(data)
            return self.send(
                "POST", url, step=step, error=UnexpectedResponseError, headers=headers, data=data
            )

        if dpop_key is None:
            return send(None)
        return dpop.send_with_nonce(url, send, _answer_parts)

    def send(
        self,
        method: str,
        url: str,
        *,
        step: str,
        error: type[AuthenticationError],
        headers: Mapping[str, str] | None = None,
        data: str | Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> ProviderResponse:
        """Send a request to the provider with the app's timeout and size cap."""
        runtime = current_runtime()
        from ..oauth.http_client import get_client  # requests is imported at the first request

        return get_client().request(
            method,
            url,
            provider=self._name,
            step=step,
            error=error,
            timeout=runtime.timeout,
            max_bytes=runtime.max_response_bytes,
            headers=headers,
            data=data,
            params=params,
        )

    def request_json(
        self,
        method: str,
        url: str,
        info: OAuth2Info | None,
        *,
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
        data: str | Mapping[str, str] | None = None,
        step: str = "profile request",
    ) -> Any:
        """A JSON request to the provider's API, the access token in the ``Authorization``
        header when ``info`` is given.

        :raises ProfileRetrievalError: for a failed request, a non-2xx status or a body that
            is not JSON.
        """
        response = self.request_answer(
            method, url, info, headers=headers, params=params, data=data, step=step
        )
        if not 200 <= response.status < 300:
            raise ProfileRetrievalError(self._name, f"{step} failed: HTTP {response.status}")
        try:
            return response.json()
        except ValueError:
            raise ProfileRetrievalError(
                self._name, f"{step}: HTTP {response.status} answered no JSON"
            ) from None

    def request_answer(
        self,
        method: str,
        url: str,
        info: OAuth2Info | None,
        *,
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
        data: str | Mapping[str, str] | None = None,
        step: str = "profile request",
    ) -> ProviderResponse:
        """The answer of a request to the provider's API, whatever its status, sent as
        :meth:`request_json` sends it (with a DPoP proof, and the server's nonce retry, for a
        DPoP-bound token).

        :raises ProfileRetrievalError: when no answer came.
        """
        key = None if info is None or info.dpop_key is None else dpop.DPoPKey.load(info.dpop_key)

        def send(nonce: str | None) -> ProviderResponse:
            all_headers = {"Accept": "application/json"}
            if info is not None and key is not None:
                all_headers |= dpop.authorization(key, info.access_token, method, url, nonce=nonce)
            elif info is not None:
                all_headers["Authorization"] = f"Bearer {info.access_token}"
            if headers:
                all_headers.update(headers)
            return self.send(
                method,
                url,
                step=step,
                error=ProfileRetrievalError,
                headers=all_headers,
                params=params,
                data=data,
            )

        return send(None) if key is None else dpop.send_with_nonce(url, send, _answer_parts)


def document_source(name: str) -> discovery.Source:
    """How discovery and ID token checks reach the public documents (discovery document, key
    set) of ``name``, a provider or a block that is none yet: GET requests through the pooled
    HTTP client with the app's timeout and size cap, and the app's
    ``SOCIAL_OAUTH2_DISCOVERY_FAILURE_TTL``. Needs an app context."""
    runtime = current_runtime()

    def get(url: str, *, step: str) -> ProviderResponse:
        from ..oauth.http_client import get_client  # requests is imported at the first request

        return get_client().request(
            "GET",
            url,
            provider=name,
            step=step,
            error=DiscoveryError,
            timeout=runtime.timeout,
            max_bytes=runtime.max_response_bytes,
            headers={"Accept": "application/json"},
        )

    return discovery.Source(name, get, runtime.discovery_failure_ttl)


def _answer_parts(response: ProviderResponse) -> tuple[int, Mapping[str, str], bytes]:
    return response.status, response.headers, response.body
