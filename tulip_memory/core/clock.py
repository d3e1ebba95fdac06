"""A wall clock forced strictly increasing within the process, and the clocks expiry reads.

Stores stamp ``updated_at`` and checkpointers order saves with it. A clock is any callable
returning an aware UTC datetime (:func:`utc_now`); :class:`ManualClock` is for tests.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

__all__ = ["Clock", "ManualClock", "MonotonicWallClock", "from_micros", "to_micros", "utc_now"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def utc_now() -> datetime:
    return datetime.now(UTC)


Clock = Callable[[], datetime]
"""What expiry reads the time from: a callable returning an aware UTC datetime."""


class ManualClock:
    """A thread-safe clock that stands still until :meth:`advance` (from now, or ``start``)."""

    def __init__(self, start: datetime | None = None) -> None:
        if start is not None and start.tzinfo is None:
            raise ValueError("start must be an aware datetime")
        self._now = utc_now() if start is None else start.astimezone(UTC)
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, seconds: float | timedelta) -> datetime:
        """Move the clock forward by ``seconds`` (or a ``timedelta``); the new time."""
        step = seconds if isinstance(seconds, timedelta) else timedelta(seconds=seconds)
        if step < timedelta(0):
            raise ValueError(f"a clock only moves forward, got {seconds!r}")
        with self._lock:
            self._now += step
            return self._now


def to_micros(moment: datetime) -> int:
    """Microseconds since the Unix epoch (exact and sortable, e.g. in SQLite)."""
    return (moment - _EPOCH) // _MICROSECOND


def from_micros(micros: int) -> datetime:
    """Inverse of :func:`to_micros`."""
    return _EPOCH + timedelta(microseconds=micros)


class MonotonicWallClock:
    """Strictly increasing wall-clock readings in units of ``resolution_ns`` (thread-safe)."""

    def __init__(self, resolution_ns: int = 1) -> None:
        self._resolution = resolution_ns
        self._last = 0
        self._lock = threading.Lock()

    def tick(self, after: int | None = None) -> int:
        """A reading later than every earlier one and than ``after`` (same unit)."""
        with self._lock:
            now = time.time_ns() // self._resolution
            floor = self._last if after is None else max(self._last, after)
            self._last = max(now, floor + 1)
            return self._last

    def tick_datetime(self, after: datetime | None = None) -> datetime:
        """:meth:`tick` at microsecond resolution, as an aware UTC datetime."""
        if self._resolution != 1_000:
            raise ValueError("tick_datetime needs a clock of microsecond resolution")
        return from_micros(self.tick(None if after is None else to_micros(after)))
