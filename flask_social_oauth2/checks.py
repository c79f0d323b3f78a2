"""Checks of an app's provider configuration beyond one block: the redirect URL rule, hosts.

:meth:`SocialOAuth2.init_app <flask_social_oauth2.SocialOAuth2.init_app>` runs them as the app
is set up (and the redirect URL rule again at the first request, when every route is known),
and ``flask social check`` runs all of them through :func:`check_configuration`.
"""

from __future__ import annotations

import difflib
import importlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from flask import Flask, current_app
from werkzeug.exceptions import MethodNotAllowed, NotFound
from werkzeug.routing import RequestRedirect
from werkzeug.sansio.utils import host_is_trusted

from .config.blocks import load_settings, providers_file
from .errors import ConfigurationError, ConfigurationProblem, ProviderUnavailableError
from .oidc import tenants
from .runtime import current_runtime
from .urls import is_loopback_host

if TYPE_CHECKING:
    from .config.settings import OAuth2Settings
    from .providers.oauth2 import SocialProvider

logger = logging.getLogger("flask_social_oauth2")

#: Set on the log records of warnings that :func:`check_configuration` reports too, so that
#: ``flask social check`` can print each warning once.
REPORTED_BY_CHECK: Final = "social_oauth2_reported_by_check"

#: How alike each path segment must be to the expected one to count as a typo of it.
_TYPO_SIMILARITY: Final = 0.75


