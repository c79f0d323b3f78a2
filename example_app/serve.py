"""Run the example app and a local identity provider together, both on loopback."""

from __future__ import annotations

import logging
import secrets
import socket
import threading
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any, Final

from flask import Flask
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from flask_social_oauth2.local_idp import LocalIdentityProvider, LocalUser
from flask_social_oauth2.local_idp.apple import LocalAppleProvider

from . import create_app

__all__ = ["CLIENT_ID", "HOST", "RunningExample", "run_example"]

#: Both servers listen here only: the identity provider is a development tool without TLS.
HOST: Final = "127.0.0.1"
#: The ``clientID`` of the ``local`` block in providers.yaml.
CLIENT_ID: Final = "example-app"
#: The Services ID of the ``apple`` block with ``--apple``.
APPLE_SERVICES_ID: Final = "com.example.flask-social-oauth2"
#: Whom the local Apple-like server signs in (it has no consent page).
APPLE_USER: Final = LocalUser.from_name_email("Ada Lovelace", "ada.l@privaterelay.appleid.com")

#: Seconds the local identity providers' access tokens live (``--token-lifetime``).
DEFAULT_TOKEN_LIFETIME: Final = 60

log = logging.getLogger("example_app")


class _QuietRequestHandler(WSGIRequestHandler):
    """Werkzeug's handler, logging method, path and status but never the query string: the
    callback's query holds the authorization code and the state."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        path = getattr(self, "path", "").partition("?")[0]
        log.info("%s %s -> %s", getattr(self, "command", "-"), path, code)

    def log(self, type: str, message: str, *args: Any) -> None:
        log.debug("server %s: " + message, type, *args)


@dataclass(frozen=True)
class RunningExample:
    """The running example.

    :param app: The example app.
    :param idp: The local identity provider serving its ``local`` provider.
    :param url: The address to open, e.g. ``http://127.0.0.1:5000/``.
    :param apple: The local Apple-like server of the ``apple`` provider, when started.
    :param idp2: The second local identity provider, serving ``local-two``.
    """

    app: Flask
    idp: LocalIdentityProvider
    url: str
    apple: LocalAppleProvider | None = None
    idp2: LocalIdentityProvider | None = None


def _bind(port: int, option: str) -> socket.socket:
    try:
        return socket.create_server((HOST, port))
    except OSError as error:
        raise OSError(
            error.errno, f"cannot listen on {HOST}:{port} ({option}): {error.strerror}"
        ) from None


@contextmanager
def run_example(
    port: int = 5000,
    idp_port: int = 5001,
    *,
    environ: Mapping[str, str] | None = None,
    config: Mapping[str, Any] | None = None,
    apple: bool = False,
    token_lifetime: int = DEFAULT_TOKEN_LIFETIME,
) -> Iterator[RunningExample]:
    """Serve the example app and its local identity provider on threads for the ``with``
    block.

    :param port: The app's port on 127.0.0.1; ``0`` picks a free one.
    :param idp_port: The identity provider's port on 127.0.0.1; ``0`` picks a free one.
    :param environ: Further ``${VAR}`` values for providers.yaml (on top of ``os.environ``).
    :param config: Flask configuration for the app.
    :param apple: Also start a local Apple-like server on a free port and turn the ``apple``
        provider on with it (it signs in :data:`APPLE_USER` at once).
    :param token_lifetime: Seconds the local identity providers' access tokens live: short,
        so that the account page's API calls show a refresh.
    :raises OSError: when a port cannot be bound; the message names the option.
    """
    with ExitStack() as stack:
        sock = stack.enter_context(_bind(port, "--port"))
        port = sock.getsockname()[1]
        idp = LocalIdentityProvider(HOST, idp_port, access_token_ttl=token_lifetime)
        try:
            idp.start()
        except OSError as error:
            message = f"cannot listen on {HOST}:{idp_port} (--idp-port): {error.strerror}"
            raise OSError(error.errno, message) from None
        stack.callback(idp.stop)
        idp2 = stack.enter_context(LocalIdentityProvider(HOST, access_token_ttl=token_lifetime))
        variables = {**(environ or {})}
        for local, prefix, paths in (
            (idp, "LOCAL_IDP", ("/authenticate/local", "/client-side", "/authenticate/acme")),
            (idp2, "LOCAL_IDP2", ("/authenticate/local-two", "/authenticate/globex")),
        ):
            secret = secrets.token_urlsafe(32)
            local.register_client(
                CLIENT_ID,
                secret,
                [f"http://{host}:{port}{path}" for host in (HOST, "localhost") for path in paths],
            )
            variables.update({f"{prefix}_URL": local.url, f"{prefix}_CLIENT_SECRET": secret})
        local_apple = None
        if apple:
            local_apple = stack.enter_context(LocalAppleProvider(HOST))
            local_apple.auto_approve = APPLE_USER
            local_apple.register_client(
                APPLE_SERVICES_ID,
                [f"http://{host}:{port}/authenticate/apple" for host in (HOST, "localhost")],
            )
            variables.update(
                APPLE_URL=local_apple.url,
                APPLE_SERVICES_ID=APPLE_SERVICES_ID,
                APPLE_PRIVATE_KEY=local_apple.private_key_pem,
                APPLE_TEAM_ID=local_apple.team_id,
                APPLE_KEY_ID=local_apple.key_id,
            )
        # Werkzeug ignores the port of a TRUSTED_HOSTS entry; with it, `flask social providers`
        # prints the exact redirect URL to register at a provider.
        settings = {"TRUSTED_HOSTS": [f"{HOST}:{port}", f"localhost:{port}"], **(config or {})}
        app = create_app(variables, settings)
        server: BaseWSGIServer = make_server(
            HOST, port, app, threaded=True, request_handler=_QuietRequestHandler, fd=sock.fileno()
        )
        stack.callback(server.server_close)
        sock.close()  # the server serves a duplicate of it
        thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
        )
        thread.start()
        stack.callback(thread.join, 10)
        stack.callback(server.shutdown)
        yield RunningExample(
            app=app, idp=idp, url=f"http://{HOST}:{port}/", apple=local_apple, idp2=idp2
        )
