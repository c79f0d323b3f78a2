"""Providers the app loads at runtime: one app's cache of its provider loader's answers.

A B2B app keeps each customer's block in its database; the extension asks the app's loader
(:meth:`SocialOAuth2.provider_loader <flask_social_oauth2.SocialOAuth2.provider_loader>`) for a
name it does not know, and keeps the answer, ``None`` included, for a while. The loader is
asked only for names of :data:`LOADABLE_NAME`'s shape; each app has its own
:class:`LoadedProviders` in its runtime record, bounded and safe to share between threads.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from typing import Final

from ..errors import ConfigurationError, ProviderUnavailableError
from ..oauth.recently_used import RecentlyUsed
from .provider import SocialProvider

__all__ = ["LOADABLE_NAME", "LoadedProviders", "ProviderLoader"]

logger = logging.getLogger("flask_social_oauth2")

#: The names a provider loader is asked for, ``[a-z0-9][a-z0-9_.-]{0,62}`` without ``..``: a
#: path segment, a cookie value and a database key that holds no ``/``, no ``..``, no upper
#: case (``Acme`` and ``acme`` are one customer), at most 63 characters.
LOADABLE_NAME: Final = re.compile(r"(?!.*\.\.)[a-z0-9][a-z0-9_.-]{0,62}\Z")

#: What the app registers: a name -> its provider, or ``None`` for "no such provider".
ProviderLoader = Callable[[str], "SocialProvider | None"]


def loader_name(loader: object) -> str:
    """How a log line and an error name ``loader``: ``module.function``."""
    module = getattr(loader, "__module__", None) or "?"
    name = getattr(loader, "__qualname__", None) or type(loader).__qualname__
    return f"{module}.{name}"


class LoadedProviders:
    """One app's answers of its provider loader, each kept for ``ttl`` seconds, at most
    ``size`` names (the least recently used dropped first).

    A loader that raises, or answers with something other than a provider of that name or
    ``None``, is a :class:`~flask_social_oauth2.errors.ProviderUnavailableError` and nothing is
    kept. Concurrent requests for one name wait for a single call of the loader.

    :param loader: Gives the loader registered now (the extension's), or ``None``; read at each
        miss, so a loader registered after ``init_app`` is seen.
    :param ttl: Seconds an answer is kept (0: never kept).
    :param size: How many names are kept.
    :param clock: Monotonic seconds (the tests hand in their own).
    """

    __slots__ = ("_clock", "_kept", "_loader", "_loading", "_lock", "size", "ttl")

    def __init__(
        self,
        loader: Callable[[], ProviderLoader | None],
        *,
        ttl: float,
        size: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._loader = loader
        self.ttl = ttl
        self.size = size
        self._clock = clock
        #: name -> (when the answer expires, the answer)
        self._kept: RecentlyUsed[str, tuple[float, SocialProvider | None]] = RecentlyUsed(
            size, "SOCIAL_OAUTH2_PROVIDER_CACHE_SIZE"
        )
        self._lock = threading.Lock()
        self._loading: dict[str, threading.Lock] = {}

    def get(self, name: str) -> SocialProvider | None:
        """The provider the loader gives for ``name`` (kept, or asked now), or ``None`` for a
        name of another shape, without a loader, or when the loader knows none.

        :raises ProviderUnavailableError: when the loader fails or answers wrongly.
        """
        if not isinstance(name, str) or not LOADABLE_NAME.match(name):
            return None
        loader = self._loader()
        if loader is None:
            return None
        entry = self._unexpired(name)
        if entry is not None:
            return entry[1]
        with self._lock:
            gate = self._loading.setdefault(name, threading.Lock())
        with gate:  # one call of the loader per name at a time; the others find its answer
            try:
                entry = self._unexpired(name)
                if entry is not None:
                    return entry[1]
                provider = _ask(loader, name)
                if self.ttl > 0:
                    self._kept.put(name, (self._clock() + self.ttl, provider))
                return provider
            finally:
                with self._lock:
                    self._loading.pop(name, None)

    def forget(self, name: str) -> None:
        """Drop the answer kept for ``name``: the next request asks the loader again."""
        self._kept.discard(name)

    def __len__(self) -> int:
        return len(self._kept)

    def _unexpired(self, name: str) -> tuple[float, SocialProvider | None] | None:
        entry = self._kept.get(name)
        if entry is not None and entry[0] <= self._clock():
            self._kept.discard(name)
            return None
        return entry


def _ask(loader: ProviderLoader, name: str) -> SocialProvider | None:
    who = loader_name(loader)
    try:
        answer = loader(name)
    except ConfigurationError as error:
        reason = "; ".join(str(problem) for problem in error.problems)
        logger.error("provider loader %s: the block of %r does not validate: %s", who, name, reason)
        raise ProviderUnavailableError(
            name, f"the provider loader {who} gave a block that does not validate: {reason}"
        ) from None
    except Exception as error:
        logger.error("provider loader %s failed for %r", who, name, exc_info=True)
        raise ProviderUnavailableError(
            name, f"the provider loader {who} failed: {type(error).__name__}"
        ) from None
    if answer is None:
        return None
    if not isinstance(answer, SocialProvider):
        message = (
            f"the provider loader {who} returned a {type(answer).__name__}, not a"
            " SocialProvider or None (make one with social.build_provider)"
        )
    elif answer.name != name:
        message = f"the provider loader {who} returned the provider {answer.name!r}"
    else:
        return answer
    logger.error("provider %r: %s", name, message)
    raise ProviderUnavailableError(name, message)
