"""The labelled extraction corpus (tests/manager/consolidation_corpus.py) against the chat-server
test double: with the model's answers scripted, the store ends in exactly the expected
state, with the expected operations and history, after the expected number of calls."""

from __future__ import annotations

import pytest

from tests.llm.conftest import make_client
from tests.manager.consolidation_corpus import CASES, Case
from tests.manager.consolidation_helpers import PREFIX, conversation, decisions, facts, state
from tulip_memory.manager import LLMMemoryManager, Memory, MemoryType
from tulip_memory.manager.consolidation import LLMExtractor
from tulip_memory.messages import Message, Role, ToolCall
from tulip_memory.store import InMemoryStore


def test_the_corpus_is_large_enough():
    assert len(CASES) >= 30
    events = {event for case in CASES for event, *_ in case.operations}
    assert events == {"ADD", "UPDATE", "DELETE"}
    assert any(event == "NONE" for case in CASES for _, event, *_ in case.decisions or ())


def messages_of(case: Case) -> list[Message]:
    messages = conversation(*case.turns)
    if case.name == "tool results in the run":
        messages += [
            Message(Role.ASSISTANT, tool_calls=[ToolCall("c1", "weather", {"city": "Oslo"})]),
            Message(Role.TOOL, "sunny, 12 C " * 50, tool_call_id="c1"),
            Message(Role.ASSISTANT, "Sunny in Oslo."),
        ]
    return messages


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_case(server, case):
    manager = LLMMemoryManager(InMemoryStore(), namespace_prefix=PREFIX)
    await manager.save([Memory(MemoryType(t), k, c) for (t, k), c in case.existing.items()])
    server.add(facts(*case.facts))
    if case.decisions is not None:
        server.add(decisions(*case.decisions))
    report = await LLMExtractor(make_client(server)).run(messages_of(case), manager)

    assert await state(manager) == case.expected
    applied = [(o.event, o.type.value, o.key) for o in report.applied]
    assert sorted(applied) == sorted(case.operations)
    assert len(server.requests) == 1 + (case.decisions is not None)
    for (kind, key), count in case.versions.items():
        versions = await manager.history(kind, key)
        assert len(versions) == count
        assert all(v.valid_to is not None for v in versions[:-1])
    # Redelivered: nothing more is asked or applied.
    again = await LLMExtractor(make_client(server)).run(messages_of(case), manager)
    assert again.already_done and again.applied == []
    assert await state(manager) == case.expected
    assert len(server.requests) == 1 + (case.decisions is not None)
