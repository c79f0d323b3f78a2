"""The OAuth 2.0 provider: the authorization code flow for one settings record.

:class:`OAuth2Provider` implements :class:`SocialProvider` (the interface the specification
names): it runs the flow (the steps are in :mod:`flask_social_oauth2.web.sign_in`) and reads a
profile. It is made of parts rather than a tower: its facts (the class attributes below, or a
built-in's :class:`~flask_social_oauth2.providers.facts.ProviderFacts`), one
:class:`~flask_social_oauth2.providers.hooks.ProviderHooks` object where the provider truly
differs, and a :class:`~flask_social_oauth2.providers.client.ProviderClient` it holds (how the
block reaches its server).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Final
from urllib.parse import urlsplit

from flask import Response, request

from ..config.profile_fields import OPENID_FIELDS, ProfileFields
from ..config.provider_options import ProviderOptions, read_provider_options
from ..config.settings import OAuth2Info, OAuth2Settings, SocialProfile
from ..errors import AuthenticationError, ConfigurationProblem, ProfileRetrievalError
from ..oauth import client_auth, flow
from ..oauth.dpop import DPoPKey
from ..oauth.provider_response import ProviderResponse
from ..oidc import discovery
from ..runtime import current_runtime
from ..web import form_post, sign_in
from ..web.provider import SocialProvider
from ..web.start_confirmation import StartConfirmation
from ..web.state_cookie import PendingFlow
from . import profile_reading, token_requests
from .client import BodyWith, ProviderClient, TokenAuthMethod
from .hooks import PLAIN, ProviderHooks

__all__ = ["OAuth2Provider", "SocialProvider", "TokenAuthMethod"]

logger = logging.getLogger("flask_social_oauth2")

#: CSP sources of loopback servers, for providers that allow them in development.
_LOOPBACK_ORIGINS: Final = ("http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*")
_NO_CONTEXT: Final[Mapping[str, str]] = {}


class OAuth2Provider(SocialProvider):
    """The OAuth 2.0 authorization code flow with PKCE, and a profile read from ``apiURL``.

    Used as it is for any block whose name is not a built-in provider: its profile is read with
    the OpenID Connect claim names. A custom provider sets the class attributes below (its
    facts) and, where it truly differs, :attr:`hooks`.
    """

    __slots__ = ("_client", "_context", "_options")

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
    #: Where the profile's fields are found in the profile JSON.
    profile_fields: ClassVar[ProfileFields] = OPENID_FIELDS
    #: ``iss`` values the provider's ID tokens may carry besides its issuer.
    extra_id_token_issuers: ClassVar[frozenset[str]] = frozenset()
    #: The base of relative API URLs after sign-in (``customProperties.apiBaseURL`` overrides).
    default_api_base: ClassVar[str | None] = None
    #: The RFC 7009 revocation endpoint (``customProperties.revocationURL`` overrides).
    default_revocation_url: ClassVar[str | None] = None
    #: Where the provider differs from the generic flow (see
    #: :mod:`flask_social_oauth2.providers.hooks`); the default differs nowhere.
    hooks: ClassVar[ProviderHooks] = PLAIN

    def __init__(self, name: str, settings: OAuth2Settings) -> None:
        super().__init__(name, self.hooks.prepare_settings(settings))
        self._options = read_provider_options(self.settings, self.hooks.read_options)[0]
        self._context: Mapping[str, str] = _NO_CONTEXT
        self._client: ProviderClient | None = None  # made at first use, from checked settings

    def _make_client(self) -> ProviderClient:
        settings = self.settings
        return ProviderClient(
            self.name,
            settings,
            self._options,
            issuer=self._context.get("issuer") or self.issuer_for(settings, self._options),
            token_auth_method=self.default_token_auth_method,
            token_headers=self.token_request_headers(),
            discovery=self.hooks.uses_discovery(),
            form_of=self.token_body_form(),
        )

    @property
    def options(self) -> ProviderOptions:
        """The block's ``customProperties``, parsed when this provider was made."""
        return self._options

    @property
    def client(self) -> ProviderClient:
        """How the block reaches its server (discovery, client authentication, requests)."""
        if self._client is None:
            self._client = self._make_client()
        return self._client

    @property
    def context(self) -> Mapping[str, str]:
        """What the flow (or token) this copy is bound to named (see :meth:`flow_context`)."""
        return self._context

    @property
    def cancel_errors(self) -> frozenset[str]:
        """The callback's ``error`` codes that mean the user cancelled."""
        return self.hooks.cancel_errors

    @property
    def api_base_per_identity(self) -> bool:
        """Whether relative API URLs are joined to each identity's own server."""
        return self.hooks.api_base_per_identity

    # -- configuration ---------------------------------------------------------------------

    @classmethod
    def settings_problems(cls, settings: OAuth2Settings) -> list[ConfigurationProblem]:
        settings = cls.hooks.prepare_settings(settings)
        options, problems = read_provider_options(settings, cls.hooks.read_options)
        issuer = cls.issuer_for(settings, options)
        has_profile = settings.api_url is not None or cls.default_profile_url_for(settings)
        problems += token_requests.block_problems(
            settings,
            options,
            issuer=issuer,
            has_profile=bool(has_profile) or issuer is not None,
            form_post_always=cls.hooks.form_post_callback,
        )
        return cls.hooks.settings_problems(settings, problems)

    @classmethod
    def default_profile_url_for(cls, settings: OAuth2Settings) -> str | None:
        """The built-in profile address for ``settings``; tenant-based providers derive it
        from the host of ``accessTokenURL``."""
        return cls.default_api_url

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
    def issuer_for(
        cls, settings: OAuth2Settings, options: ProviderOptions | None = None
    ) -> str | None:
        """The OpenID Connect issuer of ``settings`` (parsed as ``options``, else now):
        ``customProperties.issuer`` (or the one ``discoveryURL`` implies); else, when the scope
        asks for ``openid``, :meth:`default_issuer_for`; ``None`` for plain OAuth 2.0."""
        issuer = (options or read_provider_options(settings)[0]).issuer
        if issuer is None and "openid" in (settings.scope or "").split():
            issuer = cls.default_issuer_for(settings)
        return cls.hooks.issuer(settings, issuer)

    @property
    def profile_url(self) -> str | None:
        """``apiURL`` if set, else the provider's built-in profile address."""
        return self.settings.api_url or self.default_profile_url_for(self.settings)

    @property
    def token_auth_method(self) -> TokenAuthMethod:
        """How the client authenticates at the token, PAR and revocation endpoints:
        ``customProperties.tokenEndpointAuthMethod``, else the provider's default."""
        return self.client.token_auth_method

    def client_credentials(self, url: str) -> client_auth.ClientCredentials:
        """The client authentication of one request to ``url``, made now."""
        return self.client.client_credentials(url, self.token_request_settings())

    def token_request_settings(self) -> OAuth2Settings:
        """The settings the token and refresh requests are built from:
        :attr:`~flask_social_oauth2.SocialProvider.settings`, or a copy whose ``clientSecret``
        is what the provider wants sent (Apple: a signed JWT)."""
        return self.hooks.token_request_settings(self) or self.settings

    def token_request_headers(self) -> Mapping[str, str]:
        """Extra headers for the token request (e.g. a User-Agent a provider demands)."""
        return {}

    def token_body_form(self) -> Callable[[str], str] | None:
        """What makes each token request's form body as sent (e.g. JSON); ``None``: as is."""
        return None

    def uses_dpop(self) -> bool:
        """Whether the provider's tokens are bound to a key of the sign-in (DPoP, RFC 9449):
        ``customProperties.dpop`` is ``"true"``."""
        chosen = self.hooks.uses_dpop(self.settings)
        return self._options.dpop if chosen is None else chosen

    def uses_nonce(self) -> bool:
        """Whether the flow sends an OpenID Connect nonce: when the scope asks for ``openid``."""
        chosen = self.hooks.uses_nonce(self.settings)
        if chosen is not None:
            return chosen
        return "openid" in (self.settings.scope or "").split()

    def uses_form_post(self) -> bool:
        """Whether the callback is a form ``POST`` (answered with one same-origin hop,
        ``flask_social_oauth2.web.form_post``): always when the hooks say
        ``form_post_callback``, else when ``customProperties.responseMode`` (or
        ``authorizationParams``' ``response_mode``) is ``form_post``. Otherwise a ``POST`` to
        the route is a client-side framework's JSON."""
        return self.hooks.form_post_callback or form_post.is_form_post(self.settings, self._options)

    # -- OpenID Connect and requests, through the client -----------------------------------

    @property
    def issuer(self) -> str | None:
        """The provider's OpenID Connect issuer (see :meth:`issuer_for`), or ``None``."""
        return self.client.issuer

    def openid_metadata(self) -> discovery.ProviderMetadata | None:
        """The provider's discovery document, or ``None`` (see :attr:`client`)."""
        return self.client.openid_metadata()

    def openid_source(self) -> discovery.Source:
        """How discovery and ID token checks reach the provider's documents."""
        return self.client.openid_source()

    def authorization_endpoint(self) -> str | None:
        """``authorizationURL``, else the discovered ``authorization_endpoint``."""
        if self.settings.authorization_url is not None:
            return self.settings.authorization_url
        metadata = self.openid_metadata()
        return None if metadata is None else metadata.authorization_endpoint

    def request_json(self, method: str, url: str, info: OAuth2Info | None, **kw: Any) -> Any:
        """A JSON request to the provider's API (see :meth:`ProviderClient.request_json
        <.client.ProviderClient.request_json>`)."""
        return self.client.request_json(method, url, info, **kw)

    def request_answer(
        self, method: str, url: str, info: OAuth2Info | None, **kw: Any
    ) -> ProviderResponse:
        """The answer of a request to the provider's API, whatever its status (see
        :meth:`ProviderClient.request_answer <.client.ProviderClient.request_answer>`)."""
        return self.client.request_answer(method, url, info, **kw)

    def optional_json(
        self, url: str, info: OAuth2Info, step: str, headers: Mapping[str, str] | None = None
    ) -> Any:
        """A ``GET`` for an optional part of the profile: the JSON, or ``None`` when the
        request fails, so that the sign-in goes on without that field."""
        try:
            return self.request_json("GET", url, info, headers=headers, step=step)
        except ProfileRetrievalError as error:
            logger.info("%s: %s skipped: %s", self.name, step, error)
            return None

    def post_to_token_endpoint(
        self, step: str, body: BodyWith, url: str, *, dpop_key: DPoPKey | None = None
    ) -> ProviderResponse:
        return self.client.post_to_token_endpoint(
            url, body, step=step, settings=self.token_request_settings(), dpop_key=dpop_key
        )

    # -- the flow ----------------------------------------------------------------------------

    def authenticate(self) -> Response | OAuth2Info:
        if request.method == "POST" and self.uses_form_post() and not StartConfirmation.is_posted():
            return sign_in.form_post_step(self, current_runtime())
        return sign_in.step(self, current_runtime())

    def authorization_url(self, pending: PendingFlow, dpop_key: DPoPKey | None = None) -> str:
        """The provider address that starts ``pending``: the authorization request in its
        query, or, when the provider takes pushed requests (RFC 9126, see
        :mod:`flask_social_oauth2.oauth.par`), the request pushed first, client-authenticated, and
        only ``client_id`` and ``request_uri`` in the query.

        :raises UnexpectedResponseError: when the push fails (502; a timeout is 504).
        :raises ConfigurationError: for ``pushedAuthorization: required`` when the provider's
            metadata names no endpoint.
        """
        return token_requests.authorization_url(self, pending, dpop_key)

    def flow_context(self) -> tuple[tuple[str, str], ...]:
        """What a flow starting now is bound to besides the settings (kept in the state
        cookie, see ``PendingFlow.context``): nothing, unless a provider (Bluesky) resolves
        the account's server first. Needs a request context."""
        return self.hooks.flow_context(self)

    @property
    def title(self) -> str:
        """The provider's name as people know it ("GitHub"): ``customProperties.title``, else
        the block's name (a built-in provider says its own)."""
        return self._options.title or self.name

    def authorization_origins(self) -> tuple[str, ...]:
        """The origins a sign-in start may send the browser to: that of the authorization
        endpoint, or, for a provider whose accounts each have their own server (Bluesky),
        any https origin (and loopback ones where ``allowLoopback`` is on)."""
        if self.api_base_per_identity:
            return ("https:", *(_LOOPBACK_ORIGINS if self._options.allow_loopback else ()))
        endpoint = self.authorization_endpoint()
        if endpoint is None:
            return ()
        parts = urlsplit(endpoint)
        return (f"{parts.scheme}://{parts.netloc}",)

    def for_flow(self, pending: PendingFlow) -> OAuth2Provider:
        """The provider as the flow ``pending`` uses it: itself, unless the provider bound the
        flow to a server of its own (see :meth:`flow_context`)."""
        return self.bound_to(dict(pending.context), pending.redirect_uri)

    def bound_to(self, context: Mapping[str, str], redirect_uri: str) -> OAuth2Provider:
        """A copy bound to the server ``context`` names (a flow's, or a token's); itself when
        ``context`` is empty."""
        if not context:
            return self
        settings, context = self.hooks.bound_settings(self.settings, context, redirect_uri)
        copy = type(self)(self.name, settings)
        copy._context = context
        return copy

    def for_token(self, info: OAuth2Info) -> OAuth2Provider:
        """The provider as a refresh or revocation of ``info`` uses it: itself, unless the
        token was issued by a server of its own (see :meth:`flow_context`)."""
        if self._context:
            return self
        context = self.hooks.token_context(info)
        return self if context is None else self.bound_to(context, "")

    def api_base_for(self, info: OAuth2Info | None) -> str | None:
        """The base of relative API URLs for the identity whose token is ``info``:
        :attr:`default_api_base`, unless the provider's API lives on each user's own server."""
        if self.hooks.api_base_per_identity:
            return self.hooks.api_base_for(self, info)
        return self.default_api_base

    def client_metadata(self) -> dict[str, Any] | None:
        """The OAuth client metadata document the extension serves for this block at
        ``<url rule>/client-metadata.json``, for a provider that fetches it from the client
        ID (the AT Protocol's published clients); ``None`` (404) for most."""
        return self.hooks.client_metadata(self)

    def check_issuer(self, issuer: str | None) -> None:
        """RFC 9207: where the provider names itself in the callback (``iss``), it must be the
        expected issuer (:attr:`~.client.ProviderClient.issuer`); where its discovery
        document announces ``authorization_response_iss_parameter_supported``, ``iss`` is
        required."""
        if self.hooks.check_issuer(self, issuer):
            return
        token_requests.check_issuer(self, issuer)

    def verify_token(self, info: OAuth2Info, pending: PendingFlow | None) -> OAuth2Info:
        """Check the token response against the flow it ends.

        With an OpenID Connect issuer (:attr:`~.client.ProviderClient.issuer`) and
        ``openid`` in the scope, the ID token is required and verified (signature, ``iss``,
        ``aud``, ``exp``, ``iat`` and the flow's ``nonce``); its claims are then
        ``OAuth2Info.id_token_claims``. Otherwise the response is accepted as it is.

        :raises IdTokenError: when the ID token is missing or fails a check.
        """
        if not self.hooks.revokes_refused_tokens:
            return token_requests.verified_token(self, info, pending)
        try:
            return token_requests.verified_token(self, info, pending)
        except AuthenticationError:
            self.drop(info)
            raise

    def drop(self, info: OAuth2Info) -> None:
        """Revoke tokens the sign-in drops, where the provider can; a failure is logged (no
        secret) and changes nothing else."""
        try:
            self.revoke(info)
        except AuthenticationError as error:
            logger.warning("%s: the dropped token could not be revoked: %s", self.name, error)

    def exchange_code(
        self,
        code: str,
        *,
        redirect_uri: str,
        verifier: str | None,
        dpop_key: DPoPKey | None = None,
    ) -> OAuth2Info:
        """The token request (RFC 6749 4.1.3), with the identical ``redirect_uri``.

        :raises UnexpectedResponseError: when the provider fails or answers no valid token.
        """
        return token_requests.exchange_code(
            self, code, redirect_uri=redirect_uri, verifier=verifier, dpop_key=dpop_key
        )

    def received_token(self, info: OAuth2Info) -> OAuth2Info:
        """The answer of the code exchange as the sign-in keeps it: ``info``, unless a provider
        adds what its later requests need (e.g. the data centre or device the callback named)."""
        return self.hooks.received_token(self, info)

    def code_exchange_url(self) -> str:
        """Where the code exchange goes: ``accessTokenURL``, unless another server is named."""
        return self.hooks.token_endpoint(self) or self.settings.access_token_url

    def parse_token_response(self, response: ProviderResponse) -> OAuth2Info:
        """Read the token endpoint's answer."""
        return flow.parse_token_response(self.name, response)

    def refresh(self, info: OAuth2Info, *, scope: str | None = None) -> OAuth2Info:
        """A new token for ``info``'s refresh token (the ``refresh_token`` grant, RFC 6749 6),
        sent to ``accessTokenURL`` with the client authentication of the code exchange. Needs
        an app context (it uses the app's timeout and size cap).

        When the provider does not send a new refresh token, the result keeps the old one. With
        an OpenID Connect issuer, an ID token in the answer is verified like the first one and
        must name the same user (``sub``); without one, the old claims are kept.

        :param info: The token to renew, e.g. the one a sign-in gave.
        :param scope: Ask for a narrower scope than the original grant.
        :raises AuthenticationError: when ``info`` has no refresh token.
        :raises UnexpectedResponseError: when the provider fails or refuses (e.g. ``invalid_grant``
            for a revoked or expired refresh token: the user must sign in again).
        """
        return token_requests.refresh(self, info, scope)

    def revoke(self, info: OAuth2Info) -> bool:
        """Revoke ``info`` at the provider (RFC 7009): its refresh token when it has one, else
        its access token, with the client authentication of the token request. The endpoint
        is ``customProperties.revocationURL``, else the provider's built-in one, else the
        discovery document's ``revocation_endpoint``. Needs an app context.

        :return: ``False`` (and nothing sent) when the provider has no revocation endpoint.
        :raises UnexpectedResponseError: when the provider fails (502; a timeout is 504).
        """
        return token_requests.revoke(self, info)

    def logout_url(
        self,
        post_logout_redirect_uri: str | None = None,
        *,
        state: str | None = None,
        id_token_hint: str | None = None,
        logout_hint: str | None = None,
    ) -> str | None:
        """Where to send the browser to end its session at the provider (OpenID Connect
        RP-Initiated Logout 1.0): the low-level piece of :meth:`SocialOAuth2.logout_redirect
        <flask_social_oauth2.SocialOAuth2.logout_redirect>`. The endpoint is
        ``customProperties.endSessionURL``, else the discovered ``end_session_endpoint``; the
        URL carries ``client_id`` and those of the arguments given (a relative
        ``post_logout_redirect_uri`` is resolved like ``redirectURL``). Needs an app context.

        :return: ``None`` when the provider has no such endpoint.
        """
        return token_requests.logout_url(
            self, post_logout_redirect_uri, state, id_token_hint, logout_hint
        )

    def built_in_revocation_url(self) -> str | None:
        """The provider's own revocation endpoint (by default :attr:`default_revocation_url`)."""
        return self.hooks.revocation_url(self, self.default_revocation_url)

    # -- the profile -------------------------------------------------------------------------

    def retrieve_profile(self, info: OAuth2Info) -> SocialProfile:
        return profile_reading.retrieve(self, info)

    def complete_profile(self, info: OAuth2Info, profile: SocialProfile) -> SocialProfile:
        """The profile after the further calls the provider's facts name (e.g. a list of
        e-mail addresses); ``profile`` for the generic provider."""
        return profile

    def fetch_profile(self, info: OAuth2Info) -> Mapping[str, Any]:
        """The profile JSON: by default a GET of :attr:`profile_url` with the bearer token.

        Without one, an OpenID Connect provider's discovered ``userinfo_endpoint`` is used, and
        without that the verified ID token's claims (``OAuth2Info.id_token_claims``).
        """
        return profile_reading.fetch(self, info)

    def parse_profile(self, raw: Any, info: OAuth2Info) -> SocialProfile:
        """Map the profile JSON onto :class:`SocialProfile` with :attr:`profile_fields`.

        :raises ProfileRetrievalError: when the JSON is not an object or has no user id.
        """
        return profile_reading.parse(self.name, self.profile_fields, raw, info)
