"""A local OAuth 2.0 + OpenID Connect identity provider for development and tests.

:class:`LocalIdentityProvider` runs a real authorization server on a loopback
address, built from Authlib's server classes: the authorization code grant with
PKCE (S256 only, mandatory), OpenID Connect ID tokens signed with a fresh RS256
key, refresh tokens, a bearer-protected userinfo endpoint, a JWKS and a discovery
document. It serves three purposes:

* the test suite of this package uses it as "the authorization server" that
  checks what the client sends (PKCE, redirect URI, client authentication,
  single-use codes) and records every request it receives;
* the example application signs a newcomer in with it, with no external account;
* application developers can use it in their own tests.

Typical use in a test::

    from flask_social_oauth2.local_idp import LocalIdentityProvider, LocalUser

    with LocalIdentityProvider() as idp:
        idp.register_client("app", "s3cret", ["http://127.0.0.1:5000/authenticate/local"])
        idp.auto_approve = LocalUser.from_name_email("Ada Lovelace", "ada@example.test")
        app.config["SOCIAL_OAUTH2_PROVIDERS"] = {
            "local": idp.settings_block("app", "s3cret", "/authenticate/local")
        }
        ...

From a shell (foreground, Ctrl-C to stop)::

    python -m flask_social_oauth2.local_idp --client-id app --client-secret s3cret \\
        --redirect-uri http://127.0.0.1:5000/authenticate/local

This subpackage needs Authlib (the ``idp`` extra installs it, and so do ``example`` and
``test``); without it, importing the subpackage raises an :class:`ImportError` that names the
extra. The package itself never imports it. It is a development tool: it keeps everything in
memory, serves plain HTTP, and refuses to listen on anything but loopback.

Its modules, from the top: ``cli`` (the command), ``provider`` (the server's lifecycle,
knobs and records), ``app`` (the Flask routes), ``server`` (Authlib's classes), ``pages``
(templates), ``store``, ``records``, ``keys``, ``serving``, ``models``, ``clock``.
"""

from __future__ import annotations

try:
    import authlib  # noqa: F401 - the one dependency of the idp extra, checked first
except ImportError as missing:
    raise ImportError(
        "the local identity provider (flask_social_oauth2.local_idp) needs Authlib, which is"
        f' not installed ({missing}): pip install "flask-social-oauth2[idp]"',
        name=missing.name,
    ) from None

from .app import create_idp_app
from .cli import main
from .clock import Clock, ManualClock
from .models import IdTokenSigning, IdTokenTamper, LocalUser, TokenFailure
from .provider import LocalIdentityProvider
from .records import RecordedTokenRequest

__all__ = [
    "Clock",
    "IdTokenSigning",
    "IdTokenTamper",
    "LocalIdentityProvider",
    "LocalUser",
    "ManualClock",
    "RecordedTokenRequest",
    "TokenFailure",
    "create_idp_app",
    "main",
]
