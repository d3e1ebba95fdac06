"""Shared pieces of the extraction tests: scripted model answers and the store's state."""

from __future__ import annotations

from typing import Any

from tulip_memory.manager import LLMMemoryManager, MemoryType
from tulip_memory.messages import Message, Role

PREFIX = ("acme", "u1")


def facts(*items: tuple[str, str, str] | tuple[str, str, str, float]) -> dict[str, Any]:
    """A scripted extraction answer: ``(type, key, content[, confidence])`` per fact."""
    return {
        "facts": [
            {"type": t, "key": k, "content": c, "confidence": rest[0] if rest else 0.9}
            for t, k, c, *rest in items
        ]
    }


def decisions(*items: tuple[int, str] | tuple[int, str, str, str, str | None]) -> dict[str, Any]:
    """A scripted decision answer: ``(fact, event[, type, key, content])`` per decision."""
    rows = []
    for fact, event, *rest in items:
        kind, key, content = rest if rest else (None, None, None)
        rows.append({"fact": fact, "event": event, "type": kind, "key": key, "content": content})
    return {"decisions": rows}


def conversation(*turns: str) -> list[Message]:
    """Alternating user / assistant messages, the user first."""
    return [Message(Role.USER if i % 2 == 0 else Role.ASSISTANT, t) for i, t in enumerate(turns)]


async def state(manager: LLMMemoryManager) -> dict[tuple[str, str], str]:
    """Every memory of the manager's namespace: ``{(type, key): content}``."""
    found: dict[tuple[str, str], str] = {}
    for memory_type in MemoryType:
        namespace = (*manager.active_namespace, memory_type.value)
        for key in await manager.store.list_keys(namespace, limit=1000):
            value = await manager.store.get(namespace, key)
            found[(memory_type.value, key)] = value["content"]
    return found
