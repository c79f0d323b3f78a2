"""The requests a provider sends its server for the flow and after it: the authorization
request (pushed, where the provider takes PAR), the code exchange, refresh, revocation, and the
end-of-session address.

The bodies of the :class:`~flask_social_oauth2.OAuth2Provider` methods of the same names,
taking the provider as :class:`TokenHolder` (what they need of it, and no more).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Protocol
from urllib.parse import parse_qsl, urlencode

from ..config.provider_options import ProviderOptions
from ..config.settings import OAuth2Info, OAuth2Settings
from ..errors import AuthenticationError, ConfigurationProblem, StateError
from ..oauth import client_auth, dpop, flow, par, revocation
from ..oauth.dpop import DPoPKey
from ..oauth.provider_response import ProviderResponse
from ..oidc import discovery, id_token, tenants
from ..web import form_post, id_token_sign_in
from ..web.redirects import resolve_redirect_uri
from ..web.state_cookie import PendingFlow
from .client import BodyWith
from .hooks import HookedProvider, ProviderHooks

logger = logging.getLogger("flask_social_oauth2")


class TokenHolder(HookedProvider, Protocol):
    """What refresh and revocation need of a provider."""

    @property
    def hooks(self) -> ProviderHooks: ...

    @property
    def extra_id_token_issuers(self) -> frozenset[str]: ...

    def for_token(self, info: OAuth2Info) -> TokenHolder: ...

    def code_exchange_url(self) -> str: ...

    def received_token(self, info: OAuth2Info) -> OAuth2Info: ...

    def parse_token_response(self, response: ProviderResponse) -> OAuth2Info: ...

    def refresh(self, info: OAuth2Info, *, scope: str | None = None) -> OAuth2Info: ...

    def revoke(self, info: OAuth2Info) -> bool: ...

    def drop(self, info: OAuth2Info) -> None: ...

    def token_request_settings(self) -> OAuth2Settings: ...

    def built_in_revocation_url(self) -> str | None: ...

    def openid_source(self) -> discovery.Source: ...

    def post_to_token_endpoint(
        self, step: str, body: BodyWith, url: str, *, dpop_key: DPoPKey | None = None
    ) -> ProviderResponse: ...


def authorization_url(provider: TokenHolder, pending: PendingFlow, dpop_key: DPoPKey | None) -> str:
    """See :meth:`OAuth2Provider.authorization_url
    <flask_social_oauth2.OAuth2Provider.authorization_url>`."""
    built = provider.hooks.authorization_url(provider, pending, dpop_key)
    if built is not None:
        return built
    assert pending.verifier is not None
    endpoint = provider.authorization_endpoint()  # configured, or discovered
    assert endpoint is not None
    push_to = par.endpoint(provider.name, provider.options, provider.openid_metadata)
    mode = form_post.request_params(provider.settings, provider.options)
    if push_to is None:
        # without a push, the key is named in the request (RFC 9449 10)
        bound = () if dpop_key is None else (("dpop_jkt", dpop_key.thumbprint),)
        return flow.authorization_url(
            provider.settings,
            endpoint=endpoint,
            redirect_uri=pending.redirect_uri,
            state=pending.state,
            verifier=pending.verifier,
            nonce=pending.nonce,
            extra=(*mode, *bound),
        )
    params = flow.authorization_params(
        provider.settings,
        redirect_uri=pending.redirect_uri,
        state=pending.state,
        verifier=pending.verifier,
        nonce=pending.nonce,
        extra=mode,
    )

    def body(client_fields: Sequence[tuple[str, str]]) -> str:
        return urlencode([*params, *client_fields])

    answer = provider.post_to_token_endpoint(par.STEP, body, push_to, dpop_key=dpop_key)
    request_uri = par.read_answer(provider.name, answer)
    return par.browser_url(endpoint, provider.settings.client_id, request_uri)


def exchange_code(
    provider: TokenHolder,
    code: str,
    *,
    redirect_uri: str,
    verifier: str | None,
    dpop_key: DPoPKey | None,
) -> OAuth2Info:
    """See :meth:`OAuth2Provider.exchange_code <.oauth2.OAuth2Provider.exchange_code>`."""
    settings = provider.token_request_settings()
    url = provider.code_exchange_url()
    forwarded = provider.hooks.exchange_fields(provider)

    def body(client_fields: Sequence[tuple[str, str]]) -> str:
        form = flow.token_request_body(
            settings,
            code=code,
            redirect_uri=redirect_uri,
            verifier=verifier,
            client_fields=client_fields,
        )
        return with_fields(form, forwarded)

    response = provider.post_to_token_endpoint("token request", body, url, dpop_key=dpop_key)
    if dpop_key is None:
        return provider.received_token(provider.parse_token_response(response))
    info = flow.parse_token_response(provider.name, response, dpop=True)
    return provider.received_token(dataclasses.replace(info, dpop_key=dpop_key.export()))


def block_problems(
    settings: OAuth2Settings,
    options: ProviderOptions,
    *,
    issuer: str | None,
    has_profile: bool,
    form_post_always: bool,
) -> list[ConfigurationProblem]:
    """The problems of a block that every OAuth 2.0 provider checks besides the values of its
    ``customProperties`` (:func:`~flask_social_oauth2.config.provider_options.
    read_provider_options`): a profile address, a client authentication key, PAR, ID tokens and
    the callback's form."""
    problems = []
    if not has_profile:
        problems.append(
            ConfigurationProblem(
                None, "apiURL", "is required: this provider has no built-in profile address"
            )
        )
    problems.extend(client_auth.settings_problems(settings, options))
    problems.extend(par.settings_problems(options, has_issuer=issuer is not None))
    verifies = issuer is not None and "openid" in (settings.scope or "").split()
    problems.extend(id_token.settings_problems(verifies=verifies))
    problems.extend(tenants.settings_problems(options, verifies=verifies))
    problems.extend(form_post.settings_problems(settings, options, always=form_post_always))
    problems.extend(id_token_sign_in.settings_problems(options, issuer=issuer))
    return problems


