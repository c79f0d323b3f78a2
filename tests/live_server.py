"""A Flask app served over real HTTP on loopback, for servers that must fetch from it (the AT
Protocol PDS fetching a client metadata document and its JWK set).

Example::

    with live_server(app) as base_url:
        requests.get(f"{base_url}/authenticate/bluesky/client-metadata.json", timeout=5)
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from flask import Flask
from werkzeug.serving import make_server

STOP_TIMEOUT = 10.0


@contextmanager
def live_server(app: Flask) -> Iterator[str]:
    """Serve ``app`` with werkzeug's threaded server on ``127.0.0.1`` and a free port; yields
    its base URL (``http://127.0.0.1:PORT``) and stops the server on every way out."""
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, name="live-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.shutdown()
        thread.join(STOP_TIMEOUT)
        server.server_close()
