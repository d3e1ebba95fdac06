"""Per-key locks usable from any event loop and thread, kept only while in use.

The delta checkpointer serialises the saves, deletes and prunes of one thread. One
checkpointer (or one storage) may be used from several event loops at once — one per
worker thread, or ``async_to_sync``/``asyncio.run`` callers — so the locks are
``threading.Lock`` objects, acquired without blocking the loop: a failed attempt sleeps
on the loop (:func:`poll`) and tries again. A lock per key kept forever would grow with
every thread ever touched, so each is dropped when its last user leaves.

:data:`WRITER_LOCKS` is the registry of this process: storages key it by what they
store into, so every checkpointer over the same data shares the lock.
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