def check_issuer(provider: TokenHolder, issuer: str | None) -> None:
    """See :meth:`OAuth2Provider.check_issuer <flask_social_oauth2.OAuth2Provider.check_issuer>`."""
    expected = provider.issuer
    if expected is None:
        return
    if issuer is not None and issuer != expected:
        raise StateError(provider.name, "callback's iss is another issuer (mix-up refused)")
    metadata = provider.openid_metadata() if issuer is None else None
    if metadata is not None and metadata.iss_parameter_supported:
        raise StateError(provider.name, "callback lacks the iss its provider announces")


def verified_token(
    provider: TokenHolder, info: OAuth2Info, pending: PendingFlow | None
) -> OAuth2Info:
    """The token answer checked against the flow it ends (see :meth:`OAuth2Provider.
    verify_token <flask_social_oauth2.OAuth2Provider.verify_token>`), by the provider's hooks,
    else by the ID token when the provider has an issuer and the scope asks for ``openid``."""
    checked = provider.hooks.read_token_answer(provider, info, pending)
    if checked is not None:
        return checked
    issuer = provider.issuer
    if issuer is None or not provider.uses_nonce():
        return info
    nonce = pending.nonce if pending is not None else None
    return id_token.verify_token_response(
        provider.openid_source(),
        provider.settings,
        provider.options,
        info,
        issuer,
        nonce=nonce,
        extra_issuers=provider.extra_id_token_issuers,
    )


def with_fields(form: str, fields: Sequence[tuple[str, str]]) -> str:
    """The form body ``form`` with ``fields`` added."""
    return urlencode([*parse_qsl(form), *fields]) if fields else form


