"""The Flask extension: configuration, the provider registry, the authenticate route, hooks."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, TypeGuard, TypeVar

from flask import (
    Blueprint,
    Flask,
    Response,
    current_app,
    has_request_context,
)

from . import accounts
from .errors import (
    AuthenticationError,
    ConfigurationError,
    ConfigurationProblem,
    SignInRequiredError,
    SocialOAuth2Error,
    UnknownProviderError,
)
from .routes.sign_in import SignInHandlers, next_url
from .runtime import EXTENSION_KEY, Runtime, current_runtime
from .web.start_confirmation import StartConfirmation
from .web.state_cookie import StateCookieStore, app_scope

# Importing this module stays cheap (the figure README.md gives): the providers, the flow, the
# token stores and the configuration readers are imported where init_app or a request needs them.
if TYPE_CHECKING:
    from .api import ProviderSession
    from .config.settings import OAuth2Settings
    from .providers.oauth2 import OAuth2Provider, SocialProvider
    from .tokens.identity import Identity
    from .web.loaded_providers import ProviderLoader

logger = logging.getLogger("flask_social_oauth2")

ENDPOINT: Final = "social_oauth2.authenticate"

_H = TypeVar("_H", bound=Callable[..., Any])
_L = TypeVar("_L", bound="ProviderLoader")


class SocialOAuth2:
    """The extension. Configure providers in the app's config, then::

        social = SocialOAuth2(app)   # or: social = SocialOAuth2(); social.init_app(app)

    It mounts ``GET /authenticate/<provider>`` (``SOCIAL_OAUTH2_URL_RULE``), which starts a
    sign-in and finishes it when the provider sends the user back, and accepts ``POST`` there
    with a JSON ``{"code": ...}`` from a client-side framework for providers configured for one.

    :param app: The app to set up now, if any.
    :param provider_classes: Provider name -> class, for blocks that need a class other than the
        one their name selects (e.g. ``{"github-enterprise": GitHubProvider}``).
    """

    def __init__(
        self,
        app: Flask | None = None,
        *,
        provider_classes: Mapping[str, type[SocialProvider]] | None = None,
    ) -> None:
        self._provider_classes = dict(provider_classes or {})
        self._handlers = SignInHandlers()
        self._domain_loader: Callable[[str], str | None] | None = None
        self._provider_loader: ProviderLoader | None = None
        if app is not None:
            self.init_app(app)

    # -- setup ---------------------------------------------------------------------------------

    def init_app(self, app: Flask) -> None:
        """Read and validate the app's provider configuration and mount the route.

        :raises ConfigurationError: listing every problem of every block.
        :raises SocialOAuth2Error: when the extension is already set up on ``app``.
        """
        from .checks import (
            REPORTED_BY_CHECK,
            check_redirect_urls_once,
            provider_class,
            redirect_url_problems,
            untrusted_host_warning,
        )
        from .config.blocks import load_settings
        from .config.email_domains import domains_by_block
        from .options import DEFAULTS, read_options
        from .providers.buttons import install as install_buttons
        from .routes import documents
        from .routes.logout import mount_logout_routes
        from .web.loaded_providers import LoadedProviders

        if EXTENSION_KEY in app.extensions:
            raise SocialOAuth2Error(
                f"flask-social-oauth2 is already set up on app {app.name!r}; call init_app once"
            )
        config = app.config
        for key, value in DEFAULTS.items():
            config.setdefault(key, value)
        options = read_options(config)
        settings = load_settings(config, root_path=app.root_path)
        providers: dict[str, SocialProvider] = {}
        problems: list[ConfigurationProblem] = []
        for name, record in settings.items():
            choice = options.provider_classes.get(name, self._provider_classes.get(name))
            cls = provider_class(
                name, choice, problems, setting="SOCIAL_OAUTH2_PROVIDER_CLASSES", imports=True
            )
            if cls is None:
                continue
            for problem in cls.settings_problems(record):
                problems.append(ConfigurationProblem(name, problem.key, problem.message))
            providers[name] = cls(name, record)
        email_domains, domain_problems = domains_by_block(settings)
        problems.extend(domain_problems)
        problems.extend(accounts.logout_problems(providers, options.token_store))
        if problems:
            raise ConfigurationError(problems)
        rule = options.rule
        blueprint = Blueprint("social_oauth2", __name__, template_folder="web/templates")
        blueprint.add_url_rule(rule, "authenticate", self._handlers.view, methods=["GET", "POST"])
        blueprint.add_url_rule(f"{rule}/jwks.json", "jwks", documents.jwks_view)
        blueprint.add_url_rule(
            f"{rule}/client-metadata.json", "client_metadata", documents.client_metadata_view
        )
        install_buttons(blueprint, options.sign_in_page)

        mount_logout_routes(blueprint, rule)
        app.register_blueprint(blueprint)
        scope = app_scope(app.import_name, rule)
        app.extensions[EXTENSION_KEY] = Runtime(
            extension=self,
            providers=MappingProxyType(providers),
            endpoint=ENDPOINT,
            session_key=options.session_key,
            state_cookies=StateCookieStore(
                name=options.state_cookie or f"social_oauth2_state_{scope}",
                path=options.state_cookie_path,
                ttl=options.state_ttl,
                scope=scope,
            ),
            timeout=options.timeout,
            max_response_bytes=options.max_bytes,
            discovery_failure_ttl=options.discovery_failure_ttl,
            token_store=options.token_store,
            email_domains=MappingProxyType(email_domains),
            refresh_leeway=options.refresh_leeway,
            start_confirmation=StartConfirmation(
                cookie_name=f"social_oauth2_start_{scope}",
                path=options.state_cookie_path,
                scope=scope,
            )
            if options.confirm_cross_site_starts
            else None,
            sign_in_page=options.sign_in_page,
            loaded=LoadedProviders(
                self._registered_loader,
                ttl=options.provider_cache_ttl,
                size=options.provider_cache_size,
            ),
            session_check_seconds=options.session_check_seconds,
            check_redirect_urls=options.check_redirect_urls,
        )
        accounts.watch_provider_logouts(app)
        if options.check_redirect_urls:
            early_problems = redirect_url_problems(app, routes_complete=False)
            if early_problems:
                del app.extensions[EXTENSION_KEY]
                raise ConfigurationError(early_problems)
            app.before_request(check_redirect_urls_once)
        app.register_error_handler(AuthenticationError, self._handlers.handle_error)
        warning = untrusted_host_warning(app, providers)
        if warning is not None:
            logger.warning("%s", warning, extra={REPORTED_BY_CHECK: True})

    # -- registry ------------------------------------------------------------------------------

    def provider(self, name: str) -> SocialProvider:
        """The provider ``name`` of the current app: a configured one, else the one the
        :meth:`provider_loader` gives.

        :raises UnknownProviderError: when neither knows that name.
        :raises ProviderUnavailableError: when the loader fails or answers wrongly.
        """
        state = current_runtime()
        found = state.find_provider(name)
        if found is None:
            raise UnknownProviderError(str(name), list(state.providers))
        return found

    @property
    def providers(self) -> Mapping[str, SocialProvider]:
        """The current app's configured providers, by name (read-only; not the loaded ones)."""
        return current_runtime().providers

    def provider_loader(self, loader: _L) -> _L:
        """Register the function that gives the providers the app keeps at runtime (e.g. one
        per customer, in its database), as ``loader(name) -> SocialProvider | None``::

            @social.provider_loader
            def tenant(name):
                row = db.session.get(Tenant, name)
                return None if row is None else social.build_provider(name, row.block)

        It is called in an app context, only for names of the shape
        ``[a-z0-9][a-z0-9_.-]{0,62}`` without ``..`` that are not configured: a configured name
        always wins; any other name is the unknown-provider 404 without a call. Its answer,
        ``None`` included, is kept per app for ``SOCIAL_OAUTH2_PROVIDER_CACHE_TTL`` seconds, at
        most ``SOCIAL_OAUTH2_PROVIDER_CACHE_SIZE`` names, one call per name at a time. A loader
        that raises (a block that does not validate included), or returns anything but a
        provider of that name or ``None``, is a
        :class:`~flask_social_oauth2.errors.ProviderUnavailableError` (a 503 page, the reason
        logged), and nothing is kept. One loader per extension object, shared by the apps it
        is set up on; each app keeps its own answers.
        """
        self._provider_loader = loader
        return loader

    def _registered_loader(self) -> ProviderLoader | None:
        return self._provider_loader

    def build_provider(
        self,
        name: str,
        block: Mapping[str, Any] | OAuth2Settings,
        *,
        kind: str | type[SocialProvider] | None = None,
    ) -> SocialProvider:
        """The provider ``name`` of a block that is not in the app's configuration (a
        customer's, from a database), validated exactly as ``init_app`` validates a configured
        one, the redirect URL rule checked against the current app's routes. ``${VAR}`` is not
        read from the environment in such a block.

        :param name: Its name: 1 to 63 lower-case letters, digits, ``_``, ``.`` or ``-``
            (without ``..``), not a configured provider's.
        :param block: The specification's keys, as in YAML, or an :class:`OAuth2Settings`.
        :param kind: A built-in provider's name (``"okta"``, ``"microsoft"``) or a
            :class:`SocialProvider` subclass; default: the generic provider.
        :raises ConfigurationError: listing every problem.
        """
        from .checks import built_provider

        return built_provider(current_app._get_current_object(), name, block, kind)  # type: ignore[attr-defined]

    def forget_provider(self, name: str) -> None:
        """Drop the current app's kept answer of the :meth:`provider_loader` for ``name`` (e.g.
        after a customer edited its block), in this process: the next request asks the loader
        again. Other processes see the change within ``SOCIAL_OAUTH2_PROVIDER_CACHE_TTL``. A
        sign-in started under the old block whose token endpoint, client or issuer changed
        ends in a :class:`~flask_social_oauth2.errors.StateError`, nothing sent."""
        loaded = current_runtime().loaded
        if loaded is not None:
            loaded.forget(name)

    def api(self, name: str, key: str | None = None) -> ProviderSession:
        """A session for calling provider ``name``'s API as a signed-in identity, for this
        request or job only: a :class:`~flask_social_oauth2.api.ProviderSession`, which is a
        :class:`requests_oauthlib.OAuth2Session`. Relative URLs join the provider's API base::

            repos = social.api("github").get("user/repos").json()

        :param name: The provider's name.
        :param key: A stored identity's ``provider_key`` (e.g. in a job, where an app context
            is enough); by default, in a request, the identity signed in with ``name`` in this
            browser.
        :raises UnknownProviderError: when no block of that name is configured.
        :raises SignInRequiredError: when this browser has no identity for ``name`` or no
            tokens are kept (``SOCIAL_OAUTH2_TOKEN_STORE = "none"``).
        :raises RuntimeError: without ``key`` outside a request.
        """
        provider = self.provider(name)
        if not _is_oauth2(provider):
            raise TypeError(f"provider {name!r} is not an OAuth2Provider and has no API session")
        if key is None:
            if not has_request_context():
                raise RuntimeError("social.api(name) outside a request needs key=provider_key")
            key = accounts.signed_in().get(name)
            if key is None:
                raise SignInRequiredError(name, "this browser has not signed in with it")
        from .api import ProviderSession  # requests-oauthlib, at the first API call

        return ProviderSession(provider, key, current_runtime().token_store)

    def provider_for_email(self, address: str) -> str | None:
        """The provider that signs in the work e-mail ``address`` (home realm discovery): the
        block whose ``customProperties.domains`` lists its domain (exactly: ``acme.com`` is not
        ``eu.acme.com``), else the :meth:`domain_loader`'s answer, else ``None``.

        :raises ValueError: when ``address`` is not an e-mail address.
        :raises TypeError: when the domain loader answers neither a name nor ``None``.
        """
        from .config.email_domains import domain_of

        domain = domain_of(address)
        name = current_runtime().email_domains.get(domain)
        loader = self._domain_loader
        if name is not None or loader is None:
            return name
        answer = loader(domain)
        if answer is not None and not isinstance(answer, str):
            raise TypeError(f"domain loader {loader.__qualname__} returned {answer!r}, not a name")
        return answer

    def domain_loader(self, loader: Callable[[str], str | None]) -> Callable[[str], str | None]:
        """Register ``loader(domain) -> name | None`` (a decorator), which
        :meth:`provider_for_email` asks for a domain no block lists (lower case, punycode)."""
        self._domain_loader = loader
        return loader

    def discover_settings(
        self,
        issuer: str,
        *,
        client_id: str,
        client_secret: str,
        redirect_url: str,
        scope: str = "openid email profile",
        custom_properties: Mapping[str, str] | None = None,
        name: str | None = None,
    ) -> OAuth2Settings:
        """A block's settings for ``issuer`` from its discovery document (fetched in an app
        context; see :func:`~flask_social_oauth2.oidc.issuer_settings.settings_from_issuer`).

        :raises ConfigurationError: for a bad issuer (http off loopback, a query) or value.
        :raises DiscoveryError: when no discovery document of ``issuer`` can be read (502, 504).
        """
        from .oidc.issuer_settings import settings_from_issuer, source_name
        from .providers.client import document_source

        source = document_source(name or source_name(issuer))
        return settings_from_issuer(
            source,
            issuer,
            client_id=client_id,
            client_secret=client_secret,
            redirect_url=redirect_url,
            scope=scope,
            custom_properties=custom_properties,
        )

    # -- identities after sign-in ---------------------------------------------------------------

    def link(
        self, user_id: str | int, *, provider: str | None = None, key: str | None = None
    ) -> Identity:
        """Link the identity this request has just signed in (call it in
        :meth:`on_authenticated`) to the app's user ``user_id``, so that
        :meth:`identity` finds that user when the identity signs in again::

            @social.on_authenticated
            def signed_in(provider, info, profile):
                found = social.identity(provider.name, profile.provider_key)
                user = load_user(found.user_id) if found and found.user_id else create_user()
                social.link(user.id)

        Needs a token store that keeps identities (a SQL store). Never link by e-mail.

        :param user_id: The app's user id (an int is kept as its str).
        :param provider: With ``key``, link that stored identity instead.
        :param key: The identity's ``provider_key``.
        :raises SocialOAuth2Error: without a SQL store, or when nothing was signed in by this
            request and no identity is named.
        """
        return accounts.link(user_id, provider, key)

    def identity(self, provider: str, key: str) -> Identity | None:
        """The stored identity ``key`` of ``provider`` with the user it is linked to, or
        ``None`` when it is not stored. Needs a SQL store (see :meth:`link`)."""
        return accounts.identity_store().identity(provider, key)

    def identities(self, user_id: str | int) -> list[Identity]:
        """Every identity linked to the app's user ``user_id``, ordered by provider. Needs a
        SQL store (see :meth:`link`)."""
        return accounts.identity_store().identities(accounts.checked_user_id(user_id))

    def unlink(self, provider: str, key: str) -> None:
        """Delete the stored identity ``key`` of ``provider`` and its tokens, revoking them
        first where the provider can (RFC 7009; a failed revocation is logged and the identity
        is deleted anyway). This browser forgets it too when it had signed in with it."""
        accounts.forget(provider, key, revoke=True)

    def sign_out(self, *, revoke: bool = False) -> None:
        """Forget this browser's identities and the profile kept by the default success
        handler. Tokens kept in the session go; rows of a SQL store stay (for jobs) unless
        ``revoke``, which also revokes their tokens where the provider can and deletes the
        rows. Call it in a request."""
        accounts.sign_out(revoke=revoke)

    def id_token_nonce(self, name: str, *, next: str | None = None) -> str:
        """A nonce for the Google sign-in markup of block ``name`` (``idTokenSignIn``), issued
        to this browser in a signed cookie, single-use, good for ``SOCIAL_OAUTH2_STATE_TTL``
        seconds; ``next``: where that sign-in goes (a same-origin path). See docs/one-tap.md.

        :raises SocialOAuth2Error: for a block without ``idTokenSignIn`` (or unknown)."""
        from .web.id_token_sign_in import issue_nonce

        provider = self.provider(name)
        if not _is_oauth2(provider):
            raise SocialOAuth2Error(f"provider {name!r} does not take ID tokens from the browser")
        return issue_nonce(provider, current_runtime(), next)

    def logout_redirect(self, name: str, next: str | None = "/") -> Response:
        """Sign this browser out here (as :meth:`sign_out`) and at provider ``name``
        (RP-Initiated Logout 1.0): a redirect to its end-session endpoint with the kept ID
        token as ``id_token_hint`` (SQL store only), its ``sid`` as ``logout_hint``, a
        single-use ``state`` bound to this browser and ``post_logout_redirect_uri`` =
        ``<url rule>/logged-out``, which sends the browser on to ``next`` (a same-origin
        path, else ``/``); without an end-session endpoint, straight to ``next``.
        See :doc:`/logout`.

        :raises UnknownProviderError: when no block of that name is configured.
        """
        provider = self.provider(name)
        if not _is_oauth2(provider):
            raise TypeError(f"provider {name!r} is not an OAuth2Provider: it has no sign-out")
        return accounts.logout_redirect(provider, next)

    def next_url(self, default: str = "/") -> str:
        """Where to send the user after the sign-in this request finished: the ``next`` path
        given when it started (checked to be same-origin), else ``default``."""
        return next_url(default)

    def check_app(self, app: Flask | None = None) -> list[ConfigurationProblem]:
        """Check the specification's redirect URL rule against the app's routes now.

        :return: Every problem found; empty when each ``redirectURL`` routes to the authenticate
            endpoint for its own provider.
        """
        from .checks import redirect_url_problems

        app = app if app is not None else current_app._get_current_object()  # type: ignore[attr-defined]
        return redirect_url_problems(app)

    # -- hooks ---------------------------------------------------------------------------------

    def on_authenticated(self, handler: _H) -> _H:
        """Register the function the built-in route calls after a successful sign-in, as
        ``handler(provider, info, profile)``; its return value is the response.

        Without one, the profile's fields are kept in the session under
        ``SOCIAL_OAUTH2_SESSION_KEY`` and the user is sent to :meth:`next_url`.
        """
        self._handlers.authenticated = handler
        return handler

    def on_error(self, handler: _H) -> _H:
        """Register the function called when a sign-in fails, as
        ``handler(provider_name, error)``; its return value is the response.

        Without one, a small page with a fixed message and the error's 4xx/5xx status.
        """
        self._handlers.error = handler
        return handler


def _is_oauth2(provider: object) -> TypeGuard[OAuth2Provider]:
    from .providers.oauth2 import OAuth2Provider  # imported by init_app: a lookup in sys.modules

    return isinstance(provider, OAuth2Provider)
