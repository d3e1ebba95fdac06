"""Shared pieces of the extraction tests: scripted model answers and the store's state."""

from __future__ import annotations

from typing import Any

from tests.llm.chat_server import Reply
from tulip_memory.manager import LLMMemoryManager, MemoryType
from tulip_memory.messages import Message, Role

PREFIX = ("acme", "u1")

# How a chat model fails, as the test double scripts it after a good facts answer (so the
# run has spent tokens already): client options, the failing replies, the expected reason.
MODEL_FAILURES = {
    "timeout": (
        {"TIMEOUT": 0.3, "MAX_RETRIES": 1},
        [Reply(delay=2.0), Reply(delay=2.0)],
        "timeout",
    ),
    "5xx after the retries": (
        {"MAX_RETRIES": 2},
        [Reply(status=500), Reply(status=502), Reply(status=503)],
        "server_error",
    ),
    "429 after the retries": (
        {"MAX_RETRIES": 1},
        [Reply(status=429, headers={"Retry-After": "0.1"})] * 2,
        "rate_limited",
    ),
    "malformed after the repair": (
        {},
        [Reply(content="not json at all"), Reply(content='{"facts": "still wrong"}')],
        "malformed_output",
    ),
}


def failed_requests(replies: list[Reply], reason: str) -> int:
    """The requests of a ``MODEL_FAILURES`` case that get no answer: all of them, but when
    the server answers with unusable output."""
    return 0 if reason == "malformed_output" else len(replies)


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
