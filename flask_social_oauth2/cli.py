"""The ``flask social`` command group: ``check``, ``providers``, ``keys``, ``init`` and
``discover``.

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
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final, NoReturn
from urllib.parse import urlsplit

import click
from flask import Flask, current_app
from flask.cli import AppGroup, ScriptInfo

from .checks import (
    REPORTED_BY_CHECK,
    CheckReport,
    check_configuration,
    loaded_provider,
    no_provider_warning,
)
from .config.settings import MASK, closest_name, masked
from .errors import ConfigurationError, SocialOAuth2Error
from .oauth import client_auth
from .oidc import discovery, tenants
from .oidc.issuer_settings import DEFAULT_SCOPE, settings_from_issuer, source_name
from .providers.client import document_source
from .providers.docs import env_name, init_blocks, yaml_scalar
from .providers.oauth2 import OAuth2Provider, SocialProvider
from .runtime import current_runtime
from .urls import is_loopback_host

__all__ = ["CheckReport", "check_configuration", "social_cli"]

social_cli = AppGroup("social", help="Check and list the OAuth2 sign-in providers.")

#: The port ``flask run`` serves on unless ``--port`` or ``FLASK_RUN_PORT`` names another.
FLASK_RUN_DEFAULT_PORT: Final = 5000
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
#: The shape of a block name ``flask social discover`` prints.
_BLOCK_NAME: Final = re.compile(r"[a-z0-9][a-z0-9_.-]{0,62}")


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
        return current_runtime(app).providers
    except SocialOAuth2Error as error:
        _fail(f"error: {error}")


# -- commands --------------------------------------------------------------------------------


_PROVIDER_OPTION: Final = click.option(
    "--provider",
    "name",
    metavar="NAME",
    help="Also a provider the app's provider loader gives for NAME (e.g. a customer's).",
)


@social_cli.command("check", with_appcontext=False)
@click.option("--strict", is_flag=True, help="Exit 1 on warnings too.")
@_PROVIDER_OPTION
def check_command(strict: bool, name: str | None) -> None:
    """Validate every provider block and the redirect URL rule; list every problem.

    Exits 1 when there is any error (or, with --strict, any warning).
    """
    app = _load_app()
    _state_providers(app)
    report = check_configuration(app, provider=name)
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


def _served_at(context: click.Context, parameter: click.Parameter, value: str | None) -> str | None:
    """Check ``--host``: ``[http://|https://]HOST[:PORT]``, nothing else."""
    del context, parameter
    if value is None:
        return None
    scheme, separator, rest = value.rpartition("://")
    if separator and scheme.lower() not in ("http", "https"):
        raise click.BadParameter(f"{value!r}: the scheme must be http or https")
    try:
        hostname = _split_host(rest)[0]
    except ValueError:
        hostname = ""
    if not hostname or not rest.isprintable() or any(mark in rest for mark in " /?#@"):
        raise click.BadParameter(f"{value!r} is not [http://|https://]HOST[:PORT]")
    return value


@social_cli.command("providers", with_appcontext=False)
@click.option(
    "--host",
    metavar="[SCHEME://]HOST[:PORT]",
    callback=_served_at,
    help="Where the app is served, to resolve relative redirect URLs (default: SERVER_NAME,"
    " else the first TRUSTED_HOSTS entry; http and the flask run port for a loopback host,"
    " else https).",
)
@_PROVIDER_OPTION
def providers_command(host: str | None, name: str | None) -> None:
    """List each provider: its class, profile address and the exact redirect URL to register
    at the provider. Secrets are masked. With --provider, only that one (configured, or given
    by the app's provider loader)."""
    app = _load_app()
    providers = _state_providers(app)
    if name is not None:
        found, problem = loaded_provider(app, name)
        if found is None:
            _fail(f"error: {problem}", 2)
        providers = {name: found}
    empty = no_provider_warning(app, providers)
    if empty is not None:
        click.echo(empty)
        return
    try:
        run_port = flask_run_port(os.environ)
    except ValueError as error:
        _fail(f"error: {error}", 2)
    for index, provider in enumerate(providers.values()):
        if index:
            click.echo()
        for line in describe_provider(app, provider, host=host, run_port=run_port):
            click.echo(line)


@social_cli.command("keys", with_appcontext=False)
@click.argument("provider", required=False)
def keys_command(provider: str | None) -> None:
    """Print the public JWK set to register at the provider(s) whose blocks sign their client
    authentication with a private key (``private_key_jwt``): one ``{"keys": [...]}``, never a
    private member. The extension also serves each block's set at ``<url rule>/jwks.json``.
    PROVIDER may also be a name the app's provider loader knows."""
    app = _load_app()
    providers = _state_providers(app)
    if provider is not None:
        named, problem = loaded_provider(app, provider)
        if named is None:
            _fail(problem, 2)
        providers = {provider: named}
    chosen = list(providers.values())
    keys: list[dict[str, Any]] = []
    for selected in chosen:
        options = selected.options if isinstance(selected, OAuth2Provider) else None
        found = client_auth.public_jwks(selected.settings, options)
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
    app: Flask,
    provider: SocialProvider,
    *,
    host: str | None = None,
    run_port: int = FLASK_RUN_DEFAULT_PORT,
) -> list[str]:
    """The lines ``flask social providers`` prints for ``provider``; secrets masked.

    :param host: ``[SCHEME://]HOST[:PORT]`` the app is served at, for a relative
        ``redirectURL``.
    :param run_port: The port ``flask run`` serves on, for a loopback host without one.
    """
    settings = provider.settings
    cls = type(provider)
    if isinstance(provider, OAuth2Provider):
        profile = provider.profile_url or "(none: apiURL is required)"
    else:
        profile = "(chosen by the provider class)"
    redirect = registered_redirect_url(app, settings.redirect_url, host=host, run_port=run_port)
    rows = [
        ("class", f"{cls.__module__}.{cls.__qualname__}"),
        ("authorization", settings.authorization_url or "(none: client-side flow)"),
        ("token", settings.access_token_url),
        ("profile", profile),
        ("redirect URL", redirect),
        ("client ID", settings.client_id),
        ("client secret", MASK),
        ("scope", settings.scope or "(none)"),
    ]
    rows.extend(_logout_rows(app, provider, host=host, run_port=run_port))
    for key, value in settings.custom_properties.items():
        rows.append((f"custom {key}", masked(key, value)))
    return [provider.name] + [f"  {label + ':':15} {value}" for label, value in rows]


