"""MemoryCheckpointer: checkpoints in a dict of this process (tests, throw-away runs)."""

from __future__ import annotations

import copy
from typing import Any

from tulip_memory.backends.base import BaseCheckpointer
from tulip_memory.state import AgentState

__all__ = ["MemoryCheckpointer"]


class MemoryCheckpointer(BaseCheckpointer):
    """Keeps deep copies of the saved states in memory; lost when the process exits."""

    def __init__(self) -> None:
        # thread id -> checkpoint id -> snapshot, in save order (dicts keep insertion order).
        self._threads: dict[str, dict[str, dict[str, Any]]] = {}

    async def _save(
        self, state: AgentState, thread_id: str, checkpoint_id: str, *, may_exist: bool
    ) -> None:
        snapshot = copy.deepcopy(state.to_checkpoint())  # may raise: before any change
        # No await between reading and writing the dicts: atomic for asyncio tasks.
        checkpoints = self._threads.setdefault(thread_id, {})
        checkpoints.pop(checkpoint_id, None)
        checkpoints[checkpoint_id] = snapshot

    async def _load(self, thread_id: str, checkpoint_id: str | None) -> AgentState | None:
        checkpoints = self._threads.get(thread_id)
        if not checkpoints:
            return None
        if checkpoint_id is None:
            checkpoint_id = next(reversed(checkpoints))
        snapshot = checkpoints.get(checkpoint_id)
        return None if snapshot is None else AgentState.from_checkpoint(copy.deepcopy(snapshot))

    async def _list(self, thread_id: str, limit: int) -> list[str]:
        checkpoints = self._threads.get(thread_id, {})
        return list(reversed(checkpoints))[:limit]

    async def _delete(self, thread_id: str, checkpoint_id: str | None) -> bool:
        if checkpoint_id is None:
            return bool(self._threads.pop(thread_id, None))
        checkpoints = self._threads.get(thread_id, {})
        deleted = checkpoints.pop(checkpoint_id, None) is not None
        if not checkpoints:
            self._threads.pop(thread_id, None)
        return deleted
