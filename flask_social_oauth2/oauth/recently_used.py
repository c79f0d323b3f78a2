"""A small thread-safe map that keeps only its most recently used entries: the per-process
memories of :mod:`.dpop` (servers' nonces, loaded keys) are bounded with it."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

_K = TypeVar("_K")
_V = TypeVar("_V")


class RecentlyUsed(Generic[_K, _V]):
    """A thread-safe map that keeps its ``limit`` most recently used entries (the least
    recently used goes first).

    :param limit: How many entries are kept.
    :param name: The caller's name for ``limit``, for the error when it is below 1.
    """

    __slots__ = ("_entries", "_limit", "_lock")

    def __init__(self, limit: int, name: str) -> None:
        if limit < 1:
            raise ValueError(f"{name} must be at least 1")
        self._limit = limit
        self._lock = threading.Lock()
        self._entries: OrderedDict[_K, _V] = OrderedDict()

    def get(self, key: _K) -> _V | None:
        """The value of ``key`` (now the most recently used), or ``None``."""
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: _K, value: _V) -> None:
        """Keep ``value`` for ``key``, dropping the least recently used past the limit."""
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self._limit:
                self._entries.popitem(last=False)

    def discard(self, key: _K) -> None:
        """Forget ``key``'s entry, if any."""
        with self._lock:
            self._entries.pop(key, None)

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
