"""The playground's agent runtime: the memory layer on one long-lived event loop.

The site is served by Django's (WSGI) development server, where an async call made from a
view gets an event loop that ends with the request. The memory layer's background
extraction mode runs its work as tasks of the loop it was started on, so the playground
keeps ONE event loop in a daemon thread for the life of the process and runs every call of
the memory layer there: a background extraction started by "End session" goes on after
the response is sent, as it would in an ASGI deployment.

Extraction mode: ``PLAYGROUND_EXTRACT_MODE`` in settings (``make playground`` sets it to
``"celery"`` when the broker answers, else ``"background"``).
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Awaitable, Callable
from functools import cached_property
from typing import Any, TypeVar

from django.conf import settings
from django.core.signals import setting_changed

from tulip_memory.conversation import SlidingWindowManager
from tulip_memory.delta import DeltaCheckpointer, ORMDeltaStorage
from tulip_memory.events import (
    EV_MEMORY_MANAGER_EXTRACT_FAILED,
    EV_MEMORY_MANAGER_EXTRACTED,
    memory_event,
)
from tulip_memory.manager import LLMMemoryManager
from tulip_memory.store import PgMemory
from tulip_memory.tenancy import tenant_context

T = TypeVar("T")

#: How many messages of a thread the agent sees (system messages and the first user
#: message are kept besides): small, so the window's work shows after a few turns.
WINDOW_SIZE = 6
#: A full checkpoint every this many saves + 1; the others are deltas.
MAX_CHAIN_DEPTH = 4
CALL_TIMEOUT_SECONDS = 120


def extract_mode() -> str:
    mode = getattr(settings, "PLAYGROUND_EXTRACT_MODE", "background")
    if mode not in ("inline", "background", "celery"):
        raise ValueError(
            f"PLAYGROUND_EXTRACT_MODE must be 'inline', 'background' or 'celery', got {mode!r}"
        )
    return mode


class AgentRuntime:
    """The event loop thread and the memory layer's objects that live on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="playground-agent", daemon=True
        )
        self._thread.start()

    @cached_property
    def store(self) -> PgMemory:
        return PgMemory()

    @cached_property
    def checkpointer(self) -> DeltaCheckpointer:
        return DeltaCheckpointer(ORMDeltaStorage("default"), max_chain_depth=MAX_CHAIN_DEPTH)

    @cached_property
    def window(self) -> SlidingWindowManager:
        return SlidingWindowManager(window_size=WINDOW_SIZE)

    def manager(self) -> LLMMemoryManager:
        """The memory manager of the configured extraction mode (one per mode)."""
        mode = extract_mode()
        managers = self.__dict__.setdefault("_managers", {})
        if mode not in managers:
            managers[mode] = LLMMemoryManager(
                self.store, namespace_prefix=("playground", "anonymous"), extract_mode=mode
            )
        return managers[mode]

    def rebuild(self) -> None:
        """Drop the memory layer's objects; the next call builds them from the settings."""
        for name in ("store", "checkpointer", "window", "_managers"):
            self.__dict__.pop(name, None)

    def run(self, tenant: str, call: Callable[[], Awaitable[T]]) -> T:
        """Run ``call()`` on the runtime's loop with ``tenant`` bound; wait for its result."""

        async def bound() -> T:
            with tenant_context(tenant):
                return await call()

        future = asyncio.run_coroutine_threadsafe(bound(), self.loop)
        return future.result(CALL_TIMEOUT_SECONDS)


class BackgroundOutcomes:
    """The background extractions of each namespace (background mode): how many run now,
    and how the last one ended (``"done"`` or ``"failed: <error>"``), from the manager's
    ``memory.manager.extracted`` / ``extract_failed`` events. The manager's own count
    (``pending_extractions``) is the whole process's: every visitor's, every tenant's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: Counter[tuple[str, ...]] = Counter()
        self._last: dict[tuple[str, ...], str] = {}

    def started(self, namespace: tuple[str, ...]) -> None:
        with self._lock:
            self._running[namespace] += 1

    def of(self, namespace: tuple[str, ...]) -> tuple[int, str | None]:
        """(extractions running, how the last one ended) of ``namespace``."""
        with self._lock:
            return self._running[namespace], self._last.get(namespace)

    def receive(self, sender: Any, event: str, payload: dict[str, Any], **kwargs: Any) -> None:
        if payload.get("mode") != "background" or "namespace" not in payload:
            return
        if event == EV_MEMORY_MANAGER_EXTRACTED:
            outcome = "done"
        elif event == EV_MEMORY_MANAGER_EXTRACT_FAILED:
            outcome = f"failed: {payload.get('error_type')}: {payload.get('error')}"
        else:
            return
        namespace = tuple(payload["namespace"])
        with self._lock:
            self._running[namespace] = max(0, self._running[namespace] - 1)
            self._last[namespace] = outcome


outcomes = BackgroundOutcomes()
memory_event.connect(outcomes.receive, weak=False, dispatch_uid="playground-background-outcomes")

_started: dict[str, AgentRuntime] = {}
_lock = threading.Lock()


def runtime() -> AgentRuntime:
    """The process's runtime, started on first use."""
    with _lock:
        if "runtime" not in _started:
            _started["runtime"] = AgentRuntime()
        return _started["runtime"]


def run(tenant: str, call: Callable[[], Awaitable[Any]]) -> Any:
    return runtime().run(tenant, call)


def _settings_changed(setting: str, **kwargs: Any) -> None:
    if setting in ("TULIP_MEMORY", "PLAYGROUND_EXTRACT_MODE", "DATABASES") and _started:
        _started["runtime"].rebuild()


setting_changed.connect(_settings_changed)
