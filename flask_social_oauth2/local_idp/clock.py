"""The clock the local identity provider reads: the real one, or a hand-moved one for tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["Clock", "ManualClock", "system_clock"]

#: Seconds since the epoch; codes and tokens expire by it.
Clock = Callable[[], float]


def system_clock() -> float:
    """The real time, :func:`time.time`."""
    return time.time()


class ManualClock:
    """A clock that moves only when told, so a test of an expiry does not sleep.

    Pass it as ``LocalIdentityProvider(clock=...)``, then :meth:`advance` it past a lifetime::

        clock = ManualClock()
        with LocalIdentityProvider(code_ttl=60, clock=clock) as idp:
            ...
            clock.advance(61)   # every code issued so far has expired

    :param start: The time it shows first; default the real time now.
    """

    def __init__(self, start: float | None = None) -> None:
        self._now = time.time() if start is None else start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        """Move the clock forward.

        :param seconds: How far; not negative.
        :raises ValueError: for a negative value.
        """
        if seconds < 0:
            raise ValueError("a clock only moves forward")
        with self._lock:
            self._now += seconds

    def __repr__(self) -> str:
        return f"<ManualClock {self():.3f}>"
