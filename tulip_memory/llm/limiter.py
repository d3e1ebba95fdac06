"""A concurrency cap shared by every thread and event loop of the process.

``asyncio.Semaphore`` caps one event loop only: :class:`ProcessLimiter` counts slots under
a thread lock and wakes each waiter on its own loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from tulip_memory.core.numbers import check_int

__all__ = ["ProcessLimiter", "limiter_for"]


@dataclass(eq=False)
class _Waiter:
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]
    granted: bool = field(default=False)


class ProcessLimiter:
    """At most ``limit`` holders at once across threads and event loops, first come first served."""

    def __init__(self, limit: int) -> None:
        self.limit = check_int(limit, "limit")
        self._lock = threading.Lock()
        self._in_use = 0
        self._waiters: deque[_Waiter] = deque()

    @property
    def in_use(self) -> int:
        return self._in_use

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one slot for the block."""
        await self._acquire()
        try:
            yield
        finally:
            with self._lock:
                self._release_locked()

    async def _acquire(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._in_use < self.limit and not self._waiters:
                self._in_use += 1
                return
            waiter = _Waiter(loop, loop.create_future())
            self._waiters.append(waiter)
        try:
            await waiter.future
        except BaseException:
            with self._lock:
                if waiter.granted:  # woken and cancelled at once: pass the slot on
                    self._release_locked()
                else:
                    self._waiters.remove(waiter)
            raise

    def _release_locked(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            waiter.granted = True
            try:
                waiter.loop.call_soon_threadsafe(_wake, waiter.future)
            except RuntimeError:  # its loop is closed: the waiter is gone
                continue
            return  # the slot moves to the waiter
        self._in_use -= 1


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


_limiters: dict[tuple[str, int], ProcessLimiter] = {}
_limiters_lock = threading.Lock()


def limiter_for(endpoint: str, limit: int) -> ProcessLimiter:
    """The process's limiter of ``endpoint`` at ``limit`` (one per pair, created once)."""
    with _limiters_lock:
        return _limiters.setdefault((endpoint, limit), ProcessLimiter(limit))
