"""The ``flask social`` command group: ``check``, ``providers`` and ``init``.

The group is published as a ``flask.commands`` entry point, which Flask loads before the app,
and only there (``init_app`` does not add it to ``app.cli``): so an app whose provider
configuration fails in ``init_app`` still reaches ``flask social check``, which loads the app
itself and reports a :class:`~flask_social_oauth2.errors.ConfigurationError` as a list of
problems, not a traceback. In tests, invoke the group itself:
``app.test_cli_runner().invoke(social_cli, ["check"])``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, NoReturn
from urllib.parse import urlsplit

import click
from flask import Flask, current_app
from flask.cli import AppGroup, ScriptInfo

from . import client_auth
from .app_state import get_app_state
from .checks import REPORTED_BY_CHECK, CheckReport, check_configuration, no_provider_warning
from .errors import ConfigurationError, SocialOAuth2Error
from .provider import OAuth2Provider, SocialProvider
from .providers.docs import init_blocks
from .settings import MASK, masked
from .urls import is_loopback_host

__all__ = ["CheckReport", "check_configuration", "social_cli"]

social_cli = AppGroup("social", help="Check and list the OAuth2 sign-in providers.")


def _counted(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


# -- loading the app -------------------------------------------------------------------------


def _fail(message: str, code: int = 1) -> NoReturn:
    click.echo(message, err=True)
    raise click.exceptions.Exit(code)


def _load_app() -> Flask:
    """The app the command runs for: the current one, else the one Flask's ``--app`` names.

    A configuration that fails in ``init_app`` ends the command with the list of problems and
    exit status 1.
    """
    if current_app:
        app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]
        return app
    info = click.get_current_context().ensure_object(ScriptInfo)
    try:
        with _without_warnings_the_check_reports():
            return info.load_app()
    except ConfigurationError as error:
        for problem in error.problems:
            click.echo(f"error: {problem}", err=True)
        _fail(
            f"{_counted(len(error.problems), 'problem')}: the app failed to start"
            " (SocialOAuth2.init_app refused its provider configuration)"
        )
    except SocialOAuth2Error as error:
        _fail(f"error: {error}")


@contextmanager
def _without_warnings_the_check_reports() -> Iterator[None]:
    """``init_app`` logs some warnings that ``check`` prints itself: print them once."""
    logger = logging.getLogger("flask_social_oauth2")

    def keep(record: logging.LogRecord) -> bool:
        return not getattr(record, REPORTED_BY_CHECK, False)

    logger.addFilter(keep)
    try:
        yield
    finally:
        logger.removeFilter(keep)


def _state_providers(app: Flask) -> Mapping[str, SocialProvider]:
    try:
        return get_app_state(app).providers
    except SocialOAuth2Error as error:
        _fail(f"error: {error}")


# -- commands --------------------------------------------------------------------------------


@social_cli.command("check", with_appcontext=False)
@click.option("--strict", is_flag=True, help="Exit 1 on warnings too.")
def check_command(strict: bool) -> None:
    """Validate every provider block and the redirect URL rule; list every problem.

    Exits 1 when there is any error (or, with --strict, any warning).
    """
    app = _load_app()
    _state_providers(app)
    report = check_configuration(app)
    for text in report.errors:
        click.echo(f"error: {text}", err=True)
    for text in report.warnings:
        click.echo(f"warning: {text}", err=True)
    summary = _counted(len(report.providers), "provider")
    if report.providers:
        summary += f" ({', '.join(report.providers)})"
    errors, warnings = (
        _counted(len(report.errors), "error"),
        _counted(len(report.warnings), "warning"),
    )
    if report.errors or (strict and report.warnings):
        _fail(f"failed: {errors}, {warnings} in {summary}")
    note = f", {warnings}" if report.warnings else ""
    click.echo(f"ok: {summary}{note}")


@social_cli.command("providers", with_appcontext=False)
@click.option(
    "--host",
    metavar="HOST[:PORT]",
    help="Where the app is served, to resolve relative redirect URLs"
    " (default: SERVER_NAME, else the first TRUSTED_HOSTS entry).",
)
def providers_command(host: str | None) -> None:
    """List each provider: its class, profile address and the exact redirect URL to register
    at the provider. Secrets are masked."""
    app = _load_app()
    providers = _state_providers(app)
    empty = no_provider_warning(app, providers)
    if empty is not None:
        click.echo(empty)
        return
    for index, provider in enumerate(providers.values()):
        if index:
            click.echo()
        for line in describe_provider(app, provider, host=host):
            click.echo(line)


@social_cli.command("keys", with_appcontext=False)
@click.argument("provider", required=False)
def keys_command(provider: str | None) -> None:
    """Print the public JWK set to register at the provider(s) whose blocks sign their client
    authentication with a private key (``private_key_jwt``): one ``{"keys": [...]}``, never a
    private member. The extension also serves each block's set at ``<url rule>/jwks.json``."""
    app = _load_app()
    providers = _state_providers(app)
    if provider is not None and provider not in providers:
        _fail(f"no provider named {provider!r} is configured", 2)
    chosen = [providers[provider]] if provider is not None else list(providers.values())
    keys: list[dict[str, Any]] = []
    for selected in chosen:
        found = client_auth.public_jwks(selected.settings)
        if found is not None:
            keys.extend(found["keys"])
    if not keys:
        target = f"provider {provider!r}" if provider else "no provider"
        _fail(
            f"{target} signs with a private key (customProperties.tokenEndpointAuthMethod:"
            " private_key_jwt)"
        )
    click.echo(json.dumps({"keys": keys}, indent=2))


