"""The example app of flask-social-oauth2: sign in, link a second provider, call the
providers' APIs with kept and refreshed tokens, unlink, sign out.

Its users and the identities linked to them live in a SQLite file in the app's instance folder
(``EXAMPLE_INSTANCE_PATH`` moves it); Flask-Login keeps the signed-in user.

Run it with a local identity provider beside it (no account anywhere needed)::

    pip install -e ".[example]" && python -m example_app

or as any Flask app, ``flask --app example_app run``, with the providers whose variables are
set in the environment (see ``providers.yaml``).

This module makes the app; the rest, a concept a module: :mod:`~example_app.views` (the pages),
:mod:`~example_app.account` (what the account page lists), :mod:`~example_app.sign_in` (how a
sign-in ends), :mod:`~example_app.providers` (which providers are on, and their names),
:mod:`~example_app.security` (security headers, CSRF), :mod:`~example_app.users` (the app's
users), :mod:`~example_app.bluesky` (the Bluesky handle form), :mod:`~example_app.tenants`
(customers' providers loaded at runtime, found by work e-mail).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from flask import Flask
from flask_login import LoginManager

from flask_social_oauth2 import SocialOAuth2, signals
from flask_social_oauth2.config.blocks import load_yaml_blocks

from . import bluesky, tenants, views
from .access_log import hide_callback_queries
from .account import ended_at_provider, note_refresh
from .providers import select_blocks
from .security import make_nonce, security_headers
from .sign_in import sign_in_failed, signed_in
from .users import Users

__all__ = ["PROVIDERS_FILE", "create_app", "select_blocks"]

#: The example's provider blocks.
PROVIDERS_FILE: Final = Path(__file__).with_name("providers.yaml")


def create_app(
    environ: Mapping[str, str] | None = None, config: Mapping[str, Any] | None = None
) -> Flask:
    """Create the example app.

    :param environ: Variables for the ``${VAR}`` references of ``providers.yaml``, on top of
        ``os.environ`` (``python -m example_app`` passes the local identity provider's
        ``LOCAL_IDP_URL`` and ``LOCAL_IDP_CLIENT_SECRET`` this way), both on top of
        :data:`~example_app.bluesky.DEFAULT_VARIABLES`.
    :param config: Flask configuration applied last, e.g. ``TRUSTED_HOSTS``.
    :raises ConfigurationError: when an enabled provider block is invalid.
    """
    variables = {**bluesky.DEFAULT_VARIABLES, **os.environ, **(environ or {})}
    enabled, missing = select_blocks(load_yaml_blocks(PROVIDERS_FILE), variables)
    app = Flask(__name__, instance_path=variables.get("EXAMPLE_INSTANCE_PATH") or None)
    app.config.update(
        # One process serves the example, so a random key per run is enough. Every process of
        # a real deployment must share one SECRET_KEY: it signs the session and the state.
        SECRET_KEY=variables.get("EXAMPLE_SECRET_KEY") or secrets.token_hex(32),
        # A relative redirectURL is resolved against the request's Host: only these count.
        TRUSTED_HOSTS=["127.0.0.1", "localhost"],
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SOCIAL_OAUTH2_PROVIDERS=enabled,
        # Users, their linked identities and the identities' encrypted tokens, in one SQLite
        # file in the instance folder: the API calls of the account page use them.
        SOCIAL_OAUTH2_TOKEN_STORE="sqlite:///example.sqlite3",
        # The extension's ready sign-in page, in the example's look
        # (templates/social_oauth2/sign_in.html replaces the extension's own).
        SOCIAL_OAUTH2_SIGN_IN_PAGE="/sign-in",
        EXAMPLE_DISABLED_PROVIDERS=missing,
        # Where the client-side page sends the browser: a single-page app knows its provider's
        # authorization endpoint itself (the block has no authorizationURL).
        EXAMPLE_BROWSER_AUTHORIZATION_URL=(
            f"{variables['LOCAL_IDP_URL']}/authorize" if "LOCAL_IDP_URL" in variables else None
        ),
    )
    app.config.update(config or {})
    social = SocialOAuth2(app)
    social.on_error(sign_in_failed)
    social.on_authenticated(signed_in)
    tenants.install(social, variables)
    users = Users()
    app.extensions["example_users"] = users
    login_manager = LoginManager(app)
    login_manager.user_loader(users.get)
    signals.token_updated.connect(note_refresh, app, weak=False)
    signals.provider_logged_out.connect(ended_at_provider, app, weak=False)
    hide_callback_queries(app.config["SOCIAL_OAUTH2_URL_RULE"])
    app.register_blueprint(views.bp)
    app.register_error_handler(404, views.not_found)
    app.register_error_handler(405, views.method_not_allowed)
    app.before_request(make_nonce)
    app.after_request(security_headers)
    return app
