"""The OAuth 2.0 provider: the authorization code flow for one settings record.

:class:`OAuth2Provider` implements :class:`SocialProvider` (the interface the specification
names): it runs the flow (the steps are in :mod:`flask_social_oauth2.web.sign_in`) and reads a
profile, on :class:`~flask_social_oauth2.providers.client.ProviderClient` (how the block reaches
its server: checks, discovery, client authentication, DPoP, the requests). Built-in providers
(``flask_social_oauth2.providers``) subclass it through one shared class driven by each
provider's declarative facts.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Final
from urllib.parse import urlencode, urlsplit

from flask import Response, request

from ..config.profile_fields import OPENID_FIELDS, ProfileFields
from ..config.settings import OAuth2Info, OAuth2Settings, SocialProfile
from ..errors import AuthenticationError, ConfigurationProblem, ProfileRetrievalError, StateError
from ..oauth import dpop, flow, par, revocation
from ..oauth.dpop import DPoPKey
from ..oauth.provider_response import ProviderResponse
from ..oidc import id_token
from ..runtime import current_runtime
from ..web import form_post, sign_in
from ..web.provider import SocialProvider
from ..web.redirects import resolve_redirect_uri
from ..web.start_confirmation import StartConfirmation
from ..web.state_cookie import PendingFlow
from .client import ProviderClient, TokenAuthMethod

__all__ = ["OAuth2Provider", "SocialProvider", "TokenAuthMethod"]

logger = logging.getLogger("flask_social_oauth2")

#: CSP sources of loopback servers, for providers that allow them in development.
_LOOPBACK_ORIGINS: Final = ("http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*")


class OAuth2Provider(ProviderClient):
    """The OAuth 2.0 authorization code flow with PKCE, and a profile read from ``apiURL``.

    Used as it is for any block whose name is not a built-in provider: its profile is read with
    the OpenID Connect claim names. Subclasses set the class attributes below and override the
    hooks only for a provider's real quirks.
    """

    __slots__ = ()

    #: Where the profile's fields are found in the profile JSON.
    profile_fields: ClassVar[ProfileFields] = OPENID_FIELDS
    #: ``iss`` values the provider's ID tokens may carry besides its issuer.
    extra_id_token_issuers: ClassVar[frozenset[str]] = frozenset()
    #: Whether the provider's callback is always a form ``POST`` (``response_mode=form_post``,
    #: as Apple's), whatever the settings say; other blocks choose it with
    #: ``customProperties.responseMode`` (see :meth:`uses_form_post`).
    form_post_callback: ClassVar[bool] = False
    #: The base of relative API URLs after sign-in (``customProperties.apiBaseURL`` overrides).
    default_api_base: ClassVar[str | None] = None
    #: Whether relative API URLs are joined to each identity's own server
    #: (:meth:`api_base_for` reads it from the identity's token), as Bluesky's PDS.
    api_base_per_identity: ClassVar[bool] = False
    #: The RFC 7009 revocation endpoint (``customProperties.revocationURL`` overrides).
    default_revocation_url: ClassVar[str | None] = None

    @classmethod
    def settings_problems(cls, settings: OAuth2Settings) -> list[ConfigurationProblem]:
        problems = super().settings_problems(settings)
        problems.extend(form_post.settings_problems(settings, always=cls.form_post_callback))
        return problems

    def uses_form_post(self) -> bool:
        """Whether the provider's callback is a form ``POST`` (``response_mode=form_post``),
        which :meth:`authenticate` reads, answering the provider's cross-site ``POST`` with one
        same-origin hop (``flask_social_oauth2.web.form_post``): always for a class with
        :attr:`form_post_callback`, else when ``customProperties.responseMode`` (or the
        ``response_mode`` of ``authorizationParams``) is ``form_post``. Otherwise a ``POST`` to
        the route is a client-side framework's JSON."""
        return self.form_post_callback or form_post.is_form_post(self.settings)

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
        assert pending.verifier is not None
        endpoint = self.authorization_endpoint()  # configured, or discovered
        assert endpoint is not None
        push_to = par.endpoint(self.name, self.settings, self.openid_metadata)
        mode = form_post.request_params(self.settings)
        if push_to is None:
            # without a push, the key is named in the request (RFC 9449 10)
            bound = () if dpop_key is None else (("dpop_jkt", dpop_key.thumbprint),)
            return flow.authorization_url(
                self.settings,
                endpoint=endpoint,
                redirect_uri=pending.redirect_uri,
                state=pending.state,
                verifier=pending.verifier,
                nonce=pending.nonce,
                extra=(*mode, *bound),
            )
        params = flow.authorization_params(
            self.settings,
            redirect_uri=pending.redirect_uri,
            state=pending.state,
            verifier=pending.verifier,
            nonce=pending.nonce,
            extra=mode,
        )

        def body(client_fields: Sequence[tuple[str, str]]) -> str:
            return urlencode([*params, *client_fields])

        answer = self._post_to_token_endpoint(par.STEP, body, push_to, dpop_key=dpop_key)
        request_uri = par.read_answer(self.name, answer)
        return par.browser_url(endpoint, self.settings.client_id, request_uri)

    def flow_context(self) -> tuple[tuple[str, str], ...]:
        """What a flow starting now is bound to besides the settings (kept in the state
        cookie, see ``PendingFlow.context``): nothing, unless a provider (Bluesky) resolves
        the account's server first. Needs a request context."""
        return ()

    @property
    def title(self) -> str:
        """The provider's name as people know it ("GitHub"): ``customProperties.title``, else
        the block's name (a built-in provider says its own)."""
        return self.settings.custom_properties.get("title") or self.name

    def authorization_origins(self) -> tuple[str, ...]:
        """The origins a sign-in start may send the browser to: that of the authorization
        endpoint, or, for a provider whose accounts each have their own server (Bluesky),
        any https origin (and loopback ones where ``allowLoopback`` is on)."""
        if self.api_base_per_identity:
            loopback = self.settings.custom_properties.get("allowLoopback") == "true"
            return ("https:", *(_LOOPBACK_ORIGINS if loopback else ()))
        endpoint = self.authorization_endpoint()
        if endpoint is None:
            return ()
        parts = urlsplit(endpoint)
        return (f"{parts.scheme}://{parts.netloc}",)

    def for_flow(self, pending: PendingFlow) -> OAuth2Provider:
        """The provider as the flow ``pending`` uses it: itself, unless the provider bound the
        flow to a server of its own (see :meth:`flow_context`)."""
        return self

    def api_base_for(self, info: OAuth2Info | None) -> str | None:
        """The base of relative API URLs for the identity whose token is ``info``:
        :attr:`default_api_base`, unless the provider's API lives on each user's own server."""
        return self.default_api_base

    def client_metadata(self) -> dict[str, Any] | None:
        """The OAuth client metadata document the extension serves for this block at
        ``<url rule>/client-metadata.json``, for a provider that fetches it from the client
        ID (the AT Protocol's published clients); ``None`` (404) for most."""
        return None

    def check_issuer(self, issuer: str | None) -> None:
        """RFC 9207: where the provider names itself in the callback (``iss``), it must be the
        expected issuer (:attr:`~.client.ProviderClient.issuer`); where its discovery
        document announces ``authorization_response_iss_parameter_supported``, ``iss`` is
        required."""
        expected = self.issuer
        if expected is None:
            return
        if issuer is not None and issuer != expected:
            raise StateError(self.name, "callback's iss is another issuer (mix-up refused)")
        metadata = self.openid_metadata() if issuer is None else None
        if metadata is not None and metadata.iss_parameter_supported:
            raise StateError(self.name, "callback lacks the iss its provider announces")

    def verify_token(self, info: OAuth2Info, pending: PendingFlow | None) -> OAuth2Info:
        """Check the token response against the flow it ends.

        With an OpenID Connect issuer (:attr:`~.client.ProviderClient.issuer`) and
        ``openid`` in the scope, the ID token is required and verified (signature, ``iss``,
        ``aud``, ``exp``, ``iat`` and the flow's ``nonce``); its claims are then
        ``OAuth2Info.id_token_claims``. Otherwise the response is accepted as it is.

        :raises IdTokenError: when the ID token is missing or fails a check.
        """
        issuer = self.issuer
        if issuer is None or not self.uses_nonce():
            return info
        nonce = pending.nonce if pending is not None else None
        return id_token.verify_token_response(
            self.openid_source(),
            self.settings,
            info,
            issuer,
            nonce=nonce,
            extra_issuers=self.extra_id_token_issuers,
        )

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
        settings = self.token_request_settings()

        def body(client_fields: Sequence[tuple[str, str]]) -> str:
            return flow.token_request_body(
                settings,
                code=code,
                redirect_uri=redirect_uri,
                verifier=verifier,
                client_fields=client_fields,
            )

        response = self._post_to_token_endpoint("token request", body, dpop_key=dpop_key)
        if dpop_key is None:
            return self.received_token(self.parse_token_response(response))
        info = flow.parse_token_response(self.name, response, dpop=True)
        return self.received_token(dataclasses.replace(info, dpop_key=dpop_key.export()))

    def received_token(self, info: OAuth2Info) -> OAuth2Info:
        """The answer of the code exchange as the sign-in keeps it: ``info``, unless a provider
        adds what its later requests need (e.g. the data centre or device the callback named)."""
        return info

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
        if not info.refresh_token:
            raise AuthenticationError(
                self.name,
                "cannot refresh: the token has no refresh_token (the provider issued none;"
                " some issue one only for an 'offline_access' scope or parameter)",
            )
        settings, refresh_token = self.token_request_settings(), info.refresh_token

        def body(client_fields: Sequence[tuple[str, str]]) -> str:
            return flow.refresh_request_body(
                settings, refresh_token=refresh_token, scope=scope, client_fields=client_fields
            )

        key = None if info.dpop_key is None else dpop.DPoPKey.load(info.dpop_key)
        response = self._post_to_token_endpoint("refresh request", body, dpop_key=key)
        if key is None:
            renewed = flow.parse_token_response(self.name, response, "refresh request")
        else:
            renewed = flow.parse_token_response(self.name, response, "refresh request", dpop=True)
            renewed = dataclasses.replace(renewed, dpop_key=info.dpop_key)
        if renewed.refresh_token is None:
            renewed = dataclasses.replace(renewed, refresh_token=info.refresh_token)
        issuer = self.issuer
        if issuer is not None and renewed.params.get("id_token") is not None:
            subject = info.id_token_claims.get("sub") if info.id_token_claims else None
            renewed = id_token.verify_token_response(
                self.openid_source(),
                self.settings,
                renewed,
                issuer,
                nonce=None,
                required=False,
                subject=subject,
                extra_issuers=self.extra_id_token_issuers,
            )
        elif info.id_token_claims is not None:
            renewed = dataclasses.replace(renewed, id_token_claims=info.id_token_claims)
        logger.info("%s: token refreshed", self.name)
        return renewed

    def revoke(self, info: OAuth2Info) -> bool:
        """Revoke ``info`` at the provider (RFC 7009): its refresh token when it has one, else
        its access token, with the client authentication of the token request. The endpoint
        is ``customProperties.revocationURL``, else the provider's built-in one, else the
        discovery document's ``revocation_endpoint``. Needs an app context.

        :return: ``False`` (and nothing sent) when the provider has no revocation endpoint.
        :raises UnexpectedResponseError: when the provider fails (502; a timeout is 504).
        """
        url = revocation.endpoint(self.settings, self.built_in_revocation_url(), self._discovered)
        if url is None:
            return False
        settings = self.token_request_settings()

        def body(client_fields: Sequence[tuple[str, str]]) -> str:
            return revocation.request_body(settings, info, client_fields)

        key = None if info.dpop_key is None else dpop.DPoPKey.load(info.dpop_key)
        response = self._post_to_token_endpoint(revocation.STEP, body, url, dpop_key=key)
        revocation.check_answer(self.name, response)
        logger.info("%s: token revoked", self.name)
        return True

    def logout_url(
        self, post_logout_redirect_uri: str | None = None, *, state: str | None = None
    ) -> str | None:
        """Where to send the browser to end its session at the provider too (OpenID Connect
        RP-Initiated Logout 1.0), after :meth:`SocialOAuth2.sign_out
        <flask_social_oauth2.SocialOAuth2.sign_out>`::

            url = social.provider("google").logout_url("/")
            return redirect(url or "/")

        The endpoint is ``customProperties.endSessionURL``, else the discovery document's
        ``end_session_endpoint``. The URL carries ``client_id`` and, when given,
        ``post_logout_redirect_uri`` (a path is resolved against the request's host, like
        ``redirectURL``; register it at the provider) and ``state``. No ``id_token_hint`` is
        sent: the ID token is not kept after sign-in. Needs an app context (a request for a
        relative ``post_logout_redirect_uri``).

        :return: ``None`` when the provider has no such endpoint.
        """
        configured = self.settings.custom_properties.get(revocation.END_SESSION_URL_KEY)
        if configured is None:
            metadata = self.openid_metadata()
            configured = None if metadata is None else metadata.end_session_endpoint
        if configured is None:
            return None
        params = [("client_id", self.settings.client_id)]
        if post_logout_redirect_uri is not None:
            params.append(
                ("post_logout_redirect_uri", resolve_redirect_uri(post_logout_redirect_uri))
            )
        if state is not None:
            params.append(("state", state))
        from oauthlib.common import add_params_to_uri

        return str(add_params_to_uri(configured, params))

    def built_in_revocation_url(self) -> str | None:
        """The provider's own revocation endpoint for these settings: by default
        :attr:`default_revocation_url`."""
        return self.default_revocation_url

    def _discovered(self) -> str | None:
        metadata = self.openid_metadata()
        return None if metadata is None else metadata.revocation_endpoint

    # -- the profile -------------------------------------------------------------------------

    def retrieve_profile(self, info: OAuth2Info) -> SocialProfile:
        raw = self.fetch_profile(info)
        claims = info.id_token_claims
        if (
            claims is not None
            and isinstance(raw, Mapping)
            and "sub" in raw
            and raw is not claims
            and raw["sub"] != claims.get("sub")
        ):  # OpenID Connect Core 5.3.2: userinfo of another user must not be used
            raise ProfileRetrievalError(self.name, "profile's sub is not the ID token's sub")
        profile = self.parse_profile(raw, info)
        logger.info("%s: profile retrieved", self.name)
        return profile

    def fetch_profile(self, info: OAuth2Info) -> Mapping[str, Any]:
        """The profile JSON: by default a GET of
        :attr:`~.client.ProviderClient.profile_url` with the bearer token.

        Without one, an OpenID Connect provider's discovered ``userinfo_endpoint`` is used, and
        without that the verified ID token's claims (``OAuth2Info.id_token_claims``).
        """
        url = self.profile_url
        if url is None and self.issuer is not None:
            metadata = self.openid_metadata()
            url = None if metadata is None else metadata.userinfo_endpoint
            if url is None and info.id_token_claims is not None:
                return info.id_token_claims
        if url is None:
            raise ProfileRetrievalError(self.name, "no profile address (apiURL) is configured")
        raw: Mapping[str, Any] = self.request_json("GET", url, info)
        return raw

    def parse_profile(self, raw: Any, info: OAuth2Info) -> SocialProfile:
        """Map the profile JSON onto :class:`SocialProfile` with :attr:`profile_fields`.

        :raises ProfileRetrievalError: when the JSON is not an object or has no user id.
        """
        if not isinstance(raw, Mapping):
            raise ProfileRetrievalError(self.name, "profile answer is not a JSON object")
        profile = self.profile_fields.extract(self.name, raw, info.params)
        if profile is None:
            raise ProfileRetrievalError(self.name, "profile answer has no user id")
        return profile
