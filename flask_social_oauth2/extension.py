"""The Flask extension: configuration, the provider registry, the authenticate route, hooks."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final, TypeVar

from flask import (
    Blueprint,
    Flask,
    Response,
    abort,
    current_app,
    has_request_context,
    jsonify,
    make_response,
    request,
    session,
)
from flask.typing import ResponseReturnValue
from markupsafe import escape

from . import sign_in, signals
from .api import ProviderSession
from .app_state import EXTENSION_KEY, AppState, get_app_state
from .callback import finished_flow, read_posted_code
from .checks import REPORTED_BY_CHECK, redirect_url_problems, untrusted_host_warning
from .config import load_settings
from .errors import (
    AuthenticationError,
    ConfigurationError,
    ConfigurationProblem,
    InvalidCallbackError,
    SignInRequiredError,
    SocialOAuth2Error,
    UnknownProviderError,
)
from .provider import OAuth2Provider, SocialProvider
from .providers import BUILTIN_PROVIDERS
from .runtime import Runtime
from .settings import OAuth2Info, SocialProfile
from .state_cookie import FLOW_PAGE_HEADERS, StateCookieStore, app_scope
from .tokens.cipher import token_key_problems
from .tokens.setting import token_store_from_setting

logger = logging.getLogger("flask_social_oauth2")

ENDPOINT: Final = "social_oauth2.authenticate"
#: The session key of this browser's signed-in identities: provider name -> provider_key.
SIGNED_IN_KEY: Final = "social_oauth2_identities"

AuthenticatedHandler = Callable[[SocialProvider, OAuth2Info, SocialProfile], ResponseReturnValue]
ErrorHandler = Callable[[str, AuthenticationError], ResponseReturnValue]
_H = TypeVar("_H", bound=Callable[..., Any])

_DEFAULTS: Final[Mapping[str, Any]] = MappingProxyType(
    {
        "SOCIAL_OAUTH2_PROVIDERS": {},
        "SOCIAL_OAUTH2_PROVIDERS_FILE": None,
        "SOCIAL_OAUTH2_PROVIDER_CLASSES": {},
        "SOCIAL_OAUTH2_URL_RULE": "/authenticate/<provider>",
        "SOCIAL_OAUTH2_TIMEOUT": 10,
        "SOCIAL_OAUTH2_STATE_TTL": 600,
        "SOCIAL_OAUTH2_MAX_RESPONSE_BYTES": 1024 * 1024,
        "SOCIAL_OAUTH2_STATE_COOKIE": None,
        "SOCIAL_OAUTH2_STATE_COOKIE_PATH": "/",
        "SOCIAL_OAUTH2_SESSION_KEY": "social_profile",
        "SOCIAL_OAUTH2_CHECK_REDIRECT_URLS": True,
        "SOCIAL_OAUTH2_DISCOVERY_FAILURE_TTL": 30,
        "SOCIAL_OAUTH2_TOKEN_STORE": "session",
        "SOCIAL_OAUTH2_TOKEN_KEYS": None,
        "SOCIAL_OAUTH2_REFRESH_LEEWAY": 30,
    }
)
_ERROR_PAGE: Final = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign-in failed</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:4rem auto;
padding:0 1rem;color:#222}}h1{{font-size:1.4rem}}a{{color:#0b57d0}}</style></head>
<body><h1>Sign-in failed</h1><p>{message}</p>
<p><a href="/">Back to the start page</a></p></body></html>
"""
_ERROR_PAGE_POLICY: Final = (
    "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
)


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
        self._on_authenticated: AuthenticatedHandler | None = None
        self._on_error: ErrorHandler | None = None
        if app is not None:
            self.init_app(app)

    # -- setup ---------------------------------------------------------------------------------

    def init_app(self, app: Flask) -> None:
        """Read and validate the app's provider configuration and mount the route.

        :raises ConfigurationError: listing every problem of every block.
        :raises SocialOAuth2Error: when the extension is already set up on ``app``.
        """
        if EXTENSION_KEY in app.extensions:
            raise SocialOAuth2Error(
                f"flask-social-oauth2 is already set up on app {app.name!r}; call init_app once"
            )
        config = app.config
        for key, value in _DEFAULTS.items():
            config.setdefault(key, value)
        options = _read_options(config)
        settings = load_settings(config, root_path=app.root_path)
        providers: dict[str, SocialProvider] = {}
        problems: list[ConfigurationProblem] = []
        for name, record in settings.items():
            provider_class = self._provider_class(
                name, config["SOCIAL_OAUTH2_PROVIDER_CLASSES"], problems
            )
            if provider_class is None:
                continue
            for problem in provider_class.settings_problems(record):
                problems.append(ConfigurationProblem(name, problem.key, problem.message))
            providers[name] = provider_class(name, record)
        if problems:
            raise ConfigurationError(problems)
        rule = options["rule"]
        blueprint = Blueprint("social_oauth2", __name__)
        blueprint.add_url_rule(
            rule, "authenticate", self._authenticate_view, methods=["GET", "POST"]
        )
        app.register_blueprint(blueprint)
        scope = app_scope(app.import_name, rule)
        runtime = Runtime(
            state_cookies=StateCookieStore(
                name=config["SOCIAL_OAUTH2_STATE_COOKIE"] or f"social_oauth2_state_{scope}",
                path=config["SOCIAL_OAUTH2_STATE_COOKIE_PATH"],
                ttl=options["state_ttl"],
                scope=scope,
            ),
            timeout=options["timeout"],
            max_response_bytes=options["max_bytes"],
            discovery_failure_ttl=options["discovery_failure_ttl"],
            token_store=options["token_store"],
        )
        app.extensions[EXTENSION_KEY] = AppState(
            extension=self,
            providers=MappingProxyType(providers),
            endpoint=ENDPOINT,
            session_key=config["SOCIAL_OAUTH2_SESSION_KEY"],
            runtime=runtime,
        )
        if config["SOCIAL_OAUTH2_CHECK_REDIRECT_URLS"]:
            early_problems = redirect_url_problems(app, routes_complete=False)
            if early_problems:
                del app.extensions[EXTENSION_KEY]
                raise ConfigurationError(early_problems)
            app.before_request(_check_redirect_urls_once)
        app.register_error_handler(AuthenticationError, self._handle_authentication_error)
        warning = untrusted_host_warning(app, providers)
        if warning is not None:
            logger.warning("%s", warning, extra={REPORTED_BY_CHECK: True})

    def _provider_class(
        self, name: str, configured: Mapping[str, Any], problems: list[ConfigurationProblem]
    ) -> type[SocialProvider] | None:
        choice: Any = configured.get(name, self._provider_classes.get(name))
        if choice is None:
            return BUILTIN_PROVIDERS.get(name, OAuth2Provider)
        if isinstance(choice, str):
            if choice in BUILTIN_PROVIDERS:
                return BUILTIN_PROVIDERS[choice]
            if ":" in choice:
                module_name, _, attribute = choice.partition(":")
                try:
                    choice = getattr(importlib.import_module(module_name), attribute)
                except (ImportError, AttributeError) as error:
                    problems.append(
                        ConfigurationProblem(
                            name,
                            None,
                            f"SOCIAL_OAUTH2_PROVIDER_CLASSES: cannot import {choice!r}: {error}",
                        )
                    )
                    return None
            else:
                known = ", ".join(sorted(BUILTIN_PROVIDERS)) or "none"
                problems.append(
                    ConfigurationProblem(
                        name,
                        None,
                        f"SOCIAL_OAUTH2_PROVIDER_CLASSES: {choice!r} is not a built-in provider"
                        f" (built-in: {known}) nor a 'module:Class' path",
                    )
                )
                return None
        if not (isinstance(choice, type) and issubclass(choice, SocialProvider)):
            problems.append(
                ConfigurationProblem(
                    name,
                    None,
                    "SOCIAL_OAUTH2_PROVIDER_CLASSES: must name a SocialProvider subclass",
                )
            )
            return None
        return choice

    # -- registry ------------------------------------------------------------------------------

    def provider(self, name: str) -> SocialProvider:
        """The configured provider ``name`` of the current app.

        :raises UnknownProviderError: when no block of that name is configured.
        """
        providers = get_app_state().providers
        try:
            return providers[name]
        except (KeyError, TypeError):
            raise UnknownProviderError(str(name), list(providers)) from None

    @property
    def providers(self) -> Mapping[str, SocialProvider]:
        """The current app's providers, by name (read-only)."""
        return get_app_state().providers

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
        if not isinstance(provider, OAuth2Provider):
            raise TypeError(f"provider {name!r} is not an OAuth2Provider and has no API session")
        if key is None:
            if not has_request_context():
                raise RuntimeError("social.api(name) outside a request needs key=provider_key")
            signed_in = session.get(SIGNED_IN_KEY)
            key = signed_in.get(name) if isinstance(signed_in, dict) else None
            if not isinstance(key, str):
                raise SignInRequiredError(name, "this browser has not signed in with it")
        return ProviderSession(provider, key, get_app_state().runtime.token_store)

    def next_url(self, default: str = "/") -> str:
        """Where to send the user after the sign-in this request finished: the ``next`` path
        given when it started (checked to be same-origin), else ``default``."""
        pending = finished_flow()
        return pending.next_url if pending is not None and pending.next_url else default

    def check_app(self, app: Flask | None = None) -> list[ConfigurationProblem]:
        """Check the specification's redirect URL rule against the app's routes now.

        :return: Every problem found; empty when each ``redirectURL`` routes to the authenticate
            endpoint for its own provider.
        """
        app = app if app is not None else current_app._get_current_object()  # type: ignore[attr-defined]
        return redirect_url_problems(app)

    # -- hooks ---------------------------------------------------------------------------------

    def on_authenticated(self, handler: _H) -> _H:
        """Register the function the built-in route calls after a successful sign-in, as
        ``handler(provider, info, profile)``; its return value is the response.

        Without one, the profile's fields are kept in the session under
        ``SOCIAL_OAUTH2_SESSION_KEY`` and the user is sent to :meth:`next_url`.
        """
        self._on_authenticated = handler
        return handler

    def on_error(self, handler: _H) -> _H:
        """Register the function called when a sign-in fails, as
        ``handler(provider_name, error)``; its return value is the response.

        Without one, a small page with a fixed message and the error's 4xx/5xx status.
        """
        self._on_error = handler
        return handler

    # -- the route ---------------------------------------------------------------------------

    def _authenticate_view(self, provider: str) -> ResponseReturnValue:
        state = get_app_state()
        selected = state.providers.get(provider)
        if selected is None:
            abort(404)
        if state.redirect_problems:
            problems = [p for p in state.redirect_problems if p.provider == selected.name]
            if problems:
                return _misconfigured_page(problems)
        if not current_app.secret_key:
            missing = ConfigurationProblem(
                None, "SECRET_KEY", "is not set: the state cookie needs it"
            )
            logger.error("%s", missing)
            return _misconfigured_page([missing])
        posted_json = request.method == "POST" and not _has_form_post_callback(selected)
        try:
            if posted_json:
                info = _exchange_posted_code(selected)
            else:
                result = selected.authenticate()
                if isinstance(result, Response):
                    return result
                info = result
            profile = selected.retrieve_profile(info)
        except AuthenticationError as error:
            return self._respond_to_error(selected.name, error)
        return self._respond_to_success(selected, info, profile, answer_json=posted_json)

    def _handle_authentication_error(self, error: AuthenticationError) -> ResponseReturnValue:
        return self._respond_to_error(error.provider, error)

    def _respond_to_error(self, provider_name: str, error: AuthenticationError) -> Response:
        app = current_app._get_current_object()  # type: ignore[attr-defined]
        logger.warning("sign-in failed: %s", error)
        signals.authentication_failed.send(app, provider_name=provider_name, error=error)
        if self._on_error is not None:
            response = make_response(self._on_error(provider_name, error))
        else:
            page = _ERROR_PAGE.format(message=escape(error.public_message))
            response = make_response(page, error.status_code)
            response.headers["Content-Security-Policy"] = _ERROR_PAGE_POLICY
        for header, value in FLOW_PAGE_HEADERS.items():
            response.headers.setdefault(header, value)
        return response

    def _respond_to_success(
        self,
        provider: SocialProvider,
        info: OAuth2Info,
        profile: SocialProfile,
        *,
        answer_json: bool,
    ) -> Response:
        app = current_app._get_current_object()  # type: ignore[attr-defined]
        try:
            _keep_tokens(provider.name, profile.provider_key, info)
        except AuthenticationError as error:
            return self._respond_to_error(provider.name, error)
        signals.authenticated.send(app, provider=provider, info=info, profile=profile)
        if self._on_authenticated is not None:
            response = make_response(self._on_authenticated(provider, info, profile))
        else:
            session[get_app_state().session_key] = profile.to_dict()
            target = self.next_url()
            if answer_json:  # a client-side framework's POST; a form-post callback ends as a GET
                response = jsonify(signed_in=True, provider=provider.name, next=target)
            else:
                response = current_app.response_class(status=302)
                response.headers["Location"] = target
        for header, value in FLOW_PAGE_HEADERS.items():
            response.headers.setdefault(header, value)
        return response