_LOGOUT_LABELS: Final = {
    "post_logout_redirect_uri": "logged-out URL",
    "backchannel_logout_uri": "back-channel",
    "frontchannel_logout_uri": "front-channel",
}


def _logout_rows(
    app: Flask, provider: SocialProvider, *, host: str | None, run_port: int
) -> list[tuple[str, str]]:
    """The sign-out addresses to register at an OpenID Connect provider (or one with
    ``customProperties.endSessionURL``): the return of RP-initiated logout, and the back-channel
    and front-channel logout routes where the block turns them on."""
    from .web.logout import registered_logout_urls

    settings = provider.settings
    if not isinstance(provider, OAuth2Provider) or (
        provider.issuer is None and provider.options.end_session_url is None
    ):
        return []
    route = str(app.config["SOCIAL_OAUTH2_URL_RULE"]).replace("<provider>", provider.name)
    if settings.redirect_url.startswith("/"):
        base = registered_redirect_url(app, route, host=host, run_port=run_port)
    else:
        parts = urlsplit(settings.redirect_url)
        base = f"{parts.scheme}://{parts.netloc}{route}"
    return [
        (_LOGOUT_LABELS[field], base + path)
        for field, path in registered_logout_urls(provider.options).items()
    ]


def flask_run_port(environ: Mapping[str, str]) -> int:
    """The port ``flask run`` serves on: ``FLASK_RUN_PORT`` when set, else 5000.

    :raises ValueError: ``FLASK_RUN_PORT`` is not a port number (``flask run`` refuses it too).
    """
    value = environ.get("FLASK_RUN_PORT", "").strip()
    if not value:
        return FLASK_RUN_DEFAULT_PORT
    if not value.isdigit() or not 0 < int(value) < 65536:
        raise ValueError(f"FLASK_RUN_PORT={value!r} is not a port number")
    return int(value)


def registered_redirect_url(
    app: Flask,
    redirect_url: str,
    *,
    host: str | None = None,
    run_port: int = FLASK_RUN_DEFAULT_PORT,
) -> str:
    """The redirect URL the running app sends for ``redirect_url``, to register at the provider.

    An absolute URL is itself. A path is resolved as a request to the app resolves it, for the
    first of these that is set: ``host``, ``SERVER_NAME``, the first ``TRUSTED_HOSTS`` entry.
    The scheme is the one ``host`` names, else ``http`` for a loopback host (what ``flask run``
    serves) and ``https`` for any other (served behind TLS). A port in the host is kept; a
    loopback host without one gets ``run_port``; a scheme's default port is left out, as
    browsers leave it out of the ``Host`` header. Without any host the result says that it
    depends on the request's host.

    :param host: ``[SCHEME://]HOST[:PORT]`` the app is served at.
    :param run_port: The port ``flask run`` serves on (:func:`flask_run_port`).
    """
    if not redirect_url.startswith("/"):
        return redirect_url
    scheme, _, served_at = (host or "").rpartition("://")
    if not served_at:
        served_at = app.config.get("SERVER_NAME") or ""
    if not served_at:
        trusted = app.config.get("TRUSTED_HOSTS") or ()
        served_at = next((entry.lstrip(".") for entry in trusted if entry.lstrip(".")), "")
    if not served_at:
        return (
            f"http://<request host>{redirect_url} (depends on the request's host: set"
            " TRUSTED_HOSTS or SERVER_NAME, or pass --host)"
        )
    hostname, port = _split_host(served_at)
    loopback = is_loopback_host(hostname)
    scheme = scheme.lower() or ("http" if loopback else "https")
    if port is None and loopback:
        port = run_port
    netloc = f"[{hostname}]" if ":" in hostname else hostname
    if port is not None and port != _DEFAULT_PORTS.get(scheme):
        netloc += f":{port}"
    return f"{scheme}://{netloc}{redirect_url}"


