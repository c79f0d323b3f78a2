"""The app that the multiprocess and soak tests serve with gunicorn.

Configured from the environment only, so that several gunicorn instances share nothing but what
the test gives each of them (above all ``SECRET_KEY``)::

    SOCIAL_TEST_SECRET_KEY     the shared SECRET_KEY
    SOCIAL_TEST_PROVIDERS      JSON: provider name -> block (the specification's keys)
    SOCIAL_TEST_TRUSTED_HOSTS  comma-separated host names for Flask's TRUSTED_HOSTS
    SOCIAL_TEST_INSTANCE       a name for this instance, sent back in ``X-Served-By``
    SOCIAL_TEST_TIMEOUT        SOCIAL_OAUTH2_TIMEOUT (seconds, default 5)
    SOCIAL_TEST_TOKEN_STORE    SOCIAL_OAUTH2_TOKEN_STORE (default: the extension's, the session)
    SOCIAL_TEST_TENANTS_DB     a SQLite file with a table ``tenants(name, block)`` (JSON blocks):
                               a provider loader gives its rows, and ``GET /provider/<name>``
                               answers the token URL of that provider as this process sees it
    SOCIAL_TEST_PROVIDER_CACHE_TTL  SOCIAL_OAUTH2_PROVIDER_CACHE_TTL (seconds)

    SOCIAL_TEST_SESSION_CHECK  SOCIAL_OAUTH2_SESSION_CHECK_SECONDS (default: the extension's)

``GET /api/me`` calls the ``local`` provider's API (``me``, relative to its
``customProperties.apiBaseURL``) through ``social.api``: as the identity this browser signed in
with, or as the stored identity ``?key=``; it answers what the provider's API answered.

Served as ``python -m gunicorn 'multiprocess_app:create_app()'`` with ``tests/`` on the path.
Behind nginx, which sets ``X-Forwarded-For``, ``-Proto`` and ``-Host``, each trusted for one hop
through Werkzeug's ProxyFix.
"""

from __future__ import annotations

import json
import os
import sqlite3

from flask import Flask, Response, jsonify, request, session
from werkzeug.middleware.proxy_fix import ProxyFix

from flask_social_oauth2 import SocialOAuth2, SocialProvider


def create_app() -> Flask:
    """Build the app from the ``SOCIAL_TEST_*`` environment variables."""
    app = Flask("multiprocess_app")
    app.config.update(
        SECRET_KEY=os.environ["SOCIAL_TEST_SECRET_KEY"],
        TRUSTED_HOSTS=os.environ.get("SOCIAL_TEST_TRUSTED_HOSTS", "127.0.0.1").split(","),
        SOCIAL_OAUTH2_PROVIDERS=json.loads(os.environ["SOCIAL_TEST_PROVIDERS"]),
        SOCIAL_OAUTH2_TIMEOUT=float(os.environ.get("SOCIAL_TEST_TIMEOUT", "5")),
    )
    if "SOCIAL_TEST_TOKEN_STORE" in os.environ:
        app.config["SOCIAL_OAUTH2_TOKEN_STORE"] = os.environ["SOCIAL_TEST_TOKEN_STORE"]
    if "SOCIAL_TEST_PROVIDER_CACHE_TTL" in os.environ:
        ttl = float(os.environ["SOCIAL_TEST_PROVIDER_CACHE_TTL"])
        app.config["SOCIAL_OAUTH2_PROVIDER_CACHE_TTL"] = ttl
    if "SOCIAL_TEST_SESSION_CHECK" in os.environ:
        checks = float(os.environ["SOCIAL_TEST_SESSION_CHECK"])
        app.config["SOCIAL_OAUTH2_SESSION_CHECK_SECONDS"] = checks
    app.wsgi_app = ProxyFix(  # type: ignore[method-assign]
        app.wsgi_app, x_for=1, x_proto=1, x_host=1
    )
    instance = f"{os.environ.get('SOCIAL_TEST_INSTANCE', 'app')}/{os.getpid()}"
    social = SocialOAuth2(app)

    @app.get("/")
    def index() -> str:
        return "index"

    @app.get("/me")
    def me() -> Response:
        profile = session.get("social_profile")
        if profile is None:
            response = jsonify(signed_in=False)
            response.status_code = 401
            return response
        return jsonify(signed_in=True, profile=profile)

    @app.get("/api/me")
    def api_me() -> Response:
        answer = social.api("local", key=request.args.get("key")).get("me")
        return Response(
            answer.content,
            status=answer.status_code,
            content_type=answer.headers.get("Content-Type", "application/octet-stream"),
        )

    tenants_db = os.environ.get("SOCIAL_TEST_TENANTS_DB")
    if tenants_db:

        @social.provider_loader
        def tenant(name: str) -> SocialProvider | None:
            with sqlite3.connect(tenants_db) as connection:
                row = connection.execute(
                    "SELECT block FROM tenants WHERE name = ?", (name,)
                ).fetchone()
            return None if row is None else social.build_provider(name, json.loads(row[0]))

        @app.get("/provider/<name>")
        def provider_token_url(name: str) -> Response:
            return jsonify(token_url=social.provider(name).settings.access_token_url)

    @app.after_request
    def served_by(response: Response) -> Response:
        response.headers["X-Served-By"] = instance
        return response

    return app
