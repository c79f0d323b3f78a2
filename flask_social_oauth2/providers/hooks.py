"""The named hooks where a provider truly differs from the generic flow.

A provider is its facts (:class:`~flask_social_oauth2.providers.facts.ProviderFacts`, or the
class attributes of a custom :class:`~flask_social_oauth2.OAuth2Provider`) plus one
:class:`ProviderHooks` object, passed in as requests passes a transport adapter: the flow
calls the hooks, and a hook never calls a step of the flow back. Every default is plain
OAuth 2.0, so a hooks class overrides only what its provider does differently::

    class AcmeHooks(ProviderHooks):
        def read_profile(self, provider, raw, info, profile):
            return dataclasses.replace(profile, username=raw.get("nick"))

    class AcmeProvider(OAuth2Provider):
        default_api_url = "https://api.acme.example/me"
        hooks = AcmeHooks()

A hook returning ``None`` leaves the step to the generic flow. A hook gets the provider as
:class:`~flask_social_oauth2.providers.hooks.HookedProvider`: its name, settings (and their
``customProperties`` parsed, :attr:`HookedProvider.options`) and requests (its client),
nothing of the flow.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ..config.provider_options import PropertyReader, ProviderOptions
from ..config.settings import OAuth2Info, OAuth2Settings, SocialProfile
from ..errors import ConfigurationProblem
from ..oauth.dpop import DPoPKey
from ..oauth.provider_response import ProviderResponse
from ..oidc import discovery
from ..web.state_cookie import PendingFlow
from .client import ProviderClient

__all__ = ["HookedProvider", "ProviderHooks"]


class HookedProvider(Protocol):
    """What a hook may use of its provider: facts and requests, never the flow's steps."""

    @property
    def name(self) -> str: ...

    @property
    def settings(self) -> OAuth2Settings: ...

    @property
    def options(self) -> ProviderOptions: ...

    @property
    def client(self) -> ProviderClient: ...

    @property
    def context(self) -> Mapping[str, str]: ...

    @property
    def issuer(self) -> str | None: ...

    @property
    def profile_url(self) -> str | None: ...

    def uses_nonce(self) -> bool: ...

    def authorization_endpoint(self) -> str | None: ...

    def openid_metadata(self) -> discovery.ProviderMetadata | None: ...

    def request_answer(
        self, method: str, url: str, info: OAuth2Info | None, **kw: Any
    ) -> ProviderResponse: ...

    def optional_json(
        self, url: str, info: OAuth2Info, step: str, headers: Mapping[str, str] | None = None
    ) -> Any: ...


