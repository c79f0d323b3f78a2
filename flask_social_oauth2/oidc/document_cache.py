"""A per-process cache of a provider's public documents (discovery metadata, key sets) by URL.

One fetch at a time per URL: requests that arrive while a fetch is under way wait for it and take
its result, failure included. A failed fetch is remembered for a short time, during which every
use fails at once with the same error instead of waiting for the provider again. The cache knows
nothing about HTTP: the caller's ``fetch`` function does the work and says how long its result
stays fresh.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from ..errors import AuthenticationError, DiscoveryError

logger = logging.getLogger("flask_social_oauth2")

_MAX_ENTRIES: Final = 256

_T = TypeVar("_T")

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class Entry(Generic[_T]):
    """A fetched document.

    :param value: What was read from it.
    :param fetched: The clock's time of the fetch.
    :param expires: The clock's time from which it must be fetched again.
    :param forced: The time of the last fetch a caller forced on a fresh entry (key sets
        refetched for an unknown ``kid``).
    """

    value: _T
    fetched: float
    expires: float
    forced: float = float("-inf")


@dataclass(frozen=True, slots=True, eq=False)
class _Failure:
    """A fetch that failed: when, and enough of its error to raise it again."""

    at: float
    reason: str
    status_code: int

    def error(self, provider: str, now: float, ttl: float) -> DiscoveryError:
        left = max(ttl - (now - self.at), 0.0)
        return DiscoveryError(
            provider,
            f"{self.reason} (an earlier failure, remembered for {left:.0f} s more)",
            status_code=self.status_code,
        )


def _reason(error: AuthenticationError) -> str:
    """The error's message without its ``provider '<name>': `` prefix (another provider with
    the same issuer may meet the remembered failure)."""
    text = str(error)
    prefix = f"provider {error.provider!r}: "
    return text[len(prefix) :] if text.startswith(prefix) else text


def _bounded_put(entries: dict[str, Any], url: str, value: Any) -> None:
    entries.pop(url, None)
    while len(entries) >= _MAX_ENTRIES:
        del entries[next(iter(entries))]
    entries[url] = value


class DocumentCache(Generic[_T]):
    """A small, thread-safe map of URL -> fetched document or last failure."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, Entry[_T]] = {}
        self._failures: dict[str, _Failure] = {}
        self._fetch_locks: dict[str, threading.Lock] = {}

    def get(
        self,
        url: str,
        *,
        provider: str,
        clock: Clock,
        failure_ttl: float,
        usable: Callable[[Entry[_T] | None, float], bool],
        fetch: Callable[[Entry[_T] | None, float], Entry[_T]],
    ) -> Entry[_T]:
        """The cached entry of ``url`` if ``usable(entry, now)``; else the entry ``fetch(entry,
        now)`` returns, with one fetch at a time per URL in this process.

        :param provider: The provider asking, for its errors and the log.
        :param clock: Gives ``now`` (monotonic seconds).
        :param failure_ttl: Seconds a failed fetch is remembered: meanwhile this raises its
            error again at once. Requests that waited for a fetch that failed take its error
            whatever this says.
        :raises DiscoveryError: the error of ``fetch``, now or remembered.
        """
        entry = self._entry(url)
        if usable(entry, clock()):
            assert entry is not None
            return entry
        seen = self._failure(url)
        now = clock()
        if seen is not None and now - seen.at < failure_ttl:
            raise seen.error(provider, now, failure_ttl)
        with self._fetch_lock(url):
            entry = self._entry(url)
            now = clock()
            if usable(entry, now):
                assert entry is not None
                return entry
            failure = self._failure(url)
            if failure is not None and (failure is not seen or now - failure.at < failure_ttl):
                raise failure.error(provider, now, failure_ttl)
            try:
                entry = fetch(entry, now)
            except AuthenticationError as error:
                with self._lock:
                    _bounded_put(
                        self._failures, url, _Failure(clock(), _reason(error), error.status_code)
                    )
                logger.warning(
                    "%s: %s; uses in the next %.0f s fail at once without asking again",
                    provider,
                    _reason(error),
                    failure_ttl,
                )
                raise
            with self._lock:
                self._failures.pop(url, None)
                _bounded_put(self._entries, url, entry)
            return entry

    def clear(self) -> None:
        """Forget every entry and failure."""
        with self._lock:
            self._entries.clear()
            self._failures.clear()
            self._fetch_locks.clear()

    def _entry(self, url: str) -> Entry[_T] | None:
        with self._lock:
            return self._entries.get(url)

    def _failure(self, url: str) -> _Failure | None:
        with self._lock:
            return self._failures.get(url)

    def _fetch_lock(self, url: str) -> threading.Lock:
        with self._lock:
            lock = self._fetch_locks.get(url)
            if lock is None:
                if len(self._fetch_locks) >= _MAX_ENTRIES:
                    self._fetch_locks.clear()  # held locks stay valid for their holders
                lock = self._fetch_locks[url] = threading.Lock()
            return lock