def _split_host(host: str) -> tuple[str, int | None]:
    """``HOST[:PORT]`` (an IPv6 address bare or in brackets) as its lowercase host name and
    port.

    :raises ValueError: the port is not a number in range.
    """
    if host.count(":") > 1 and not host.startswith("["):
        return host.lower(), None
    parts = urlsplit(f"//{host}")
    return parts.hostname or "", parts.port


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
        known = sorted(blocks)
        guess = closest_name(name.strip().lower(), known)
        hint = f"; did you mean {guess!r}? Known" if guess else "; known"
        raise click.BadParameter(
            f"{name!r} is not a built-in provider{hint}: {', '.join(known)}", param_hint="NAME"
        )
    click.echo(block)


def _block_name(
    context: click.Context, parameter: click.Parameter, value: str | None
) -> str | None:
    """Check ``--name``: lower-case letters, digits, ``_``, ``.`` and ``-``, at most 63."""
    del context, parameter
    if value is not None and not _BLOCK_NAME.fullmatch(value):
        raise click.BadParameter(
            f"{value[:80]!r} is not a block name: lower-case letters, digits, '_', '.' and '-',"
            " starting with a letter or digit, at most 63 characters"
        )
    return value


@social_cli.command("discover", with_appcontext=False)
@click.argument("issuer")
@click.option(
    "--name",
    callback=_block_name,
    help="The block's name (default: the issuer's host, dots as '-'); its redirectURL is the"
    " app's sign-in route for it.",
)
@click.option(
    "--client-id",
    help="The client ID (default: a ${NAME_CLIENT_ID} reference). The client secret is"
    " always a ${NAME_CLIENT_SECRET} reference, never an option: a secret typed on a command"
    " line stays in the shell's history and the process list.",
)
@click.option("--scope", default=DEFAULT_SCOPE, show_default=True, help="The block's scope.")
def discover_command(issuer: str, name: str | None, client_id: str | None, scope: str) -> None:
    """Print a ready YAML block for the OpenID Connect provider ISSUER, read from its discovery
    document (ISSUER/.well-known/openid-configuration): its authorization, token and userinfo
    addresses and customProperties.issuer. Add it to the providers file and set the client's
    ID and secret in the environment."""
    app = _load_app()
    chosen = name or _name_from_host(source_name(issuer))
    prefix = env_name(chosen)
    if prefix[0].isdigit():  # an environment variable's name starts with a letter or "_"
        prefix = f"_{prefix}"
    secret_variable = f"{prefix}_CLIENT_SECRET"
    with app.app_context():
        try:
            runtime = current_runtime(app)
            redirect_url = app.url_map.bind("localhost").build(
                runtime.endpoint, {"provider": chosen}
            )
            source = document_source(chosen)
            settings = settings_from_issuer(
                source,
                issuer,
                client_id=client_id or f"${{{prefix}_CLIENT_ID}}",
                client_secret=f"${{{secret_variable}}}",
                redirect_url=redirect_url,
                scope=scope,
            )
            metadata = discovery.issuer_metadata(source, issuer)  # from the cache
        except ConfigurationError as error:
            _fail("error: " + "; ".join(str(problem) for problem in error.problems))
        except SocialOAuth2Error as error:
            _fail(f"error: {error}")
    multi_tenant = tenants.is_multi_tenant(metadata)
    click.echo(discovered_block(chosen, settings.to_config(), multi_tenant=multi_tenant))
    needed = [secret_variable] if client_id else [f"{prefix}_CLIENT_ID", secret_variable]
    click.echo(f"# set {' and '.join(needed)} in the environment", err=True)


def _name_from_host(host: str) -> str:
    """A block name from an issuer's host: ``acme.okta.com`` -> ``acme-okta-com``."""
    name = re.sub(r"[^a-z0-9]+", "-", host.lower())[:63].strip("-")
    return name or "sso"


def discovered_block(name: str, block: Mapping[str, Any], *, multi_tenant: bool) -> str:
    """The YAML text of ``block`` under ``name``, as ``flask social discover`` prints it (the
    YAML reader reads it back unchanged). A block on a multi-tenant issuer gets a commented
    ``allowedTenants`` line to fill in (see docs/openid-connect.md)."""
    lines = [f"{yaml_scalar(name)}:"]
    for key, value in block.items():
        if not isinstance(value, Mapping):
            lines.append(f"  {key}: {yaml_scalar(value)}")
            continue
        lines.append(f"  {key}:")
        lines += [f"    {item}: {yaml_scalar(text)}" for item, text in value.items()]
        if key == "customProperties" and multi_tenant:
            lines.append(
                f"    # {tenants.ALLOWED_TENANTS_KEY}: <the tenant ids that may sign in,"
                " separated by spaces, or * for any tenant>"
            )
    return "\n".join(lines)
