"""How a provider block reaches its server: :class:`ProviderClient`, the base of
:class:`~flask_social_oauth2.providers.oauth2.OAuth2Provider` (which adds the flow and the profile).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Final

from ..config.settings import OAuth2Info, OAuth2Settings
from ..errors import (
    AuthenticationError,
    ConfigurationProblem,
    DiscoveryError,
    ProfileRetrievalError,
    UnexpectedResponseError,
)
from ..oauth import client_auth, dpop, flow, par, revocation
from ..oauth.client_auth import ClientAuthMethod
from ..oauth.dpop import DPoPKey
from ..oauth.provider_response import ProviderResponse
from ..oidc import discovery, id_token
from ..runtime import current_runtime
from ..web.provider import SocialProvider

__all__ = ["ProviderClient", "TokenAuthMethod"]

#: Kept for subclasses written against 0.1 (two methods then); every method is
#: :data:`~flask_social_oauth2.oauth.client_auth.ClientAuthMethod` now.
TokenAuthMethod = ClientAuthMethod
BodyWith = Callable[[Sequence[tuple[str, str]]], str]
#: The ``customProperties`` key that turns DPoP on.
DPOP_KEY: Final = "dpop"


class ProviderClient(SocialProvider):
    """How one provider block reaches its server: the block's checks, its OpenID Connect
    issuer and discovery document, client authentication, DPoP proofs, and the requests
    themselves (to the token endpoint and to the provider's API), with the app's timeout
    and size cap. :class:`~flask_social_oauth2.providers.oauth2.OAuth2Provider` adds the flow and
    the profile on top.
    """

    __slots__ = ("_issuer",)

    def __init__(self, name: str, settings: OAuth2Settings) -> None:
        super().__init__(name, settings)
        # Derived once: a provider's settings never change, and a callback asks several times.
        self._issuer = self.issuer_for(settings)

    #: The profile address used when the block has no ``apiURL``.
    default_api_url: ClassVar[str | None] = None
    #: How the client authenticates at the token endpoint unless ``customProperties`` says
    #: otherwise (``tokenEndpointAuthMethod``).
    default_token_auth_method: ClassVar[TokenAuthMethod] = "client_secret_post"
    #: Whether the provider speaks OpenID Connect: when the scope asks for ``openid``, its
    #: discovery document is read from :meth:`default_issuer_for` and its ID tokens verified,
    #: as for a block with ``customProperties.issuer`` (see
    #: :mod:`flask_social_oauth2.oidc.discovery`).
    openid_connect: ClassVar[bool] = False
    #: The issuer of an OpenID Connect provider with one fixed issuer.
    default_issuer: ClassVar[str | None] = None
    #: ``(pattern, template)`` for a per-tenant OpenID Connect provider: the issuer is
    #: ``re.fullmatch(pattern, accessTokenURL).expand(template)``.
    issuer_from_token_url: ClassVar[tuple[str, str] | None] = None

    # -- configuration ---------------------------------------------------------------------

    @classmethod
    def settings_problems(cls, settings: OAuth2Settings) -> list[ConfigurationProblem]:
        problems = []
        issuer = cls.issuer_for(settings)
        if (
            settings.api_url is None
            and cls.default_profile_url_for(settings) is None
            and issuer is None
        ):
            problems.append(
                ConfigurationProblem(
                    None, "apiURL", "is required: this provider has no built-in profile address"
                )
            )
        problems.extend(client_auth.settings_problems(settings))
        problems.extend(par.settings_problems(settings, has_issuer=issuer is not None))
        if settings.custom_properties.get(DPOP_KEY, "false") not in ("true", "false"):
            problems.append(
                ConfigurationProblem(None, f"customProperties.{DPOP_KEY}", "must be true or false")
            )
        verifies = issuer is not None and "openid" in (settings.scope or "").split()
        problems.extend(discovery.settings_problems(settings))
        problems.extend(revocation.settings_problems(settings))
        problems.extend(id_token.settings_problems(settings, verifies=verifies))
        return problems

    @classmethod
    def default_profile_url_for(cls, settings: OAuth2Settings) -> str | None:
        """The built-in profile address for ``settings``; tenant-based providers override this
        to derive it from the host of ``accessTokenURL``."""
        return cls.default_api_url

    @property
    def profile_url(self) -> str | None:
        """``apiURL`` if set, else the provider's built-in profile address."""
        return self.settings.api_url or self.default_profile_url_for(self.settings)

    @property
    def token_auth_method(self) -> ClientAuthMethod:
        """How the client authenticates at the token, PAR and revocation endpoints:
        ``customProperties.tokenEndpointAuthMethod``, else the provider's default."""
        return client_auth.method_of(self.settings, self.default_token_auth_method)

    def client_credentials(self, url: str) -> client_auth.ClientCredentials:
        """The client authentication of one request to ``url``, made now (a JWT assertion is
        fresh each time; its ``aud`` is the issuer, else ``url``)."""
        return client_auth.credentials(
            self.token_auth_method, self.token_request_settings(), audience=self.issuer or url
        )

    def token_request_settings(self) -> OAuth2Settings:
        """The settings the token and refresh requests are built from:
        :attr:`~flask_social_oauth2.SocialProvider.settings`, or a copy whose ``clientSecret``
        is what the provider wants sent (Apple: a signed JWT)."""
        return self.settings

    def token_request_headers(self) -> Mapping[str, str]:
        """Extra headers for the token request (e.g. a User-Agent a provider demands)."""
        return {}

    def uses_dpop(self) -> bool:
        """Whether the provider's tokens are bound to a key of the sign-in (DPoP, RFC 9449):
        ``customProperties.dpop`` is ``"true"``."""
        return self.settings.custom_properties.get(DPOP_KEY, "false") == "true"

    def uses_nonce(self) -> bool:
        """Whether the flow sends an OpenID Connect nonce: when the scope asks for ``openid``."""
        return "openid" in (self.settings.scope or "").split()

    # -- OpenID Connect ----------------------------------------------------------------------

    @classmethod
    def default_issuer_for(cls, settings: OAuth2Settings) -> str | None:
        """The built-in issuer for ``settings`` (:attr:`openid_connect` providers only):
        derived from ``accessTokenURL`` with :attr:`issuer_from_token_url`, else
        :attr:`default_issuer`."""
        if not cls.openid_connect:
            return None
        if cls.issuer_from_token_url is not None:
            pattern, template = cls.issuer_from_token_url
            match = re.fullmatch(pattern, settings.access_token_url)
            return match.expand(template) if match else None
        return cls.default_issuer

    @classmethod
    def issuer_for(cls, settings: OAuth2Settings) -> str | None:
        """The OpenID Connect issuer of ``settings``: ``customProperties.issuer`` (or the one
        ``customProperties.discoveryURL`` implies); else, when the scope asks for ``openid``,
        :meth:`default_issuer_for`; ``None`` when the provider is used as plain OAuth 2.0."""
        configured = discovery.configured_issuer(settings)
        if configured is not None:
            return configured
        if "openid" in (settings.scope or "").split():
            return cls.default_issuer_for(settings)
        return None

    @property
    def issuer(self) -> str | None:
        """The provider's OpenID Connect issuer (see :meth:`issuer_for`), or ``None``."""
        return self._issuer

    def openid_metadata(self) -> discovery.ProviderMetadata | None:
        """The provider's discovery document (cached per process, fetched on first use), or
        ``None`` when it has no issuer. Needs an app context.

        :raises DiscoveryError: when it cannot be fetched or names another issuer.
        """
        issuer = self.issuer
        if issuer is None:
            return None
        return discovery.provider_metadata(self.openid_source(), self.settings, issuer)

    def openid_source(self) -> discovery.Source:
        """How discovery and ID token checks reach this provider's documents: GET requests
        with the app's timeout and size cap, and the app's
        ``SOCIAL_OAUTH2_DISCOVERY_FAILURE_TTL``. Needs an app context."""
        return discovery.Source(
            self.name, self._get_document, current_runtime().discovery_failure_ttl
        )

    def _get_document(self, url: str, *, step: str) -> ProviderResponse:
        headers = {"Accept": "application/json"}
        return self.send("GET", url, step=step, error=DiscoveryError, headers=headers)

    def authorization_endpoint(self) -> str | None:
        """``authorizationURL``, else the discovered ``authorization_endpoint``."""
        if self.settings.authorization_url is not None:
            return self.settings.authorization_url
        metadata = self.openid_metadata()
        return None if metadata is None else metadata.authorization_endpoint

    # -- requests ----------------------------------------------------------------------------

    def _post_to_token_endpoint(
        self, step: str, body: BodyWith, url: str | None = None, *, dpop_key: DPoPKey | None = None
    ) -> ProviderResponse:
        """POST a form body to ``accessTokenURL`` (or ``url``; see :meth:`token_endpoint`)
        with the client's authentication, made for this request, and with ``dpop_key`` a DPoP
        proof; a server's ``use_dpop_nonce`` answer is retried once, with a fresh proof and a
        fresh client assertion (the server may have spent the first).

        :param body: Makes the form body from the client's authentication fields.
        """
        url = self.token_endpoint(step, url or self.settings.access_token_url)

        def send(nonce: str | None) -> ProviderResponse:
            credentials = self.client_credentials(url)
            headers = flow.token_headers({**self.token_request_headers(), **credentials.headers})
            if dpop_key is not None:
                headers["DPoP"] = dpop.proof(dpop_key, "POST", url, nonce=nonce)
            return self.send(
                "POST",
                url,
                step=step,
                error=UnexpectedResponseError,
                headers=headers,
                data=self.finish_token_body(step, body(credentials.fields)),
            )

        if dpop_key is None:
            return send(None)
        return dpop.send_with_nonce(url, send, _answer_parts)

    def token_endpoint(self, step: str, url: str) -> str:
        """Where the ``step`` request goes (``"token request"``, ``"refresh request"``,
        ``"revocation request"``): ``url``, unless a provider decides otherwise."""
        return url

    def finish_token_body(self, step: str, body: str) -> str:
        """The form body of a ``step`` request as sent: ``body``, unless a provider adds to it
        or changes its form."""
        return body

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
            provider=self.name,
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
            raise ProfileRetrievalError(self.name, f"{step} failed: HTTP {response.status}")
        try:
            return response.json()
        except ValueError:
            raise ProfileRetrievalError(
                self.name, f"{step}: HTTP {response.status} answered no JSON"
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


def _answer_parts(response: ProviderResponse) -> tuple[int, Mapping[str, str], bytes]:
    return response.status, response.headers, response.body