@dataclass
class CheckReport:
    """What :func:`check_configuration` found.

    :param errors: Problems that break sign-in; ``flask social check`` exits 1 for any.
    :param warnings: Risky but working settings (e.g. a relative ``redirectURL`` without
        ``TRUSTED_HOSTS``).
    :param providers: The names of the configured providers.
    """

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    providers: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether no error was found."""
        return not self.errors


def check_configuration(app: Flask, *, provider: str | None = None) -> CheckReport:
    """Check the extension's configuration of ``app`` the way ``flask social check`` does.

    Every provider block is read and validated again from the app's current configuration and
    environment (``${VAR}`` references), each provider's class checks its settings, each
    ``redirectURL`` must route to the authenticate endpoint of its own provider (the
    specification's redirect URL rule), and ``SECRET_KEY`` must be set. Relative redirect URLs
    without ``TRUSTED_HOSTS``, absolute ones whose host ``TRUSTED_HOSTS`` does not list,
    plain-http redirect URLs to other hosts than loopback and an empty configuration are
    warnings.

    :param app: An app on which ``init_app`` succeeded.
    :param provider: A name that is not configured: the block the app's provider loader gives
        for it is checked too (asked in an app context, not kept); a loader that fails, or knows
        no such name, is an error.
    :raises SocialOAuth2Error: when the extension is not set up on ``app``.
    """
    state = current_runtime(app)
    report = CheckReport(providers=list(state.providers))
    providers = dict(state.providers)
    if provider is not None and provider not in providers:
        found, failure = loaded_provider(app, provider)
        if found is None:
            report.errors.append(failure)
        else:
            providers[provider] = found
            report.providers.append(provider)

    def add(texts: list[str], problem: ConfigurationProblem | str) -> None:
        text = str(problem)
        if text not in texts:
            texts.append(text)

    try:
        load_settings(app.config, root_path=app.root_path)
    except ConfigurationError as error:
        for problem in error.problems:
            add(report.errors, problem)
    for name, selected in providers.items():
        for problem in type(selected).settings_problems(selected.settings):
            add(report.errors, ConfigurationProblem(name, problem.key, problem.message))
    for problem in redirect_url_problems(app, providers=providers):
        add(report.errors, problem)
    if not app.secret_key:
        add(
            report.errors, "SECRET_KEY is not set: the sign-in state cookie and the session need it"
        )
    for warning in configuration_warnings(app, providers):
        add(report.warnings, warning)
    empty = no_provider_warning(app, providers)
    if empty is not None:
        add(report.warnings, empty)
    return report


def loaded_provider(app: Flask, name: str) -> tuple[SocialProvider | None, str]:
    """The provider ``name`` of ``app``, configured or given by its provider loader now (in an
    app context, and not kept), or ``None`` and what went wrong."""
    state = current_runtime(app)
    if name in state.providers:
        return state.providers[name], ""
    found = None
    if state.loaded is not None:
        with app.app_context():
            state.loaded.forget(name)
            try:
                found = state.loaded.get(name)
            except ProviderUnavailableError as error:
                return None, str(error)
            finally:
                state.loaded.forget(name)
    if found is None:
        return None, f"no provider named {name!r} is configured, nor given by a provider loader"
    return found, ""


def redirect_url_problems(
    app: Flask,
    *,
    routes_complete: bool = True,
    providers: Mapping[str, SocialProvider] | None = None,
) -> list[ConfigurationProblem]:
    """Check each provider's ``redirectURL`` path against the app's routes: it must route to the
    authenticate endpoint (or a view of the app's own) for that provider's name.

    :param routes_complete: ``False`` while the app is still being set up: a view of the app's
        own registered later may serve a path that routes nowhere yet, so such a path is a
        problem only when it looks like a typo of the path the mounted rule expects
        (``/authenticat/github`` for ``/authenticate/github``).
    :param providers: The providers to check (default: the configured ones).
    """
    state = current_runtime(app)
    adapter = app.url_map.bind(app.config.get("SERVER_NAME") or "localhost")
    rule = next((r.rule for r in app.url_map.iter_rules(state.endpoint)), "?")
    problems = []
    for name, provider in (state.providers if providers is None else providers).items():
        path = urlsplit(provider.settings.redirect_url).path or "/"
        expected = adapter.build(state.endpoint, {"provider": name})
        # Routing to another provider's sign-in is wrong whatever is registered later.
        settled = False
        try:
            endpoint, arguments = adapter.match(path, method="GET")
        except RequestRedirect as moved:
            message = f"path {path!r} redirects to {moved.new_url!r}"
        except (NotFound, MethodNotAllowed):
            message = f"path {path!r} routes to no GET view"
        else:
            routed = arguments.get("provider")
            if routed is None and endpoint == state.endpoint:
                routed = name
            if routed is None or routed == name:
                continue
            message = f"path {path!r} routes to provider {routed!r}"
            settled = True
        if not (routes_complete or settled or _looks_like_a_typo(path, expected)):
            continue
        message += f"; expected {expected!r}, from the mounted rule {rule!r}"
        if not (routes_complete or settled):
            message += " (a view of the app's own for this path must be registered before init_app)"
        problems.append(ConfigurationProblem(name, "redirectURL", message))
    return problems


def check_redirect_urls_once() -> None:
    """At the first request every route is known: log each redirect URL problem once; the
    sign-in route of an affected provider then answers with the misconfiguration page."""
    state = current_runtime()
    if state.redirect_problems is None:
        problems = tuple(redirect_url_problems(current_app._get_current_object()))  # type: ignore[attr-defined]
        state.redirect_problems = problems
        for problem in problems:
            logger.error("%s", problem)


def _looks_like_a_typo(path: str, expected: str) -> bool:
    got = path.lower().strip("/").split("/")
    wanted = expected.lower().strip("/").split("/")
    return len(got) == len(wanted) and all(
        difflib.SequenceMatcher(None, a, b).ratio() >= _TYPO_SIMILARITY
        for a, b in zip(got, wanted, strict=True)
    )


def configuration_warnings(app: Flask, providers: Mapping[str, SocialProvider]) -> list[str]:
    """Risky but working settings: a relative ``redirectURL`` without ``TRUSTED_HOSTS``, an
    absolute one whose host ``TRUSTED_HOSTS`` does not list, a plain-http ``redirectURL`` to a
    host that is not loopback, a Microsoft multi-tenant block without ``allowedTenants``."""
    warnings = []
    host_warning = untrusted_host_warning(app, providers)
    if host_warning is not None:
        warnings.append(host_warning)
    warnings.extend(any_tenant_warnings(providers))
    for name, provider in providers.items():
        url = provider.settings.redirect_url
        if url.startswith("/"):
            continue
        parts = urlsplit(url)
        if parts.scheme.lower() == "http" and not is_loopback_host(parts.hostname or ""):
            warnings.append(
                f"provider {name!r}, key 'redirectURL': plain http to a host that is not"
                " loopback; the authorization code would travel unencrypted, use https"
            )
    return warnings


def any_tenant_warnings(providers: Mapping[str, SocialProvider]) -> list[str]:
    """A warning for each ``microsoft``/``azure`` block (or block whose issuer is on
    ``login.microsoftonline.com``) on the multi-tenant ``common``, ``organizations`` or
    ``consumers`` endpoints without ``customProperties.allowedTenants``: the users of any
    organisation can sign in. Read from the blocks alone; nothing is fetched."""
    from .providers.base import BuiltinProvider  # imported by init_app already
    from .providers.oauth2 import OAuth2Provider

    warnings = []
    for name, provider in providers.items():
        if not isinstance(provider, OAuth2Provider):
            continue
        settings, issuer = provider.settings, provider.issuer
        if isinstance(provider, BuiltinProvider) and provider.facts.name in tenants.MICROSOFT_NAMES:
            address = issuer if isinstance(issuer, str) else settings.access_token_url
        elif isinstance(issuer, str) and urlsplit(issuer).hostname == tenants.MICROSOFT_HOST:
            address = issuer
        else:
            continue
        segment = tenants.multi_tenant_segment(address)
        if segment is None or provider.options.allowed_tenants is not None:
            continue
        needs = "" if isinstance(issuer, str) else " (with 'openid' in the scope)"
        warnings.append(
            f"provider {name!r}: the users of any Microsoft Entra tenant can sign in (the"
            f" multi-tenant endpoint {segment!r}); set customProperties."
            f"{tenants.ALLOWED_TENANTS_KEY}{needs} to the tenant ids that may sign in, or to"
            " '*' for any tenant"
        )
    return warnings


def untrusted_host_warning(app: Flask, providers: Mapping[str, SocialProvider]) -> str | None:
    """The warning about ``TRUSTED_HOSTS`` and the providers' ``redirectURL`` hosts, or ``None``.

    Without ``TRUSTED_HOSTS``: providers with a relative ``redirectURL`` (``SERVER_NAME`` does
    not restrict the accepted hosts since Flask 3.1). With it: providers whose absolute
    ``redirectURL`` names a host it does not list, where the app would answer the provider's
    redirect with a 400.
    """
    trusted = app.config.get("TRUSTED_HOSTS")
    if trusted:
        return _untrusted_redirect_hosts(
            providers, [trusted] if isinstance(trusted, str) else list(trusted)
        )
    relative = sorted(n for n, p in providers.items() if p.settings.redirect_url.startswith("/"))
    if not relative:
        return None
    names = ", ".join(map(repr, relative))
    who = f"provider {names} has" if len(relative) == 1 else f"providers {names} have"
    return (
        f"{who} a relative redirectURL, resolved against the request's Host"
        " header, but TRUSTED_HOSTS is not set: a forged Host header would change"
        " the redirect_uri. Set TRUSTED_HOSTS to the app's host names (SERVER_NAME does not"
        " restrict the accepted hosts since Flask 3.1)."
    )


def _untrusted_redirect_hosts(
    providers: Mapping[str, SocialProvider], trusted: list[str]
) -> str | None:
    hosts = {
        name: urlsplit(provider.settings.redirect_url).netloc.lower()
        for name, provider in sorted(providers.items())
        if not provider.settings.redirect_url.startswith("/")
    }
    outside = {name: host for name, host in hosts.items() if not host_is_trusted(host, trusted)}
    if not outside:
        return None
    listed = ", ".join(map(repr, trusted))
    if len(outside) == 1:
        ((name, host),) = outside.items()
        what = f"provider {name!r}'s redirectURL names the host {host!r}, which"
    else:
        each = ", ".join(f"{name!r} ({host!r})" for name, host in outside.items())
        what = f"the redirectURLs of providers {each} name hosts that"
    return (
        f"{what} TRUSTED_HOSTS ({listed}) does not list: the app would answer the provider's"
        " redirect there with a 400. Add the host to TRUSTED_HOSTS, and open the app at that"
        " address, since a sign-in's cookie stays with the address it started on."
    )


def no_provider_warning(app: Flask, providers: Mapping[str, SocialProvider]) -> str | None:
    """The warning for an app without any provider, saying where none was found, or ``None``
    when a provider is configured."""
    if providers:
        return None
    try:
        path = providers_file(app.config, app.root_path)
    except ConfigurationError:
        path = None
    if path is not None:
        return f"no provider is configured: the providers file {str(path)!r} has no block"
    return "no provider is configured: set SOCIAL_OAUTH2_PROVIDERS or SOCIAL_OAUTH2_PROVIDERS_FILE"


def provider_class(
    name: str, choice: Any, problems: list[ConfigurationProblem], *, setting: str, imports: bool
) -> type[SocialProvider] | None:
    """The class that serves the block ``name``: ``choice`` is ``None`` (the built-in provider
    of that name, else the generic one), a built-in provider's name, a ``"module:Class"`` path
    (only where ``imports``: never for a block that comes from a database) or a
    :class:`SocialProvider` subclass. A bad choice adds a problem naming ``setting``."""
    from .providers import BUILTIN_PROVIDERS
    from .providers.oauth2 import OAuth2Provider, SocialProvider

    if choice is None:
        return BUILTIN_PROVIDERS.get(name, OAuth2Provider)
    if isinstance(choice, str):
        if choice in BUILTIN_PROVIDERS:
            return BUILTIN_PROVIDERS[choice]
        if imports and ":" in choice:
            module_name, _, attribute = choice.partition(":")
            try:
                choice = getattr(importlib.import_module(module_name), attribute)
            except (ImportError, AttributeError) as error:
                problems.append(
                    ConfigurationProblem(
                        name, None, f"{setting}: cannot import {choice!r}: {error}"
                    )
                )
                return None
        else:
            known = ", ".join(sorted(BUILTIN_PROVIDERS)) or "none"
            path = " nor a 'module:Class' path" if imports else ""
            problems.append(
                ConfigurationProblem(
                    name,
                    None,
                    f"{setting}: {choice!r} is not a built-in provider (built-in: {known}){path}",
                )
            )
            return None
    if not (isinstance(choice, type) and issubclass(choice, SocialProvider)):
        problems.append(
            ConfigurationProblem(name, None, f"{setting}: must name a SocialProvider subclass")
        )
        return None
    return choice


def built_provider(
    app: Flask, name: str, block: Mapping[str, Any] | OAuth2Settings, kind: Any = None
) -> SocialProvider:
    """What :meth:`SocialOAuth2.build_provider
    <flask_social_oauth2.SocialOAuth2.build_provider>` returns: the provider ``name`` of
    ``block``, validated as ``init_app`` validates a configured block, ``${VAR}`` left as it is
    (a customer's block must not read the app's environment).

    :raises ConfigurationError: listing every problem.
    """
    from .config.settings import OAuth2Settings
    from .providers.oauth2 import OAuth2Provider
    from .web.loaded_providers import LOADABLE_NAME

    state = current_runtime(app)
    problems: list[ConfigurationProblem] = []
    shown = str(name)
    if not isinstance(name, str) or not LOADABLE_NAME.match(name):
        problems.append(
            ConfigurationProblem(
                shown[:80],
                None,
                "a loaded provider's name must be 1 to 63 lower-case letters, digits, '_', '.'"
                " or '-', starting with a letter or digit, without '..'",
            )
        )
    elif name in state.providers:
        problems.append(
            ConfigurationProblem(
                name, None, "is a configured provider: a loaded provider cannot take its name"
            )
        )
    cls = provider_class(shown, kind, problems, setting="kind", imports=False)
    settings = None
    if isinstance(block, OAuth2Settings):
        settings = block
    else:
        try:
            settings = OAuth2Settings.from_config(block, provider=shown)
        except ConfigurationError as error:
            problems.extend(error.problems)
    provider = None
    if settings is not None:
        for problem in cls.settings_problems(settings) if cls is not None else ():
            problems.append(ConfigurationProblem(shown, problem.key, problem.message))
        provider = (cls or OAuth2Provider)(shown, settings)
        if state.check_redirect_urls:
            problems.extend(redirect_url_problems(app, providers={shown: provider}))
    if problems or provider is None:
        raise ConfigurationError(problems)
    return provider
