"""Summarising conversation management: older turns folded into one summary message.

Past ``threshold`` messages the older ones become a summary, ``keep_recent`` at least
stay; the cut sits on a grid at a turn boundary, so the prefix stays byte-identical between
compactions and ``apply(apply(x)) == apply(x)``. A failing summariser loses nothing (the
history comes back, ``memory.compactor.failed`` is sent); docs/conversation.md.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from asgiref.sync import async_to_sync

from tulip_memory.conversation.base import ConversationManager, check_bool, check_messages
from tulip_memory.conversation.cache import CachedSummary, Key, SummaryCache
from tulip_memory.conversation.summary import (
    covered_count,
    fallback_summary,
    is_summary,
    summary_message,
)
from tulip_memory.conversation.turns import last_boundary_at_or_before, leading_system_count
from tulip_memory.core.numbers import check_int
from tulip_memory.events import (
    EV_MEMORY_COMPACTOR_COMPLETED,
    EV_MEMORY_COMPACTOR_FAILED,
    EV_MEMORY_COMPACTOR_TRIGGERED,
    emit,
    emit_sync,
)
from tulip_memory.messages import Message, Role

logger = logging.getLogger("tulip_memory.conversation")

SummarizeFn: TypeAlias = Callable[[list[Message]], str | Awaitable[str]]

# One per live conversation of a shared manager, plus superseded ones until evicted.
DEFAULT_CACHE_SIZE = 1024


@dataclass
class _Compaction:
    """What one pass has to do: summarise ``chunk`` and keep ``rest[done:]``."""

    history: list[Message]
    kept_front: list[Message]
    rest: list[Message]
    done: int
    covered: int
    chunk: list[Message]
    base: CachedSummary | None
    key: Key
    messages_before: int
    started: float = field(default_factory=time.perf_counter)

    def result(self, text: str) -> list[Message]:
        managed = list(self.kept_front)
        managed.append(summary_message(text, self.covered))
        managed.extend(self.rest[self.done :])
        return managed

    # Each event's fields in one fixed order: logs and the demo print them so.
    def triggered_fields(self, threshold: int) -> dict[str, Any]:
        return {
            "strategy": "summarizing",
            "threshold": threshold,
            "messages_before": self.messages_before,
            "summarized_count": self.covered,
            "incremental": self.base is not None,
        }

    def completed_fields(self, messages_after: int) -> dict[str, Any]:
        return {
            "strategy": "summarizing",
            "messages_before": self.messages_before,
            "messages_after": messages_after,
            "summarized_count": self.covered,
            "incremental": self.base is not None,
            "duration_ms": self.elapsed_ms(),
        }

    def failed_fields(self, error: BaseException) -> dict[str, Any]:
        return {
            "strategy": "summarizing",
            "messages_before": self.messages_before,
            "summarized_count": self.covered,
            "error_type": type(error).__name__,
            "error": str(error),
            "duration_ms": self.elapsed_ms(),
        }

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000


class SummarizingManager(ConversationManager):
    """Replaces the older part of a long history with one summary message."""

    _repr_fields = ("threshold", "keep_recent", "summarize_fn", "preserve_system", "cache_size")

    def __init__(
        self,
        threshold: int = 30,
        keep_recent: int = 10,
        summarize_fn: SummarizeFn | None = None,
        preserve_system: bool = True,
        *,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        self.threshold = check_int(threshold, "threshold", 2)
        self.keep_recent = check_int(keep_recent, "keep_recent", 1)
        if keep_recent >= threshold:
            raise ValueError(
                f"keep_recent must be less than threshold ({threshold}), got {keep_recent}"
            )
        if summarize_fn is not None and not callable(summarize_fn):
            raise ValueError(
                f"summarize_fn must be a callable or None, got {type(summarize_fn).__name__}"
            )
        self.summarize_fn = summarize_fn
        self.preserve_system = check_bool("preserve_system", preserve_system)
        self._summary_cache = SummaryCache(check_int(cache_size, "cache_size", 0))

    @property
    def cache_size(self) -> int:
        return self._summary_cache.maxsize

    def apply(self, messages: list[Message]) -> list[Message]:
        plan = self._plan(messages)
        if isinstance(plan, list):
            return plan
        emit_sync(
            EV_MEMORY_COMPACTOR_TRIGGERED,
            sender=type(self),
            **plan.triggered_fields(self.threshold),
        )
        try:
            text = self._summarize(plan.chunk)
        except Exception as error:
            self._log_failure(plan)
            emit_sync(EV_MEMORY_COMPACTOR_FAILED, sender=type(self), **plan.failed_fields(error))
            return plan.history
        managed = self._finish(plan, text)
        emit_sync(
            EV_MEMORY_COMPACTOR_COMPLETED, sender=type(self), **plan.completed_fields(len(managed))
        )
        return managed

    async def async_apply(self, messages: list[Message]) -> list[Message]:
        plan = self._plan(messages)
        if isinstance(plan, list):
            return plan
        await emit(
            EV_MEMORY_COMPACTOR_TRIGGERED,
            sender=type(self),
            **plan.triggered_fields(self.threshold),
        )
        try:
            text = await self._async_summarize(plan.chunk)
        except Exception as error:
            self._log_failure(plan)
            await emit(EV_MEMORY_COMPACTOR_FAILED, sender=type(self), **plan.failed_fields(error))
            return plan.history
        managed = self._finish(plan, text)
        await emit(
            EV_MEMORY_COMPACTOR_COMPLETED, sender=type(self), **plan.completed_fields(len(managed))
        )
        return managed

    def _log_failure(self, plan: _Compaction) -> None:
        logger.exception(
            "summarize_fn %s failed on %d messages; the history (%d messages) is left unsummarised",
            getattr(self.summarize_fn, "__qualname__", type(self.summarize_fn).__qualname__),
            len(plan.chunk),
            len(plan.history),
        )

    def _plan(self, messages: list[Message]) -> list[Message] | _Compaction:
        """The managed history when no summarising is needed, else the work to do."""
        history = check_messages(messages)
        pinned = leading_system_count(history) if self.preserve_system else 0
        # A system note in mid-run is conversation, summarised with it.
        kept_front = [m for m in history[:pinned] if not is_summary(m)]
        earlier = [m for m in history[:pinned] if is_summary(m)]
        body = history[pinned:]
        # Without preserve_system an earlier summary heads the body: it is not a recent message.
        lead = next((i for i, m in enumerate(body) if not is_summary(m)), len(body))
        earlier.extend(body[:lead])
        body = body[lead:]
        if len(body) <= self.threshold:
            return history

        # The grid covers what earlier summaries stand for: a pass's output, fed back, is cut
        # where the full history would be, so a second pass finds nothing to do.
        offset = sum(covered_count(m) for m in earlier)
        period = self.threshold - self.keep_recent + 1
        total = offset + len(body)
        grid_cut = ((total - self.threshold - 1) // period + 1) * period - offset
        cut = self._cut(body, grid_cut)
        if cut == 0:
            return history

        rest = earlier + body
        done = len(earlier) + cut
        covered = offset + cut
        covered += sum(covered_count(m) - 1 for m in body[:cut] if m.role == Role.SYSTEM)
        # messages_before counts the conversation, not the pinned instructions.
        messages_before = len(history)
        if self.preserve_system:
            messages_before -= [m.role for m in history].count(Role.SYSTEM)
        found = self._summary_cache.lookup(rest, done, self.summarize_fn)
        compaction = _Compaction(
            history, kept_front, rest, done, covered, [], found.summary, found.key, messages_before
        )
        if found.summary is None:
            compaction.chunk = rest[:done]
        elif found.length == done:
            return compaction.result(found.summary.text)
        else:
            earlier_summary = summary_message(found.summary.text, found.summary.covered)
            compaction.chunk = [earlier_summary, *rest[found.length : done]]
        return compaction

    def _cut(self, body: list[Message], grid_cut: int) -> int:
        """Where the recent part of ``body`` starts (0: no cut): the last turn boundary at or
        before ``grid_cut``, so tool results keep their assistant message; with
        preserve_system, never on a system note, which the next pass would pin."""
        cut = last_boundary_at_or_before(body, grid_cut)
        while self.preserve_system and cut > 0 and body[cut].role == Role.SYSTEM:
            cut = last_boundary_at_or_before(body, cut - 1)
        return cut

    def _finish(self, plan: _Compaction, text: str) -> list[Message]:
        self._summary_cache.put(plan.key, CachedSummary(text, plan.covered, self.summarize_fn))
        return plan.result(text)

    def _summarize(self, chunk: list[Message]) -> str:
        if self.summarize_fn is None:
            return fallback_summary(chunk)
        outcome = self.summarize_fn(list(chunk))
        if inspect.isawaitable(outcome):
            pending = outcome
            try:
                outcome = async_to_sync(_await)(pending)
            except BaseException:
                if inspect.iscoroutine(pending):
                    pending.close()
                raise
        return _checked_summary(outcome)

    async def _async_summarize(self, chunk: list[Message]) -> str:
        if self.summarize_fn is None:
            return fallback_summary(chunk)
        if _is_async_callable(self.summarize_fn):
            outcome = self.summarize_fn(list(chunk))
        else:
            # A sync summariser usually blocks on a network call: keep the loop free.
            outcome = await asyncio.to_thread(self.summarize_fn, list(chunk))
        if inspect.isawaitable(outcome):
            outcome = await outcome
        return _checked_summary(outcome)


def _is_async_callable(fn: object) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - an object with an async __call__
    )


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def _checked_summary(outcome: object) -> str:
    if not isinstance(outcome, str):
        raise ValueError(f"summarize_fn must return a str, got {type(outcome).__name__}")
    if not outcome.strip():
        raise ValueError("summarize_fn returned an empty summary")
    return outcome
