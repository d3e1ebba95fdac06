"""LLMSummarizer as SummarizingManager's summarize_fn, against the chat-server test double
(tests/llm/chat_server.py): incremental input, compact tool rendering, bounded output,
redaction and the manager's failure path."""

from __future__ import annotations

import pytest

from tests.llm.chat_server import Reply
from tests.llm.conftest import make_client
from tests.llm.redaction_corpus import KEY_SESSION, key_material_in
from tulip_memory.conversation import SummarizingManager
from tulip_memory.conversation.summary import is_summary
from tulip_memory.llm.summarizer import LLMSummarizer
from tulip_memory.llm.usage import Usage
from tulip_memory.messages import Message, Role, ToolCall


def turns(start: int, stop: int) -> list[Message]:
    return [
        Message(Role.USER if i % 2 == 0 else Role.ASSISTANT, f"turn {i}")
        for i in range(start, stop)
    ]


async def test_incremental_input(server):
    summarizer = LLMSummarizer(make_client(server))
    manager = SummarizingManager(threshold=6, keep_recent=2, summarize_fn=summarizer)
    system = Message(Role.SYSTEM, "You are helpful.")
    server.add(Reply(content="S1: turns 0-4 discussed."), Reply(content="S2: up to turn 9."))

    first = await manager.async_apply([system, *turns(0, 7)])
    assert is_summary(first[1]) and "S1: turns 0-4 discussed." in first[1].content
    sent = server.requests[0].body["messages"]
    assert sent[0]["role"] == "system" and "running summary" in sent[0]["content"]
    assert "Summary so far:\n(none)" in sent[1]["content"]
    assert "user: turn 0" in sent[1]["content"] and "You are helpful." not in sent[1]["content"]

    # The history grows; the next pass sends the first summary and only the new messages.
    second = await manager.async_apply([*first, *turns(7, 12)])
    assert "S2: up to turn 9." in second[1].content
    prompt = server.requests[1].body["messages"][1]["content"]
    assert "Summary so far:\nS1: turns 0-4 discussed." in prompt
    new_part = prompt.split("New messages:\n", 1)[1]
    assert "turn 0" not in new_part and "turn 4" not in new_part
    assert "assistant: turn 5" in new_part and "turn 11" not in new_part
    assert server.requests[1].body["max_tokens"] == summarizer.max_tokens
    assert summarizer.usage.calls == 2


async def test_tool_calls_and_results_are_rendered_compactly(server):
    summarizer = LLMSummarizer(make_client(server), tool_chars=40)
    server.add(Reply(content="Looked up the weather."))
    await summarizer(
        [
            Message(Role.USER, "weather in Oslo?"),
            Message(
                Role.ASSISTANT,
                tool_calls=[ToolCall("c1", "get_weather", {"city": "Oslo", "unit": "C"})],
            ),
            Message(Role.TOOL, "sunny " * 500, tool_call_id="c1"),
            Message(Role.ASSISTANT, "It is sunny."),
        ]
    )
    prompt = server.requests[0].body["messages"][1]["content"]
    assert 'assistant: -> tool get_weather(city="Oslo", unit="C")' in prompt
    (result_line,) = [line for line in prompt.splitlines() if line.startswith("tool get_weather")]
    assert len(result_line) < 70 and result_line.endswith("…")


async def test_output_is_bounded(server):
    summarizer = LLMSummarizer(make_client(server), max_tokens=20)
    server.add(Reply(content="First point. " * 40))
    text = await summarizer([Message(Role.USER, "long story")])
    assert len(text) <= 20 * 4 and text.endswith(".")


async def test_secrets_are_redacted_before_the_model(server):
    summarizer = LLMSummarizer(make_client(server))
    server.add(Reply(content="ok"))
    await summarizer([Message(Role.USER, "my password is hunter2")])
    assert "hunter2" not in server.requests[0].prompt_text


async def test_a_key_longer_than_the_tool_cut_is_redacted_whole(server):
    """A private key read by a tool (and passed to another) is redacted before the tool
    result and arguments are cut: none of it is sent, its END marker beyond the cut or not."""
    summarizer = LLMSummarizer(make_client(server))
    server.add(Reply(content="The deploy key was copied to the server."))
    await summarizer(KEY_SESSION)
    (request,) = server.requests
    sent = request.prompt_text
    assert key_material_in(sent) == []
    assert "tool read_file -> [REDACTED:private_key]" in sent
    assert 'write_file(path="/srv/id_rsa", content="[REDACTED:private_key]")' in sent


async def test_a_failure_leaves_the_history_unsummarised(server):
    summarizer = LLMSummarizer(make_client(server, MAX_RETRIES=0))
    manager = SummarizingManager(threshold=4, keep_recent=2, summarize_fn=summarizer)
    history = turns(0, 6)
    server.add(Reply(status=500))
    assert await manager.async_apply(history) == history
    assert summarizer.usage == Usage(failed_requests=1)  # the failed call is counted
    server.add(Reply(content="   "))
    assert await manager.async_apply(history) == history
    assert (summarizer.usage.calls, summarizer.usage.failed_requests) == (1, 1)


def test_the_sync_apply_path(server):
    summarizer = LLMSummarizer(make_client(server))
    manager = SummarizingManager(threshold=4, keep_recent=2, summarize_fn=summarizer)
    server.add(Reply(content="Summary."))
    managed = manager.apply(turns(0, 6))
    assert is_summary(managed[0]) and managed[0].content.endswith("Summary.")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_tokens": 0}, "max_tokens must be an int >= 1"),
        ({"tool_chars": "x"}, "tool_chars must be an int >= 1"),
        ({"redactor": "all"}, "redactor must be a Redactor"),
    ],
)
def test_bad_arguments(client, options, message):
    with pytest.raises(ValueError, match=message):
        LLMSummarizer(client, **options)
