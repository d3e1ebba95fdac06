"""Per-key locks usable from any event loop and thread, dropped when their last user
leaves: ``threading.Lock`` objects polled from the loop, never blocking it.
:data:`WRITER_LOCKS` is the process's registry, keyed by what a storage writes into.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable
from contextlib import asynccontextmanager

__all__ = ["WRITER_LOCKS", "KeyedLocks", "poll"]

# Sleeps between attempts: short first (an uncontended wait is brief), capped so that a
# waiter notices a release within a few milliseconds.
_FIRST_SLEEP = 0.0005
_MAX_SLEEP = 0.01


async def poll(attempt: Callable[[], Awaitable[bool]]) -> None:
    """Await ``attempt()`` until it returns True, sleeping on the loop in between."""
    sleep = _FIRST_SLEEP
    while not await attempt():
        await asyncio.sleep(sleep)
        sleep = min(sleep * 2, _MAX_SLEEP)


class KeyedLocks:
    """One ``threading.Lock`` per key, kept only while someone holds or waits for it."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[Hashable, tuple[threading.Lock, int]] = {}

    def _enter(self, key: Hashable) -> threading.Lock:
        with self._guard:
            lock, users = self._locks.get(key, (threading.Lock(), 0))
            self._locks[key] = (lock, users + 1)
            return lock

    def _leave(self, key: Hashable) -> None:
        with self._guard:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    @asynccontextmanager
    async def hold(self, key: Hashable) -> AsyncIterator[None]:
        lock = self._enter(key)
        try:

            async def attempt() -> bool:
                return lock.acquire(blocking=False)

            await poll(attempt)
            try:
                yield
            finally:
                lock.release()
        finally:
            self._leave(key)

    def __len__(self) -> int:
        """How many keys are held or waited for."""
        return len(self._locks)


WRITER_LOCKS = KeyedLocks()
