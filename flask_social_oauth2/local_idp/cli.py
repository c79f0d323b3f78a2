"""``python -m flask_social_oauth2.local_idp``: a local identity provider in the foreground."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from email.utils import parseaddr

import click

from .models import LocalUser
from .provider import LocalIdentityProvider
from .store import AUTH_METHODS, DEFAULT_SCOPE

__all__ = ["command", "main"]

PROG_NAME = "python -m flask_social_oauth2.local_idp"


@click.command(
    help="A local OAuth 2.0 / OpenID Connect identity provider for development.",
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option("--host", default="127.0.0.1", show_default=True, help="loopback address")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=5001,
    show_default=True,
    help="port, 0 for any",
)
@click.option("--client-id", required=True)
@click.option("--client-secret", required=True, help="the client secret (it is never printed)")
@click.option("--redirect-uri", required=True, multiple=True, help="may be given several times")
@click.option(
    "--auth-method",
    type=click.Choice(sorted(AUTH_METHODS)),
    default="any",
    show_default=True,
    help="token endpoint client authentication",
)
@click.option("--scope", default=DEFAULT_SCOPE, show_default=True)
@click.option(
    "--auto-approve",
    metavar='"NAME <EMAIL>"',
    help="approve every request at once for this user, e.g. 'Ada Lovelace <ada@example.test>'",
)
@click.option("--iss-parameter", is_flag=True, help="send iss (RFC 9207)")
@click.option("--no-refresh-tokens", is_flag=True)
def command(
    host: str,
    port: int,
    client_id: str,
    client_secret: str,
    redirect_uri: tuple[str, ...],
    auth_method: str,
    scope: str,
    auto_approve: str | None,
    iss_parameter: bool,
    no_refresh_tokens: bool,
) -> int:
    """Run a provider until Ctrl-C; the exit status."""
    try:
        provider = LocalIdentityProvider(
            host, port, issue_refresh_tokens=not no_refresh_tokens, iss_parameter=iss_parameter
        )
        provider.register_client(
            client_id,
            client_secret,
            list(redirect_uri),
            token_endpoint_auth_method=auth_method,
            scope=scope,
        )
        if auto_approve:
            name, email = parseaddr(auto_approve)
            provider.auto_approve = LocalUser.from_name_email(name or email, email)
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    try:
        provider.start()
    except OSError as error:
        click.echo(f"Cannot listen on {host}:{port}: {error.strerror}")
        return 1
    click.echo(f"Local identity provider at {provider.url}")
    for label, url in provider.endpoints().items():
        click.echo(f"  {label + ':':15} {url}")
    click.echo("Provider settings block (clientSecret: the value you passed):")
    block = provider.settings_block(client_id, "<secret>", redirect_uri[0], scope)
    for key, value in block.items():
        click.echo(f"  {key}: {json.dumps(value)}")
    click.echo("Press Ctrl-C to stop.")
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        provider.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run a provider in the foreground until interrupted (``python -m ...``).

    :param argv: the command-line arguments, without the program name.
    :return: the process exit status (2 for a usage error).
    """
    try:
        status = command.main(
            args=None if argv is None else list(argv),
            prog_name=PROG_NAME,
            standalone_mode=False,
        )
    except click.ClickException as error:
        error.show()
        return error.exit_code
    except click.Abort:
        return 1
    return status if isinstance(status, int) else 0