def _read_options(config: Mapping[str, Any]) -> dict[str, Any]:
    problems = []

    def number(key: str, kind: type, minimum: float) -> Any:
        value = config[key]
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not minimum <= value < 2**53  # also refuses NaN, infinity and 10**400
        ):
            what = "a whole number" if kind is int else "a number"
            problems.append(
                ConfigurationProblem(None, key, f"must be {what} >= {minimum}, not {value!r}")
            )
            return None
        return kind(value)

    options = {
        "timeout": number("SOCIAL_OAUTH2_TIMEOUT", float, 0.1),
        "state_ttl": number("SOCIAL_OAUTH2_STATE_TTL", int, 10),
        "max_bytes": number("SOCIAL_OAUTH2_MAX_RESPONSE_BYTES", int, 1024),
        "discovery_failure_ttl": number("SOCIAL_OAUTH2_DISCOVERY_FAILURE_TTL", float, 0),
        "rule": config["SOCIAL_OAUTH2_URL_RULE"],
    }
    number("SOCIAL_OAUTH2_REFRESH_LEEWAY", float, 0)
    try:
        options["token_store"] = token_store_from_setting(config["SOCIAL_OAUTH2_TOKEN_STORE"])
    except ConfigurationError as error:
        problems.extend(error.problems)
    if config["SOCIAL_OAUTH2_TOKEN_KEYS"] is not None:
        problems.extend(token_key_problems(config))
    rule = options["rule"]
    if not isinstance(rule, str) or not rule.startswith("/") or "<provider>" not in rule:
        problems.append(
            ConfigurationProblem(
                None, "SOCIAL_OAUTH2_URL_RULE", "must be a path containing '<provider>'"
            )
        )
    cookie = config["SOCIAL_OAUTH2_STATE_COOKIE"]
    if cookie is not None and (not isinstance(cookie, str) or not cookie):
        problems.append(
            ConfigurationProblem(
                None, "SOCIAL_OAUTH2_STATE_COOKIE", "must be a non-empty string (or None)"
            )
        )
    for key in (
        "SOCIAL_OAUTH2_STATE_COOKIE_PATH",
        "SOCIAL_OAUTH2_SESSION_KEY",
    ):
        if not isinstance(config[key], str) or not config[key]:
            problems.append(ConfigurationProblem(None, key, "must be a non-empty string"))
    if not isinstance(config["SOCIAL_OAUTH2_PROVIDER_CLASSES"], Mapping):
        problems.append(
            ConfigurationProblem(
                None, "SOCIAL_OAUTH2_PROVIDER_CLASSES", "must map provider names to classes"
            )
        )
    if problems:
        raise ConfigurationError(problems)
    return options


