"""Observability events, sent through one Django signal, :data:`memory_event`.

``sender`` is the emitting class, ``event`` the name, ``payload`` ids, counts and timings,
never content (docs/events.md). A receiver that raises is logged, never breaks the caller.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.dispatch import Signal

logger = logging.getLogger("tulip_memory.events")

EV_MEMORY_CONVERSATION_PRUNED = "memory.conversation.pruned"
EV_MEMORY_COMPACTOR_TRIGGERED = "memory.compactor.triggered"
EV_MEMORY_COMPACTOR_COMPLETED = "memory.compactor.completed"
EV_MEMORY_COMPACTOR_FAILED = "memory.compactor.failed"
EV_MEMORY_MANAGER_INJECTED = "memory.manager.injected"
EV_MEMORY_MANAGER_EXTRACTED = "memory.manager.extracted"
EV_MEMORY_MANAGER_EXTRACT_FAILED = "memory.manager.extract_failed"
# Stores: writes and deletes (sent by every BaseStore subclass), erasure and expiry sweeps.
EV_STORE_ITEMS_WRITTEN = "store.items.written"
EV_STORE_ITEMS_DELETED = "store.items.deleted"
EV_STORE_SUBJECT_FORGOTTEN = "store.subject.forgotten"
EV_STORE_EXPIRED_SWEPT = "store.expired.swept"
# Checkpointers: save, load, delete (every BaseCheckpointer), prune.
EV_CHECKPOINT_SAVED = "checkpoint.saved"
EV_CHECKPOINT_LOADED = "checkpoint.loaded"
EV_CHECKPOINT_DELETED = "checkpoint.deleted"
EV_CHECKPOINT_PRUNED = "checkpoint.pruned"

memory_event = Signal()


def _log_failures(name: str, responses: list[tuple[Any, Any]]) -> None:
    for receiver, result in responses:
        if isinstance(result, BaseException):
            # django.dispatch already logs the traceback; this names the event.
            logger.error("memory_event receiver %r failed on %s: %r", receiver, name, result)


# async_to_sync refuses a thread whose event loop runs (a sync API called from async
# code): such sends go through this worker thread.
_sender_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tulip-memory-events")


# True inside muted(): the operations of a sweep that reports itself send nothing.
_muted: ContextVar[bool] = ContextVar("tulip_memory_events_muted", default=False)


def listening() -> bool:
    """Whether an emit here reaches anyone: a receiver is connected and not muted."""
    return bool(memory_event.receivers) and not _muted.get()


@contextmanager
def muted() -> Iterator[None]:
    """Send no event in this block (follows the context into tasks): for an operation that
    reports its own summary, such as the retention sweep."""
    token = _muted.set(True)
    try:
        yield
    finally:
        _muted.reset(token)


def elapsed_ms(started: float) -> float:
    """Milliseconds since ``started`` (a ``time.perf_counter()`` reading), for ``duration_ms``."""
    return round((time.perf_counter() - started) * 1000, 3)


def emit_sync(name: str, *, sender: type | None = None, **fields: Any) -> None:
    """Send event ``name`` from ``sender`` with ``fields`` as its payload."""
    if not listening():
        return
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        responses = memory_event.send_robust(sender=sender, event=name, payload=fields)
    else:
        responses = _sender_thread.submit(
            memory_event.send_robust, sender=sender, event=name, payload=fields
        ).result()
    _log_failures(name, responses)


async def emit(name: str, *, sender: type | None = None, **fields: Any) -> None:
    """Async twin of :func:`emit_sync`; async receivers are awaited, sync ones run in a thread."""
    if not listening():
        return
    _log_failures(name, await memory_event.asend_robust(sender=sender, event=name, payload=fields))
