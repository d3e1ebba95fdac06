"""Per-key asyncio locks that exist only while someone holds or waits for them.

The delta checkpointer serialises the saves, deletes and prunes of one thread; a lock
per thread id kept forever would grow with every thread ever touched, so each lock is
dropped when its last user leaves. An ``asyncio.Lock`` belongs to one event loop, so the
locks are keyed by loop as well (one checkpointer may be used from several loops, e.g.
one per worker thread).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

__all__ = ["KeyedLocks"]


class KeyedLocks:
    """One asyncio.Lock per key and event loop, kept only while someone holds or waits."""

    def __init__(self) -> None:
        self._locks: dict[tuple[int, str], tuple[asyncio.Lock, int]] = {}

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        slot = (id(asyncio.get_running_loop()), key)
        lock, users = self._locks.get(slot, (asyncio.Lock(), 0))
        self._locks[slot] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[slot]
            if users == 1:
                del self._locks[slot]
            else:
                self._locks[slot] = (lock, users - 1)
