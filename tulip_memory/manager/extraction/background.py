"""``extract_mode="background"``: extractions on one process-wide event loop in a daemon
thread, each in a copy of the submitter's context (docs/design/extraction.md).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import sys
import threading
import weakref
from collections.abc import Awaitable, Callable, Hashable

from asgiref.sync import AsyncToSync, SyncToAsync

__all__ = ["BackgroundExtractions"]

Job = Callable[[], Awaitable[None]]

logger = logging.getLogger("tulip_memory.manager")

# CPython 3.12.0-3.12.2 refuse to start threads once the main thread has ended (gh-113964).
_NO_THREADS_AT_EXIT = (3, 12) <= sys.version_info[:3] < (3, 12, 3)


class _ExtractionLoop:
    """The process-wide loop of background extractions, started on first use."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.loop: asyncio.AbstractEventLoop | None = None
        # Every live runner, for the drain at exit (a manager's runner goes with its manager).
        self.runners: weakref.WeakSet[BackgroundExtractions] = weakref.WeakSet()

    def get(self) -> asyncio.AbstractEventLoop:
        with self.lock:
            if self.loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="tulip_memory extractions", daemon=True
                )
                thread.start()
                # Registered after concurrent.futures' own exit hook, so it runs before the
                # thread pools shut down: a job draining at exit may still use them.
                threading._register_atexit(self.drain_at_exit, loop)  # type: ignore[attr-defined]
                self.loop = loop
            return self.loop

    def drain_at_exit(self, loop: asyncio.AbstractEventLoop) -> None:
        pending = sum(runner.pending for runner in list(self.runners))
        if pending and _NO_THREADS_AT_EXIT:
            logger.warning(
                "%d background extraction(s) still pending at interpreter exit may fail: "
                "Python %d.%d.%d cannot start threads during shutdown (CPython gh-113964, "
                "fixed in 3.12.3), which sync event receivers and ORM calls need; await "
                "manager.drain() before the process exits, or upgrade Python",
                pending,
                *sys.version_info[:3],
            )

        async def drain_all() -> None:
            for runner in list(self.runners):
                await runner.drain()

        asyncio.run_coroutine_threadsafe(drain_all(), loop).result()
        loop.call_soon_threadsafe(loop.stop)


_extraction_loop = _ExtractionLoop()


def _leave_the_callers_thread() -> None:
    """In a job's copy of the submitter's context: forget asgiref's record of the
    submitter's thread, whose executor quits when its ``async_to_sync`` returns (the job's
    ORM calls would fail); they run on asgiref's process-wide executor instead."""
    AsyncToSync.executors.current = None
    SyncToAsync.thread_sensitive_context.set(None)  # type: ignore[arg-type]
    SyncToAsync.deadlock_context.set(False)


class BackgroundExtractions:
    """Ordered-per-key, bounded background jobs of one manager."""

    def __init__(self, max_concurrent: int) -> None:
        if max_concurrent < 1:
            raise ValueError("max_concurrent_extractions must be at least 1")
        self.max_concurrent = max_concurrent
        # Touched on the extraction loop only.
        self._semaphore: asyncio.Semaphore | None = None
        self._tails: dict[Hashable, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        # Counted at submission, in the caller's thread, so it is right at once.
        self._pending = 0
        self._pending_lock = threading.Lock()
        _extraction_loop.runners.add(self)

    @property
    def pending(self) -> int:
        """Jobs submitted and not yet finished."""
        return self._pending

    def submit(self, key: Hashable, job: Job) -> None:
        """Schedule ``job`` after every job submitted earlier under ``key``."""
        context = contextvars.copy_context()
        context.run(_leave_the_callers_thread)
        with self._pending_lock:
            self._pending += 1
        _extraction_loop.get().call_soon_threadsafe(self._schedule, key, job, context)

    def _schedule(self, key: Hashable, job: Job, context: contextvars.Context) -> None:
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.max_concurrent)
        semaphore = self._semaphore
        previous = self._tails.get(key)

        async def run() -> None:
            if previous is not None:
                # asyncio.wait: neither an error nor a cancellation of the previous job
                # propagates here; this job still runs after it.
                await asyncio.wait([previous])
            async with semaphore:
                await job()

        task = asyncio.get_running_loop().create_task(
            run(), name=f"tulip_memory extraction {key!r}", context=context
        )
        self._tails[key] = task
        self._tasks.add(task)

        def forget(done: asyncio.Task[None]) -> None:
            self._tasks.discard(done)
            if self._tails.get(key) is done:
                del self._tails[key]
            with self._pending_lock:
                self._pending -= 1

        task.add_done_callback(forget)

    async def _drain_here(self) -> None:
        # Runs on the extraction loop. A submission whose scheduling callback has not run
        # yet is pending but not a task: yielding lets the loop schedule it.
        while self._pending:
            if self._tasks:
                await asyncio.wait(set(self._tasks))
            else:
                await asyncio.sleep(0)

    async def drain(self) -> None:
        """Wait until no job is scheduled or running (new submissions included)."""
        if not self._pending:
            return
        loop = _extraction_loop.get()
        if asyncio.get_running_loop() is loop:
            await self._drain_here()
        else:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._drain_here(), loop))
