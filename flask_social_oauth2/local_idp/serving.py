"""Serving a WSGI app on a loopback address, on a thread, with a request log that never
prints a query string."""

from __future__ import annotations

import logging
import socket
import threading
from typing import Any

from flask import Flask
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from ..urls import is_loopback_host

__all__ = ["LoopbackServer", "is_loopback"]

log = logging.getLogger("flask_social_oauth2.local_idp")


def is_loopback(host: str) -> bool:
    """Tell whether ``host`` names a loopback interface: 127.0.0.0/8, ::1 or localhost."""
    candidate = host.strip()
    if candidate.startswith("[") and candidate.endswith("]"):
        candidate = candidate[1:-1]
    return is_loopback_host(candidate.lower())


class _RequestHandler(WSGIRequestHandler):
    """Werkzeug's handler, logging at DEBUG without query strings."""

    # One request per connection, so that stop() leaves nothing behind.
    protocol_version = "HTTP/1.0"

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        path = getattr(self, "path", "").partition("?")[0]
        log.debug("%s %s -> %s", getattr(self, "command", "-"), path, code)

    def log(self, type: str, message: str, *args: Any) -> None:
        log.debug("local identity provider %s: " + message, type, *args)


class LoopbackServer:
    """One WSGI app served on a daemon thread until :meth:`stop`.

    :param app: The app.
    :param host: A loopback address.
    :param port: The port; ``0`` for a free one.
    :raises OSError: if the address cannot be bound (e.g. the port is taken).
    """

    def __init__(self, app: Flask, host: str, port: int) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        # Bind here: Werkzeug's make_server calls sys.exit() when it cannot bind.
        sock = socket.create_server((host, port), family=family)
        try:
            self._server: BaseWSGIServer = make_server(
                host,
                sock.getsockname()[1],
                app,
                threaded=True,
                request_handler=_RequestHandler,
                fd=sock.fileno(),
            )
        finally:
            sock.close()
        self.port: int = self._server.port
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"local-idp-{self.port}",
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and wait for the thread."""
        self._server.shutdown()
        self._thread.join(timeout=10)
        self._server.server_close()
