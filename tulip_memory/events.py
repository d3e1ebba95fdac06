"""Observability events, sent through one Django signal.

Every event goes through :data:`memory_event` with ``event=<name>`` and
``payload=<dict>``. A receiver that raises is logged and never breaks the caller.
Pure: a ``Signal`` needs no configured settings.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
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
EV_STORE_SUBJECT_FORGOTTEN = "store.subject.forgotten"
# Sent by the expiry sweep (per tenant: how many expired items it deleted) and by the
# checkpoint retention sweep (per tenant: checkpoints and threads removed). Counts only.
EV_STORE_EXPIRED_SWEPT = "store.expired.swept"
EV_CHECKPOINT_PRUNED = "checkpoint.pruned"

memory_event = Signal()


def _log_failures(name: str, responses: list[tuple[Any, Any]]) -> None:
    for receiver, result in responses:
        if isinstance(result, BaseException):
            # django.dispatch already logs the traceback; this names the event.
            logger.error("memory_event receiver %r failed on %s: %r", receiver, name, result)


# Django runs async receivers of a sync send through async_to_sync, which refuses to run
# in a thread whose event loop is running (a sync API called from async code). Such sends
# go through this one worker thread instead.
_sender_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tulip-memory-events")


def emit_sync(name: str, **fields: Any) -> None:
    """Send event ``name`` with ``fields`` as its payload to every receiver."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        responses = memory_event.send_robust(sender=None, event=name, payload=fields)
    else:
        responses = _sender_thread.submit(
            memory_event.send_robust, sender=None, event=name, payload=fields
        ).result()
    _log_failures(name, responses)


async def emit(name: str, **fields: Any) -> None:
    """Async twin of :func:`emit_sync`; async receivers are awaited, sync ones run in a thread."""
    _log_failures(name, await memory_event.asend_robust(sender=None, event=name, payload=fields))
