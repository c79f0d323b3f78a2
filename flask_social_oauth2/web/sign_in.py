"""The server-side steps of a sign-in, for any provider: start it (state, PKCE, nonce, the
redirect) and finish it (state, the settings it is bound to, ``iss``, then the token request).

The provider hands itself in; this module knows it only by the :class:`FlowProvider` protocol,
so it never imports :mod:`flask_social_oauth2.providers.oauth2`.
"""

from __future__ import annotations

import hmac
import logging
from typing import Protocol
from urllib.parse import urlsplit

from flask import Response, current_app, request
from werkzeug.datastructures import MultiDict

from ..config.settings import OAuth2Info, OAuth2Settings
from ..errors import (
    AccessDeniedError,
    AuthenticationError,
    InvalidCallbackError,
    ProviderRefusedError,
    StateError,
)
from ..oauth import flow
from ..oauth.dpop import DPoPKey
from ..tokens.cipher import InvalidToken
from ..tokens.store import current_cipher
from . import callback, form_post, state_cookie
from .callback import Callback
from .redirects import resolve_redirect_uri, safe_next_path
from .start_confirmation import StartConfirmation
from .state_cookie import PendingFlow, StateCookieStore

logger = logging.getLogger("flask_social_oauth2")


class FlowProvider(Protocol):
    """What the steps need of a provider (:class:`~flask_social_oauth2.OAuth2Provider` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def settings(self) -> OAuth2Settings: ...

    @property
    def issuer(self) -> str | None: ...

    def uses_nonce(self) -> bool: ...

    def authorization_endpoint(self) -> str | None: ...

    def uses_dpop(self) -> bool: ...

    def authorization_url(self, pending: PendingFlow, dpop_key: DPoPKey | None = None) -> str: ...

    def check_issuer(self, issuer: str | None) -> None: ...

    def exchange_code(
        self,
        code: str,
        *,
        redirect_uri: str,
        verifier: str | None,
        dpop_key: DPoPKey | None = None,
    ) -> OAuth2Info: ...

    def verify_token(self, info: OAuth2Info, pending: PendingFlow | None) -> OAuth2Info: ...

    def flow_context(self) -> tuple[tuple[str, str], ...]:
        """What a flow starting now is bound to besides the settings (see
        ``PendingFlow.context``): ``()`` for most providers."""
        ...

    def for_flow(self, pending: PendingFlow) -> FlowProvider:
        """The provider as the flow ``pending`` uses it (itself, for most providers)."""
        ...

    @property
    def title(self) -> str: ...

    @property
    def cancel_errors(self) -> frozenset[str]:
        """The callback's ``error`` codes that mean the user cancelled (``access_denied``)."""
        ...

    def authorization_origins(self) -> tuple[str, ...]: ...


class FlowStores(Protocol):
    """What the steps keep per app: the app's runtime record is one (the provider hands it
    in; this module never reaches up for it)."""

    @property
    def state_cookies(self) -> StateCookieStore: ...

    @property
    def start_confirmation(self) -> StartConfirmation | None: ...


def flow_binding(provider: FlowProvider, redirect_uri: str) -> str:
    """The digest that binds a flow started with ``redirect_uri`` to the provider's settings:
    token endpoint, client, redirect_uri, issuer and whether ``openid`` is asked."""
    return callback.flow_binding(
        token_url=provider.settings.access_token_url,
        client_id=provider.settings.client_id,
        redirect_uri=redirect_uri,
        issuer=provider.issuer,
        openid=provider.uses_nonce(),
    )


