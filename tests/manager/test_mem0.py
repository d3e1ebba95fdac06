"""Mem0MemoryManager against an in-process client.

TEST DOUBLE: ``InProcessMem0`` below follows mem0's async interface (``add`` / ``search`` /
``get_all`` with ``user_id`` / ``agent_id`` / ``run_id`` scopes, ``{"results": [...]}``
responses). Real mem0 needs an LLM service that cannot run here, and mem0ai is not
installed, so this double stands in for it; its "extraction" keeps each user message.
"""

from __future__ import annotations

import itertools

import pytest

from tests.manager.conftest import manager_events
from tulip_memory.events import EV_MEMORY_MANAGER_EXTRACT_FAILED, EV_MEMORY_MANAGER_EXTRACTED
from tulip_memory.manager import Memory, MemoryType
from tulip_memory.manager.mem0 import Mem0MemoryManager
from tulip_memory.messages import Message, Role
from tulip_memory.state import AgentState


class InProcessMem0:
    """Test double of ``mem0.AsyncMemory`` (see the module docstring)."""

    def __init__(self) -> None:
        self.rows: list[dict] = []
        self.calls: list[tuple[str, object, dict]] = []
        self._ids = itertools.count(1)

    @staticmethod
    def _scope(kwargs: dict) -> dict:
        scope = {k: kwargs[k] for k in ("user_id", "agent_id", "run_id") if kwargs.get(k)}
        if not scope:
            raise ValueError("at least one of user_id, agent_id, run_id is required")
        return scope

    def _in_scope(self, scope: dict) -> list[dict]:
        return [row for row in self.rows if all(row.get(k) == v for k, v in scope.items())]

    async def add(self, messages, *, metadata=None, infer=True, **kwargs):
        scope = self._scope(kwargs)
        self.calls.append(("add", messages, kwargs))
        texts = (
            [messages]
            if isinstance(messages, str)
            else [m["content"] for m in messages if m["role"] == "user"]
        )
        results = []
        for text in texts:
            row = {
                "id": str(next(self._ids)),
                "memory": text,
                "metadata": dict(metadata or {}),
                **scope,
            }
            self.rows.append(row)
            results.append({"id": row["id"], "memory": text, "event": "ADD"})
        return {"results": results}

    async def search(self, query, *, limit=100, **kwargs):
        self.calls.append(("search", query, kwargs))
        words = set(query.lower().split())
        hits = [
            r
            for r in self._in_scope(self._scope(kwargs))
            if words & set(r["memory"].lower().split())
        ]
        return {"results": [{**r, "score": 0.9} for r in hits[:limit]]}

    async def get_all(self, *, limit=100, **kwargs):
        self.calls.append(("get_all", None, kwargs))
        return {"results": list(reversed(self._in_scope(self._scope(kwargs))))[:limit]}


class FailingMem0(InProcessMem0):
    async def add(self, messages, **kwargs):
        raise ConnectionError("mem0 service unavailable")


def test_without_a_client_mem0_must_be_installed():
    with pytest.raises(ImportError, match=r"tulip-memory\[mem0\]"):
        Mem0MemoryManager(user_id="u1")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "user_id, agent_id or run_id"),
        ({"user_id": "u1", "retrieve_limit": -1}, "retrieve_limit"),
    ],
)
def test_bad_arguments_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Mem0MemoryManager(client=InProcessMem0(), **kwargs)


async def test_session_end_hands_the_conversation_without_the_block_to_add(sent_events):
    client = InProcessMem0()
    manager = Mem0MemoryManager(client=client, user_id="u1", agent_id="helper")
    state = AgentState(
        messages=[
            Message(Role.SYSTEM, "You help."),
            Message(Role.SYSTEM, "recalled", metadata={"tulip_memory_block": True}),
            Message(Role.USER, "I love hiking"),
            Message(Role.ASSISTANT, "Noted!"),
            Message(Role.TOOL, "tool output", tool_call_id="t1"),
        ]
    )
    await manager.on_session_end(state)
    assert client.calls == [
        (
            "add",
            [
                {"role": "user", "content": "I love hiking"},
                {"role": "assistant", "content": "Noted!"},
            ],
            {"user_id": "u1", "agent_id": "helper"},
        )
    ]
    assert [p for e, p in manager_events(sent_events) if e == EV_MEMORY_MANAGER_EXTRACTED] == [
        {"backend": "mem0", "message_count": 2}
    ]
    started = await manager.on_session_start(AgentState(messages=[Message(Role.USER, "hi")]))
    assert "I love hiking" in started.messages[0].content
    assert started.messages[0].metadata == {"tulip_memory_block": True}


async def test_retrieve_lists_or_searches_the_scope_only():
    client = InProcessMem0()
    mine = Mem0MemoryManager(client=client, user_id="u1", retrieve_limit=2)
    other = Mem0MemoryManager(client=client, user_id="u2")
    await mine.save(
        [
            Memory(MemoryType.USER, "diet", "vegetarian"),
            Memory(MemoryType.PROJECT, "db", "uses postgres"),
        ]
    )
    await mine.save([Memory(MemoryType.USER, "sport", "likes hiking")])
    await other.save([Memory(MemoryType.USER, "x", "likes postgres too")])
    listed = await mine.retrieve()
    assert [(m.type, m.key, m.content) for m in listed] == [
        (MemoryType.USER, "sport", "likes hiking"),
        (MemoryType.PROJECT, "db", "uses postgres"),
    ]
    assert client.calls[-1][0] == "get_all"
    searching = Mem0MemoryManager(client=client, user_id="u1", search_query="postgres")
    found = await searching.retrieve(5)
    assert [m.content for m in found] == ["uses postgres"]
    assert client.calls[-1] == ("search", "postgres", {"user_id": "u1"})
    assert found[0].metadata["score"] == 0.9


async def test_failing_mem0_is_logged_and_emitted_not_raised(sent_events):
    manager = Mem0MemoryManager(client=FailingMem0(), run_id="r1")
    await manager.on_session_end(AgentState(messages=[Message(Role.USER, "I love hiking")]))
    failed = [p for e, p in manager_events(sent_events) if e == EV_MEMORY_MANAGER_EXTRACT_FAILED]
    assert failed and failed[0]["error_type"] == "ConnectionError"


async def test_extract_is_empty_and_an_empty_conversation_is_not_sent():
    client = InProcessMem0()
    manager = Mem0MemoryManager(client=client, user_id="u1")
    assert await manager.extract([Message(Role.USER, "I love hiking")]) == []
    await manager.on_session_end(AgentState(messages=[Message(Role.SYSTEM, "only system")]))
    assert client.calls == []


async def test_save_checks_every_memory_before_the_first_add_and_blank_rows_are_not_recalled():
    client = InProcessMem0()
    manager = Mem0MemoryManager(client=client, user_id="u1")
    emptied = Memory(MemoryType.USER, "b", "ok")
    emptied.content = ""
    with pytest.raises(ValueError, match=r"memories\[1\]: Memory\.content is blank"):
        await manager.save([Memory(MemoryType.USER, "a", "ok"), emptied])
    with pytest.raises(ValueError, match=r"memories\[0\] must be a Memory"):
        await manager.save(["likes tea"])
    assert client.calls == []  # nothing was handed to mem0
    await manager.save([Memory(MemoryType.USER, "tea", "likes tea")])
    client.rows.append({**client.rows[0], "id": "blank", "memory": "  "})
    assert [m.content for m in await manager.retrieve()] == ["likes tea"]