def _keep_tokens(provider: str, key: str, info: OAuth2Info) -> None:
    """Save the token of the identity just signed in into the app's token store, and remember
    in the session which identity this browser signed in with for ``provider``."""
    store = get_app_state().runtime.token_store
    if store is None:
        return
    store.save(provider, key, info)
    signed_in = session.get(SIGNED_IN_KEY)
    signed_in = dict(signed_in) if isinstance(signed_in, dict) else {}
    signed_in[provider] = key
    session[SIGNED_IN_KEY] = signed_in


def _has_form_post_callback(provider: SocialProvider) -> bool:
    """Whether ``provider``'s callback is a form ``POST`` (``response_mode=form_post``, e.g.
    Apple), read by its own :meth:`~SocialProvider.authenticate`."""
    return isinstance(provider, OAuth2Provider) and provider.form_post_callback


def _exchange_posted_code(provider: SocialProvider) -> OAuth2Info:
    """``POST /authenticate/<provider>`` with ``{"code": "...", "code_verifier": "..."}`` from a
    client-side framework (see :func:`~flask_social_oauth2.callback.read_posted_code`);
    accepted only for providers without ``authorizationURL``, whose flow the browser ran."""
    if not isinstance(provider, OAuth2Provider) or provider.settings.authorization_url is not None:
        raise InvalidCallbackError(
            provider.name,
            "POST is only for providers used with a client-side framework (no authorizationURL)",
            status_code=405,
        )
    code, verifier = read_posted_code(provider.name)
    return sign_in.finish_posted_code(provider, code, verifier)


def _check_redirect_urls_once() -> None:
    """At the first request every route is known: log each redirect URL problem once; the
    sign-in route of an affected provider then answers with :func:`_misconfigured_page`."""
    state = get_app_state()
    if state.redirect_problems is None:
        problems = tuple(redirect_url_problems(current_app._get_current_object()))  # type: ignore[attr-defined]
        state.redirect_problems = problems
        for problem in problems:
            logger.error("%s", problem)


def _misconfigured_page(problems: list[ConfigurationProblem]) -> Response:
    """The 503 page of a sign-in route whose provider is misconfigured: the problem itself in
    debug mode, a fixed sentence otherwise (the log names the problem)."""
    if current_app.debug:
        message = "This provider is misconfigured: " + "; ".join(map(str, problems))
    else:
        message = (
            "Sign-in with this provider is not available: its configuration has an error,"
            " which the server's log names."
        )
    page = _ERROR_PAGE.format(message=escape(message))
    response = make_response(page, 503)
    response.headers["Content-Security-Policy"] = _ERROR_PAGE_POLICY
    for header, value in FLOW_PAGE_HEADERS.items():
        response.headers.setdefault(header, value)
    return response