def step(provider: FlowProvider, stores: FlowStores) -> Response | OAuth2Info:
    """Run the step of the sign-in the current request is at: start it, or finish it (or end
    it with the provider's error) when the request is the provider's callback. A start from
    another origin's page is first confirmed by the user (see
    :mod:`flask_social_oauth2.web.start_confirmation`)."""
    if request.method == "HEAD":  # a link preview or prefetch: never a step of the flow
        return callback.head_response()
    confirmation = stores.start_confirmation
    if confirmation is not None and confirmation.is_posted():
        confirmation.check(provider.name)
        return start(provider, stores)
    received = callback.read_callback(provider.name)
    if received is None:
        if confirmation is not None and confirmation.needed():
            origins = provider.authorization_origins()
            if origins:  # else no start on the server at all: start() says why
                return confirmation.page(provider.name, provider.title, origins)
        return start(provider, stores)
    if received.error is not None:
        end_with_provider_error(provider, received, stores)
    return finish(provider, received, stores)


def form_post_step(provider: FlowProvider, stores: FlowStores) -> Response | OAuth2Info:
    """The step of a form-post callback (``response_mode=form_post``): the provider's
    cross-site ``POST`` arrives without the ``SameSite=Lax`` state cookie and is answered with
    the same-origin page that posts the fields once more (:func:`~flask_social_oauth2.
    form_post.hop_page`); that second ``POST``, with the cookie, ends the flow as a ``GET``
    callback does.

    :raises InvalidCallbackError: for a body that is not a form, or fields given twice or too
        long.
    """
    received = form_post.read_form_post(provider.name)
    if not received.hopped:
        return form_post.hop_page(received)
    fields = received.callback()
    if fields.error is not None:
        end_with_provider_error(provider, fields, stores)
    return finish(provider, fields, stores)


def start(provider: FlowProvider, stores: FlowStores) -> Response:
    """Record a new flow in the browser's state cookie and redirect to the provider."""
    settings = provider.settings
    if settings.authorization_url is None and provider.authorization_endpoint() is None:
        raise AuthenticationError(
            provider.name,
            "has no authorizationURL, so it cannot start a sign-in on the server; it is"
            " configured for a client-side framework, which POSTs the code as JSON",
            status_code=400,
        )
    redirect_uri = resolve_redirect_uri(settings.redirect_url)
    dpop_key = DPoPKey.generate() if provider.uses_dpop() else None
    pending = PendingFlow(
        state=flow.new_state(),
        provider=provider.name,
        redirect_uri=redirect_uri,
        verifier=flow.new_verifier(),
        next_url=safe_next_path(_first(request.args, "next")),
        created=state_cookie.now(),
        nonce=flow.new_nonce() if provider.uses_nonce() else None,
        binding=flow_binding(provider, redirect_uri),
        dpop_key=None if dpop_key is None else current_cipher().encrypt(dpop_key.export().encode()),
        context=provider.flow_context(),
    )
    url = provider.for_flow(pending).authorization_url(pending, dpop_key)
    store = stores.state_cookies
    flows = store.load()
    flows.append(pending)
    store.save(flows)
    response = current_app.response_class(status=302)
    response.headers["Location"] = url  # the flow's page headers come with the cookie
    logger.info("%s: sign-in started", provider.name)
    return response


def end_with_provider_error(provider: FlowProvider, received: Callback, stores: FlowStores) -> None:
    """Turn an ``error=`` callback into its exception, once its ``iss`` is checked (a forged
    error is a mix-up too, RFC 9207); the flow it names is forgotten.

    :raises AccessDeniedError: for ``access_denied`` (or another code the provider's
        ``cancel_errors`` name, e.g. Apple's ``user_cancelled_authorize``).
    :raises ProviderRefusedError: for any other error code.
    :raises StateError: when ``iss`` is not the provider's issuer.
    """
    pending = None
    if received.state:
        store = stores.state_cookies
        flows = store.load()
        pending = state_cookie.find(flows, received.state)
        if pending is not None and pending.provider == provider.name:
            store.save([item for item in flows if item is not pending])
        else:
            pending = None
    (provider if pending is None else provider.for_flow(pending)).check_issuer(received.iss)
    error = received.error or ""
    code = flow.safe_error_code(error)
    logger.info("%s: the provider answered error %r", provider.name, code)
    if error in provider.cancel_errors:
        raise AccessDeniedError(provider.name, "the user or the provider refused the authorization")
    raise ProviderRefusedError(provider.name, code)