def refresh(provider: TokenHolder, info: OAuth2Info, scope: str | None) -> OAuth2Info:
    """See :meth:`OAuth2Provider.refresh <flask_social_oauth2.OAuth2Provider.refresh>`."""
    target = provider.for_token(info)
    if target is not provider:
        return target.refresh(info, scope=scope)
    if not info.refresh_token:
        raise AuthenticationError(
            provider.name,
            "cannot refresh: the token has no refresh_token (the provider issued none;"
            " some issue one only for an 'offline_access' scope or parameter)",
        )
    settings, refresh_token = provider.token_request_settings(), info.refresh_token
    added = provider.hooks.refresh_fields(info)

    def body(client_fields: Sequence[tuple[str, str]]) -> str:
        form = flow.refresh_request_body(
            settings, refresh_token=refresh_token, scope=scope, client_fields=client_fields
        )
        return with_fields(form, added)

    url = provider.hooks.token_endpoint(provider) or provider.settings.access_token_url
    key = None if info.dpop_key is None else dpop.DPoPKey.load(info.dpop_key)
    response = provider.post_to_token_endpoint("refresh request", body, url, dpop_key=key)
    if key is None:
        renewed = flow.parse_token_response(provider.name, response, "refresh request")
    else:
        renewed = flow.parse_token_response(provider.name, response, "refresh request", dpop=True)
        renewed = dataclasses.replace(renewed, dpop_key=info.dpop_key)
    if renewed.refresh_token is None:
        renewed = dataclasses.replace(renewed, refresh_token=info.refresh_token)
    issuer = provider.issuer
    if issuer is not None and renewed.params.get("id_token") is not None:
        subject = info.id_token_claims.get("sub") if info.id_token_claims else None
        renewed = id_token.verify_token_response(
            provider.openid_source(),
            provider.settings,
            provider.options,
            renewed,
            issuer,
            nonce=None,
            required=False,
            subject=subject,
            extra_issuers=provider.extra_id_token_issuers,
        )
    elif info.id_token_claims is not None:
        renewed = dataclasses.replace(renewed, id_token_claims=info.id_token_claims)
    try:
        renewed = provider.hooks.refreshed(provider, info, renewed)
    except AuthenticationError:
        if provider.hooks.revokes_refused_tokens:
            provider.drop(renewed)
        raise
    logger.info("%s: token refreshed", provider.name)
    return renewed


def revoke(provider: TokenHolder, info: OAuth2Info) -> bool:
    """See :meth:`OAuth2Provider.revoke <flask_social_oauth2.OAuth2Provider.revoke>`."""
    target = provider.for_token(info)
    if target is not provider:
        return target.revoke(info)
    built_in = provider.built_in_revocation_url()
    url = revocation.endpoint(provider.options, built_in, lambda: _discovered(provider))
    if url is None:
        return False
    settings = provider.token_request_settings()

    def body(client_fields: Sequence[tuple[str, str]]) -> str:
        return revocation.request_body(settings, info, client_fields)

    key = None if info.dpop_key is None else dpop.DPoPKey.load(info.dpop_key)
    response = provider.post_to_token_endpoint(revocation.STEP, body, url, dpop_key=key)
    revocation.check_answer(provider.name, response)
    logger.info("%s: token revoked", provider.name)
    return True


def logout_url(
    provider: TokenHolder,
    post_logout_redirect_uri: str | None,
    state: str | None,
    id_token_hint: str | None = None,
    logout_hint: str | None = None,
) -> str | None:
    """See :meth:`OAuth2Provider.logout_url <flask_social_oauth2.OAuth2Provider.logout_url>`."""
    configured = provider.options.end_session_url
    if configured is None:
        metadata = provider.openid_metadata()
        configured = None if metadata is None else metadata.end_session_endpoint
    if configured is None:
        return None
    params = [("client_id", provider.settings.client_id)]
    if id_token_hint is not None:
        params.append(("id_token_hint", id_token_hint))
    if logout_hint is not None:
        params.append(("logout_hint", logout_hint))
    if post_logout_redirect_uri is not None:
        params.append(("post_logout_redirect_uri", resolve_redirect_uri(post_logout_redirect_uri)))
    if state is not None:
        params.append(("state", state))
    from oauthlib.common import add_params_to_uri

    return str(add_params_to_uri(configured, params))


def _discovered(provider: TokenHolder) -> str | None:
    metadata = provider.openid_metadata()
    return None if metadata is None else metadata.revocation_endpoint
