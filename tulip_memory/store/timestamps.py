"""Write timestamps: timezone-aware UTC, strictly increasing per store.

``updated_at`` must advance on every update even when the wall clock has not ticked (or
went back); :class:`WriteClock` hands out ``max(now, last + 1 µs)``, which also gives every
write of a store a distinct time, so "newest first" has no ties within one store.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

__all__ = ["WriteClock", "from_micros", "to_micros", "utc_now"]

_TICK = timedelta(microseconds=1)


def utc_now() -> datetime:
    return datetime.now(UTC)


class WriteClock:
    """Strictly increasing UTC timestamps (thread-safe)."""

    def __init__(self) -> None:
        self._last: datetime | None = None
        self._lock = threading.Lock()

    def tick(self, after: datetime | None = None) -> datetime:
        """A timestamp later than every earlier tick and than ``after``."""
        with self._lock:
            now = utc_now()
            for floor in (self._last, after):
                if floor is not None and now <= floor:
                    now = floor + _TICK
            self._last = now
            return now


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_micros(moment: datetime) -> int:
    """Microseconds since the Unix epoch (how SQLite stores a timestamp: exact, sortable)."""
    return (moment - _EPOCH) // _TICK


def from_micros(micros: int) -> datetime:
    """Inverse of :func:`to_micros`."""
    return _EPOCH + timedelta(microseconds=micros)