def finish(provider: FlowProvider, received: Callback, stores: FlowStores) -> OAuth2Info:
    """Finish the flow the callback's state names: every check comes before the token
    request, and the flow is used up whatever the outcome.

    :raises StateError: for an unknown state, a flow of another provider or of other
        settings, or a wrong ``iss``.
    """
    name = provider.name
    if not received.state:
        raise StateError(name, "callback without state")
    store = stores.state_cookies
    flows = store.load()
    pending = state_cookie.find(flows, received.state)
    if pending is None:
        if not flows and not store.arrived():
            raise StateError.without_cookie(name, _redirect_host(provider.settings.redirect_url))
        raise StateError(name, "state matches no unexpired sign-in started in this browser")
    store.save([item for item in flows if item is not pending])
    if pending.provider != name:
        raise StateError(
            name, f"state was issued for provider {pending.provider!r} (mix-up refused)"
        )
    binding = flow_binding(provider, resolve_redirect_uri(provider.settings.redirect_url))
    if not hmac.compare_digest(pending.binding, binding):
        raise StateError(
            name,
            "the sign-in was started under other settings (token endpoint, client, redirect"
            " URI, issuer or openid scope)",
        )
    provider = provider.for_flow(pending)
    provider.check_issuer(received.iss)
    if not received.code:
        raise InvalidCallbackError(name, "callback without code")
    info = provider.exchange_code(
        received.code,
        redirect_uri=pending.redirect_uri,
        verifier=pending.verifier,
        dpop_key=_flow_dpop_key(name, pending),
    )
    info = provider.verify_token(info, pending)
    callback.remember_finished(pending)
    logger.info("%s: code exchanged for a token", name)
    return info


def finish_posted_code(provider: FlowProvider, code: str, verifier: str) -> OAuth2Info:
    """Redeem a code that a client-side framework obtained and POSTed (no server-side state;
    the framework checked it in the browser) with the ``verifier`` of the PKCE pair the browser
    made: the provider checks it against the challenge of the authorization request. The token
    request uses the configured ``redirectURL``."""
    if not code or len(code) > callback.MAX_CALLBACK_VALUE or not verifier:
        raise InvalidCallbackError(provider.name, "missing or oversized code or verifier")
    if provider.uses_dpop():  # the key would have to come from the browser: never
        raise InvalidCallbackError(
            provider.name, "a DPoP-bound provider (customProperties.dpop) takes no posted code"
        )
    redirect_uri = resolve_redirect_uri(provider.settings.redirect_url)
    info = provider.exchange_code(code, redirect_uri=redirect_uri, verifier=verifier)
    return provider.verify_token(info, None)


def _redirect_host(redirect_url: str) -> str | None:
    """The host (and port) of an absolute ``redirectURL``; ``None`` for a path."""
    return None if redirect_url.startswith("/") else urlsplit(redirect_url).netloc or None


def _first(args: MultiDict[str, str], name: str) -> str | None:
    """The first value of query parameter ``name``, looked for first: for a missing one,
    ``get`` raises and catches an HTTP exception inside werkzeug, ``getlist`` a KeyError."""
    if name not in args:
        return None
    values = args.getlist(name)
    return values[0] if values else None


def _flow_dpop_key(provider: str, pending: PendingFlow) -> DPoPKey | None:
    """The DPoP key the flow was started with, decrypted.

    :raises StateError: when no key of the app opens it (the keys changed meanwhile).
    """
    if pending.dpop_key is None:
        return None
    try:
        return DPoPKey.load(current_cipher().decrypt(pending.dpop_key).decode())
    except (InvalidToken, ValueError, UnicodeError):
        raise StateError(provider, "the sign-in's DPoP key cannot be read") from None
