"""Keep the sign-in callback's query out of the development server's access log.

The callback's query holds the authorization code and the state; Werkzeug's request log (what
``flask run`` prints) would show them for every sign-in. A filter on the ``werkzeug`` logger
drops the query of request lines whose path starts with the sign-in route.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Final

__all__ = ["hide_callback_queries"]

#: Werkzeug logs each request as ``"%s" %s %s`` with the request line first.
_REQUEST_LINE: Final = re.compile(r"(?P<path>\S+?)\?\S*")


class _CallbackQueryFilter(logging.Filter):
    """Removes the query of request lines whose path starts with one of :attr:`prefixes`."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self.prefixes: frozenset[str] = frozenset()

    def add(self, prefix: str) -> None:
        with self._lock:
            self.prefixes |= {prefix}

    def _clean(self, text: str) -> str:
        def without_query(match: re.Match[str]) -> str:
            path = match.group("path")
            if any(path.startswith(prefix) for prefix in self.prefixes):
                return path
            return match.group(0)

        return _REQUEST_LINE.sub(without_query, text)

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and record.args:
            record.args = tuple(
                self._clean(arg) if isinstance(arg, str) else arg for arg in record.args
            )
        elif isinstance(record.msg, str) and not record.args:
            record.msg = self._clean(record.msg)
        return True


_FILTER: Final = _CallbackQueryFilter()


def hide_callback_queries(url_rule: str) -> None:
    """Drop the query of requests to ``url_rule`` (e.g. ``/authenticate/<provider>``) from
    Werkzeug's request log, for every app of this process.

    :param url_rule: The extension's route; the part before its first ``<`` is matched.
    """
    _FILTER.add(url_rule.partition("<")[0])
    logger = logging.getLogger("werkzeug")
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
