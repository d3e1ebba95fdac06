""":class:`Mem0MemoryManager`: long-term memory delegated to `mem0 <https://mem0.ai>`_,
which extracts and stores memories itself.
"""

from __future__ import annotations

import importlib.util
import inspect
import logging
from typing import Any

from tulip_memory.core.numbers import check_int
from tulip_memory.events import EV_MEMORY_MANAGER_EXTRACT_FAILED, EV_MEMORY_MANAGER_EXTRACTED, emit
from tulip_memory.manager.base import BaseMemoryManager
from tulip_memory.manager.block import strip_memory_blocks
from tulip_memory.manager.types import Memory, MemoryType, check_memories
from tulip_memory.messages import Message, Role, without_nul
from tulip_memory.state import AgentState, checked_state

__all__ = ["Mem0MemoryManager"]

logger = logging.getLogger("tulip_memory.manager")

_MEM0_ROLES = {Role.USER: "user", Role.ASSISTANT: "assistant"}


class Mem0MemoryManager(BaseMemoryManager):
    """Memory manager backed by mem0.

    Args:
        client: a mem0 async client; when ``None`` one is built from ``config`` (or
            mem0's defaults) on first use.
        config: the dict ``mem0.AsyncMemory.from_config`` takes.
        user_id / agent_id / run_id: mem0's scope; at least one is required.
        search_query: when set, :meth:`retrieve` ranks with ``client.search`` for it;
            otherwise it lists the scope with ``client.get_all``.
        retrieve_limit: most memories returned by :meth:`retrieve`.
    """

    def __init__(
        self,
        *,
        client: Any = None,
        config: dict[str, Any] | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        search_query: str | None = None,
        retrieve_limit: int = 20,
    ) -> None:
        if client is None and importlib.util.find_spec("mem0") is None:
            raise ImportError(
                "Mem0MemoryManager needs mem0 when no client is passed. Install it with:\n\n"
                "    pip install 'tulip-memory[mem0]'\n"
            )
        if config is not None and not isinstance(config, dict):
            raise ValueError(f"config must be a dict, got {type(config).__name__}")
        if not any((user_id, agent_id, run_id)):
            raise ValueError("Mem0MemoryManager needs a scope: user_id, agent_id or run_id")
        check_int(retrieve_limit, "retrieve_limit", 0)
        self._client: Any = client
        self._config = config
        self.user_id = user_id
        self.agent_id = agent_id
        self.run_id = run_id
        self.search_query = search_query
        self.retrieve_limit = retrieve_limit

    def _scope(self) -> dict[str, str]:
        scope = {"user_id": self.user_id, "agent_id": self.agent_id, "run_id": self.run_id}
        return {name: value for name, value in scope.items() if value}

    async def _get_client(self) -> Any:
        if self._client is None:
            from mem0 import AsyncMemory

            made = (
                AsyncMemory.from_config(self._config) if self._config is not None else AsyncMemory()
            )
            self._client = await made if inspect.isawaitable(made) else made
        return self._client

    async def extract(self, messages: list[Message]) -> list[Memory]:
        """mem0 extracts inside ``client.add`` (see :meth:`on_session_end`): nothing here."""
        return []

    async def retrieve(self, limit: int = 20) -> list[Memory]:
        """Memories of the scope: ranked for ``search_query`` if set, else listed."""
        top = min(limit, self.retrieve_limit)
        if top <= 0:
            return []
        client = await self._get_client()
        if self.search_query:
            response = await client.search(self.search_query, limit=top, **self._scope())
        else:
            response = await client.get_all(limit=top, **self._scope())
        rows = response.get("results", []) if isinstance(response, dict) else response
        memories: list[Memory] = []
        for row in [row for row in rows or [] if isinstance(row, dict)][:top]:
            text = row.get("memory") or row.get("text") or ""
            if not isinstance(text, str) or not text.strip():
                continue
            metadata = dict(row.get("metadata") or {})
            try:
                memory_type = MemoryType(metadata.pop("tulip_memory_type", MemoryType.REFERENCE))
            except ValueError:
                memory_type = MemoryType.REFERENCE
            key = str(metadata.pop("tulip_memory_key", None) or row.get("id") or text[:48])
            extra = {k: v for k, v in row.items() if k not in ("memory", "text", "metadata")}
            memories.append(Memory(memory_type, key, text, {**extra, **metadata}))
        return memories

    async def save(self, memories: list[Memory]) -> None:
        """Hand explicit memories to mem0, one ``add`` each, with their type and key."""
        check_memories(memories)
        if not memories:
            return
        client = await self._get_client()
        for memory in memories:
            metadata = {
                **memory.metadata,
                "tulip_memory_type": memory.type.value,
                "tulip_memory_key": memory.key,
            }
            await client.add(memory.content, metadata=metadata, **self._scope())

    async def on_session_end(self, state: AgentState) -> None:
        """Hand the conversation (without the memory block) to ``client.add``; a failure of
        mem0 is logged and emitted, never raised (a ``state`` that is not an AgentState is
        refused with ``ValueError``)."""
        state = checked_state(state, "on_session_end")
        conversation = [
            {"role": _MEM0_ROLES[m.role], "content": m.content}
            for m in without_nul(strip_memory_blocks(state).messages)
            if m.role in _MEM0_ROLES and m.content.strip()
        ]
        if not conversation:
            return
        try:
            client = await self._get_client()
            await client.add(conversation, **self._scope())
        except Exception as exc:
            logger.exception("mem0 add failed")
            await emit(
                EV_MEMORY_MANAGER_EXTRACT_FAILED,
                sender=type(self),
                backend="mem0",
                error=str(exc),
                error_type=type(exc).__name__,
                mode="inline",
            )
            return
        await emit(
            EV_MEMORY_MANAGER_EXTRACTED,
            sender=type(self),
            backend="mem0",
            message_count=len(conversation),
        )
