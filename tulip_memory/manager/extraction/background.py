"""``extract_mode="background"``: extractions as in-process asyncio tasks.

Jobs of one namespace run one at a time in submission order (each waits for the one
submitted before it); at most ``max_concurrent`` jobs run at once over all namespaces.
:meth:`BackgroundExtractions.drain` waits for every job, including jobs submitted while
it waits; cancelling ``drain`` leaves the jobs running.

The semaphore and task table belong to one event loop: a manager reused under a new
loop (``asyncio.run`` per request in a sync view, one loop per test) starts a fresh table
instead of failing on a semaphore bound to a closed loop.
Pure Python: importable without Django settings.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable

__all__ = ["BackgroundExtractions"]

Job = Callable[[], Awaitable[None]]


class BackgroundExtractions:
    """Ordered-per-key, bounded background jobs of one manager."""

    def __init__(self, max_concurrent: int) -> None:
        if max_concurrent < 1:
            raise ValueError("max_concurrent_extractions must be at least 1")
        self.max_concurrent = max_concurrent
        self._loop: asyncio.AbstractEventLoop | None = None
        self._semaphore: asyncio.Semaphore | None = None
        self._tails: dict[Hashable, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def pending(self) -> int:
        """Jobs scheduled or running, not yet finished."""
        return sum(1 for task in self._tasks if not task.done())

    def _for_running_loop(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._semaphore is None:
            self._loop = loop
            self._semaphore = asyncio.Semaphore(self.max_concurrent)
            self._tails = {}
            self._tasks = set()
        return self._semaphore

    def submit(self, key: Hashable, job: Job) -> None:
        """Schedule ``job`` after every job submitted earlier under ``key``."""
        semaphore = self._for_running_loop()
        previous = self._tails.get(key)

        async def run() -> None:
            if previous is not None:
                # asyncio.wait: neither an error nor a cancellation of the previous job
                # propagates here; this job still runs after it.
                await asyncio.wait([previous])
            async with semaphore:
                await job()

        task = asyncio.get_running_loop().create_task(
            run(), name=f"tulip_memory extraction {key!r}"
        )
        self._tails[key] = task
        self._tasks.add(task)

        def forget(done: asyncio.Task[None]) -> None:
            self._tasks.discard(done)
            if self._tails.get(key) is done:
                del self._tails[key]

        task.add_done_callback(forget)

    async def drain(self) -> None:
        """Wait until no job is scheduled or running (new submissions included)."""
        if self._loop is not asyncio.get_running_loop():
            return
        while self._tasks:
            await asyncio.wait(set(self._tasks))