def describe_provider(
    app: Flask, provider: SocialProvider, *, host: str | None = None
) -> list[str]:
    """The lines ``flask social providers`` prints for ``provider``; secrets masked.

    :param host: ``HOST[:PORT]`` the app is served at, for a relative ``redirectURL``.
    """
    settings = provider.settings
    cls = type(provider)
    if isinstance(provider, OAuth2Provider):
        profile = provider.profile_url or "(none: apiURL is required)"
    else:
        profile = "(chosen by the provider class)"
    rows = [
        ("class", f"{cls.__module__}.{cls.__qualname__}"),
        ("authorization", settings.authorization_url or "(none: client-side flow)"),
        ("token", settings.access_token_url),
        ("profile", profile),
        ("redirect URL", registered_redirect_url(app, settings.redirect_url, host=host)),
        ("client ID", settings.client_id),
        ("client secret", MASK),
        ("scope", settings.scope or "(none)"),
    ]
    for key, value in settings.custom_properties.items():
        rows.append((f"custom {key}", masked(key, value)))
    return [provider.name] + [f"  {label + ':':15} {value}" for label, value in rows]


def registered_redirect_url(app: Flask, redirect_url: str, *, host: str | None = None) -> str:
    """The redirect URL to register at the provider for ``redirect_url``.

    An absolute URL is itself. A path is resolved like a request would resolve it: against
    ``host``, else ``SERVER_NAME``, else the first ``TRUSTED_HOSTS`` entry, with
    ``PREFERRED_URL_SCHEME``; without any of them the result says that it depends on the
    request's host.
    """
    if not redirect_url.startswith("/"):
        return redirect_url
    scheme = app.config.get("PREFERRED_URL_SCHEME") or "http"
    if not host:
        host = app.config.get("SERVER_NAME") or None
    if not host:
        trusted = app.config.get("TRUSTED_HOSTS") or ()
        host = next((entry.lstrip(".") for entry in trusted if entry.lstrip(".")), None)
    if not host:
        return (
            f"{scheme}://<request host>{redirect_url} (depends on the request's host: set"
            " TRUSTED_HOSTS or SERVER_NAME, or pass --host)"
        )
    url = f"{scheme}://{host}{redirect_url}"
    parts = urlsplit(f"//{host}")
    hostname = parts.hostname or host
    try:
        has_port = parts.port is not None
    except ValueError:
        has_port = False
    if scheme == "http" and not is_loopback_host(hostname):
        url += " (served over https? set PREFERRED_URL_SCHEME = 'https')"
    elif is_loopback_host(hostname) and not has_port:
        url += " (add the port the app listens on, or pass --host HOST:PORT)"
    return url


def provider_blocks() -> dict[str, str]:
    """Built-in provider name -> a ready YAML block for it, as ``flask social init`` prints
    (generated from the providers' facts)."""
    return init_blocks()


@social_cli.command("init", with_appcontext=False)
@click.argument("name")
def init_command(name: str) -> None:
    """Print a ready YAML block for the built-in provider NAME (e.g. github), to add to the
    providers file. See docs/providers.md for each provider's registration steps."""
    blocks = provider_blocks()
    block = blocks.get(name.strip().lower())
    if block is None:
        raise click.BadParameter(
            f"{name!r} is not a built-in provider; known: {', '.join(sorted(blocks))}",
            param_hint="NAME",
        )
    click.echo(block)
