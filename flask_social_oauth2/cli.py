"""The ``flask social`` command group."""

from __future__ import annotations

import click
from flask import current_app
from flask.cli import AppGroup

from .app_state import get_app_state
from .extension import redirect_url_problems

social_cli = AppGroup("social", help="Check and list the OAuth2 sign-in providers.")


@social_cli.command("check")
def check_command() -> None:
    """Validate every provider block and the redirect URL rule; exit 1 on any problem."""
    problems = redirect_url_problems(current_app)
    for problem in problems:
        click.echo(f"error: {problem}", err=True)
    if problems:
        raise SystemExit(1)
    click.echo(f"ok: {len(get_app_state().providers)} providers")
