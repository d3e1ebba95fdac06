"""The manager contract (:class:`BaseMemoryManager`): the lifecycle an agent calls
(inject the memory block, extract and save, never raise), and :class:`NoopMemoryManager`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from abc import ABC, abstractmethod
from collections.abc import Hashable
from typing import Any, Protocol

from tulip_memory.events import (
    EV_MEMORY_MANAGER_EXTRACT_FAILED,
    EV_MEMORY_MANAGER_EXTRACTED,
    EV_MEMORY_MANAGER_INJECTED,
    emit,
)
from tulip_memory.exceptions import LLMError
from tulip_memory.llm.usage import Usage
from tulip_memory.manager.block import inject_memory_block, latest_user_text, strip_memory_blocks
from tulip_memory.manager.extraction.background import BackgroundExtractions
from tulip_memory.manager.types import BeforeSave, ExtractionOutcome, ExtractMode, Memory
from tulip_memory.messages import Message, without_nul
from tulip_memory.state import AgentState, checked_state

__all__ = ["BaseMemoryManager", "NoopMemoryManager", "failure_fields"]

logger = logging.getLogger("tulip_memory.manager")


def failure_fields(exc: BaseException, what: str | None = None) -> dict[str, Any]:
    """The fields of a ``memory.manager.extract_failed`` event for ``exc``: ``error``, the
    type of ``exc`` and ``what`` failed (by default what its type says: a chat model's
    failure and its kind, else the extraction), for the event, the job's row and every log
    record above DEBUG; ``reason`` (an :class:`LLMError`'s kind, ``cancelled`` or
    ``exception``) and a model's failure's usage."""
    if isinstance(exc, LLMError):
        reason = exc.kind
        what = what or f"the chat model failed ({exc.kind})"
    elif isinstance(exc, asyncio.CancelledError):
        reason = "cancelled"
    else:
        reason = "exception"
    # Never the exception's message: it may quote the conversation, which an erasure cannot
    # take back from a log aggregator or a receiver.
    fields: dict[str, Any] = {
        "error": f"{type(exc).__name__}: {what or 'the extraction failed'}; "
        "its message is logged at DEBUG level",
        "error_type": type(exc).__name__,
        "reason": reason,
    }
    if isinstance(exc, LLMError) and isinstance(exc.usage, Usage):
        fields.update(exc.usage.as_fields())
    return fields


class _Runner(Protocol):
    @property
    def pending(self) -> int: ...

    async def drain(self) -> None: ...


class BaseMemoryManager(ABC):
    """Abstract long-term memory manager; subclasses implement extract, retrieve and save."""

    #: ``"inline"``: extraction finishes before :meth:`on_session_end` returns;
    #: ``"background"``: it runs as an in-process task (see :meth:`drain`).
    extract_mode: ExtractMode = "inline"
    #: Background extractions allowed to run at once.
    max_concurrent_extractions: int = 4
    # The cached properties holding this manager's extraction runners.
    _runner_names: tuple[str, ...] = ("_bg_extractions",)

    # --- what subclasses implement ---------------------------------------------------

    @abstractmethod
    async def extract(self, messages: list[Message]) -> list[Memory]:
        """Durable memories found in a finished conversation (may be empty)."""

    @abstractmethod
    async def retrieve(self, limit: int = 20) -> list[Memory]:
        """Stored memories for injection, most recently updated first."""

    @abstractmethod
    async def save(self, memories: list[Memory]) -> None:
        """Persist ``memories``, upserting by ``(type, key)``."""

    async def retrieve_relevant(self, query: str | None, limit: int | None = None) -> list[Memory]:
        """The memories most relevant to ``query``; this default ignores it (recency)."""
        return await (self.retrieve() if limit is None else self.retrieve(limit))

    # --- lifecycle ----------------------------------------------------------------------

    async def on_session_start(self, state: AgentState) -> AgentState:
        """A copy of ``state`` with one memory block for the latest user message.

        The block replaces one injected by an earlier turn; with nothing to inject, an
        old block is removed (its memories may have been deleted since).
        """
        memories = await self.retrieve_relevant(
            latest_user_text(checked_state(state, "on_session_start"))
        )
        if not memories:
            return strip_memory_blocks(state)
        injected = inject_memory_block(state, memories)
        await emit(
            EV_MEMORY_MANAGER_INJECTED,
            sender=type(self),
            memory_count=len(memories),
            types=[m.type.value for m in memories],
            **self._event_fields(),
        )
        return injected

    async def on_session_end(self, state: AgentState) -> None:
        """Extract and save this session's memories; failures are logged and emitted.

        The memory block is stripped first, so recalled memories are not extracted again
        as if the user had just said them.
        """
        messages = without_nul(strip_memory_blocks(checked_state(state, "on_session_end")).messages)
        await self._submit_extraction(messages)

    async def _submit_extraction(self, messages: list[Message]) -> None:
        if self.extract_mode == "background":
            fields = self._event_fields()
            self._bg_extractions.submit(
                self._extraction_order_key(), lambda: self._extract_and_save(messages, fields)
            )
            return
        await self._extract_and_save(messages, self._event_fields())

    async def run_extraction(
        self, messages: list[Message], *, before_save: BeforeSave | None = None
    ) -> ExtractionOutcome:
        """One extraction run, raising on failure (what the lifecycle hooks wrap).
        ``before_save`` is awaited right before the first write; if it raises, nothing
        is written."""
        memories = await self.extract(messages)
        if memories:
            if before_save is not None:
                await before_save()
            await self.save(memories)
        return ExtractionOutcome(
            memories, applied=[("SAVE", memory.type.value, memory.key) for memory in memories]
        )

    async def _extract_and_save(self, messages: list[Message], fields: dict[str, Any]) -> None:
        try:
            outcome = await self.run_extraction(messages)
        except (Exception, asyncio.CancelledError) as exc:
            # A cancelled extraction is lost work too: it is logged and emitted like a
            # failure (CancelledError is not an Exception), then the cancellation goes on.
            await self._extraction_failed(exc, "memory extraction failed", fields)
            if isinstance(exc, asyncio.CancelledError):
                raise
            return
        await emit(
            EV_MEMORY_MANAGER_EXTRACTED,
            sender=type(self),
            **outcome.event_fields(),
            mode=self.extract_mode,
            **fields,
        )

    async def _extraction_failed(
        self, exc: BaseException, doing: str, fields: dict[str, Any], what: str | None = None
    ) -> None:
        """Log (``exc``'s message at DEBUG only) and emit a failed extraction."""
        failure = failure_fields(exc, what)
        where = fields or type(self).__name__
        logger.error("%s (%s): %s", doing, where, failure["error"])
        logger.debug("%s (%s)", doing, where, exc_info=exc)
        await emit(
            EV_MEMORY_MANAGER_EXTRACT_FAILED,
            sender=type(self),
            **failure,
            mode=self.extract_mode,
            **fields,
        )

    def _event_fields(self) -> dict[str, Any]:
        """Extra fields of this manager's events (the namespace, for scoped managers)."""
        return {}

    def _extraction_order_key(self) -> Hashable:
        """Background jobs with the same key run one at a time, in submission order."""
        return ()

    # --- background jobs ------------------------------------------------------------------

    @functools.cached_property
    def _bg_extractions(self) -> BackgroundExtractions:
        return BackgroundExtractions(self.max_concurrent_extractions)

    def _started_runners(self) -> list[_Runner]:
        # The runners are cached properties: one not in __dict__ was never started.
        return [self.__dict__[name] for name in self._runner_names if name in self.__dict__]

    @property
    def pending_extractions(self) -> int:
        """Extractions scheduled or running and not seen finished yet (Celery jobs: those
        this manager enqueued; :meth:`drain` refreshes that view)."""
        return sum(runner.pending for runner in self._started_runners())

    async def drain(self) -> None:
        """Wait for every scheduled extraction (background tasks or Celery jobs), including
        ones submitted while waiting (their errors were logged and emitted, not raised
        here); cancelling leaves them running."""
        for runner in self._started_runners():
            await runner.drain()


class NoopMemoryManager(BaseMemoryManager):
    """Stores nothing and recalls nothing: the memory wiring without persistence."""

    async def extract(self, messages: list[Message]) -> list[Memory]:
        return []

    async def retrieve(self, limit: int = 20) -> list[Memory]:
        return []

    async def save(self, memories: list[Memory]) -> None:
        return None