class ProviderHooks:
    """The places a provider may differ; each default is the generic flow's (see the module).

    The class attributes are flags the flow reads; the methods are called by the flow at
    the step their name says, with the provider
    (:class:`~flask_social_oauth2.providers.hooks.HookedProvider`) first.
    """

    __slots__ = ()

    #: Whether the callback is always a form ``POST`` (``response_mode=form_post``, Apple).
    form_post_callback: bool = False
    #: Whether relative API URLs are joined to each identity's own server (Bluesky's PDS).
    api_base_per_identity: bool = False
    #: Whether a token answer the flow refuses is revoked before the error is raised.
    revokes_refused_tokens: bool = False
    #: The callback's ``error`` codes that mean the user cancelled (an ``AccessDeniedError``).
    cancel_errors: frozenset[str] = frozenset({"access_denied"})

    # -- configuration (no provider yet) ---------------------------------------------------

    def prepare_settings(self, settings: OAuth2Settings) -> OAuth2Settings:
        """The settings the provider runs with, made from the block's (e.g. the client
        authentication they imply)."""
        return settings

    def read_options(self, read: PropertyReader) -> object:
        """The ``customProperties`` only this provider reads, parsed into its own frozen
        record (:attr:`ProviderOptions.own
        <flask_social_oauth2.config.provider_options.ProviderOptions.own>`, read back with
        ``provider.options.own_as(MyOptions)``), each wrong value noted with
        ``read.problem``; ``None`` (the default) when it reads none. Called once per provider
        object, when it is made."""
        return None

    def settings_problems(
        self, settings: OAuth2Settings, problems: list[ConfigurationProblem]
    ) -> list[ConfigurationProblem]:
        """The block's problems, given the generic checks' ``problems``."""
        return problems

    def issuer(self, settings: OAuth2Settings, issuer: str | None) -> str | None:
        """The OpenID Connect issuer, given the generic one."""
        return issuer

    def uses_nonce(self, settings: OAuth2Settings) -> bool | None:
        """Whether the flow sends a nonce; ``None``: when the scope asks for ``openid``."""
        return None

    def uses_dpop(self, settings: OAuth2Settings) -> bool | None:
        """Whether tokens are DPoP-bound; ``None``: as ``customProperties.dpop`` says."""
        return None

    def uses_discovery(self) -> bool:
        """Whether the issuer's OpenID Connect discovery document is read."""
        return True

    # -- the start -----------------------------------------------------------------------------

    def flow_context(self, provider: HookedProvider) -> tuple[tuple[str, str], ...]:
        """What a flow starting now is bound to besides the settings (kept in the state
        cookie, handed back as the provider's
        :attr:`~flask_social_oauth2.providers.hooks.HookedProvider.context`). Needs a request
        context."""
        return ()

    def bound_settings(
        self, settings: OAuth2Settings, context: Mapping[str, str], redirect_uri: str
    ) -> tuple[OAuth2Settings, Mapping[str, str]]:
        """The settings and context of the provider bound to a flow's (or a token's)
        ``context``."""
        return settings, context

    def authorization_url(
        self, provider: HookedProvider, pending: PendingFlow, dpop_key: DPoPKey | None
    ) -> str | None:
        """The whole address that starts ``pending``, for a provider that builds it itself."""
        return None

    # -- the callback and the token ------------------------------------------------------------

    def check_issuer(self, provider: HookedProvider, issuer: str | None) -> bool:
        """Check the callback's ``iss``; ``True`` when done (else the generic RFC 9207 check)."""
        return False

    def exchange_fields(self, provider: HookedProvider) -> tuple[tuple[str, str], ...]:
        """Fields of the callback the code exchange forwards in its body. Needs a request
        context."""
        return ()

    def token_endpoint(self, provider: HookedProvider) -> str | None:
        """Where the code exchange and the refresh go, when not ``accessTokenURL``."""
        return None

    def token_request_settings(self, provider: HookedProvider) -> OAuth2Settings | None:
        """The settings token endpoint requests are authenticated with (Apple: a signed
        ``clientSecret``), when not the block's."""
        return None

    def received_token(self, provider: HookedProvider, info: OAuth2Info) -> OAuth2Info:
        """The code exchange's answer as the sign-in keeps it (e.g. with what the callback
        named)."""
        return info

    def read_token_answer(
        self, provider: HookedProvider, info: OAuth2Info, pending: PendingFlow | None
    ) -> OAuth2Info | None:
        """The token answer checked against the flow, for a provider that checks it itself."""
        return None

    def token_context(self, info: OAuth2Info) -> dict[str, str] | None:
        """The context of the server that issued ``info``, where refresh and revocation must
        go (``None``: the provider's own)."""
        return None

    def refresh_fields(self, info: OAuth2Info) -> tuple[tuple[str, str], ...]:
        """Fields a refresh of ``info`` adds to its body."""
        return ()

    def refreshed(
        self, provider: HookedProvider, info: OAuth2Info, renewed: OAuth2Info
    ) -> OAuth2Info:
        """A refresh's answer as kept, given the token it renews."""
        return renewed

    def revocation_url(self, provider: HookedProvider, built_in: str | None) -> str | None:
        """The provider's own revocation endpoint, given the built-in one."""
        return built_in

    # -- the profile and the API ---------------------------------------------------------------

    def fetch_profile(self, provider: HookedProvider, info: OAuth2Info) -> Mapping[str, Any] | None:
        """The profile JSON, for a provider that does not read it from its profile address."""
        return None

    def profile_form(
        self, provider: HookedProvider, info: OAuth2Info, form: dict[str, str]
    ) -> dict[str, str]:
        """The form body of a profile ``POST`` that carries the token."""
        return form

    def profile_query(
        self, provider: HookedProvider, info: OAuth2Info, params: dict[str, str]
    ) -> dict[str, str]:
        """The query parameters of the profile request."""
        return params

    def check_profile_answer(self, provider: HookedProvider, raw: Any) -> None:
        """Refuse a profile answer that says it failed, before it is read."""

    def read_profile(
        self, provider: HookedProvider, raw: Any, info: OAuth2Info, profile: SocialProfile
    ) -> SocialProfile:
        """The profile read from ``raw`` with the field mapping, finished."""
        return profile

    def complete_profile(
        self, provider: HookedProvider, info: OAuth2Info, profile: SocialProfile
    ) -> SocialProfile:
        """The profile after further calls for what it lacks."""
        return profile

    def api_base_for(self, provider: HookedProvider, info: OAuth2Info | None) -> str | None:
        """The base of relative API URLs, for :attr:`api_base_per_identity` providers."""
        return None

    def client_metadata(self, provider: HookedProvider) -> dict[str, Any] | None:
        """The OAuth client metadata document the extension serves, if any."""
        return None


#: The hooks of a provider that differs in nothing.
PLAIN: ProviderHooks = ProviderHooks()
