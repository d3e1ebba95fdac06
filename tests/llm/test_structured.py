"""StructuredOutput against the chat-server test double (tests/llm/chat_server.py):
JSON-schema response format, the tool-calling and text fallbacks, one repair, and the
error when the answer stays unusable."""

from __future__ import annotations

import logging

import pytest

from tests.llm.chat_server import Reply
from tests.llm.conftest import make_client
from tulip_memory.exceptions import LLMError
from tulip_memory.llm.structured import StructuredOutput, schema_problem

SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["colour", "count"],
    "properties": {
        "colour": {"type": "string", "enum": ["red", "blue"]},
        "count": {"type": "integer", "minimum": 0},
    },
}
ASK = [{"role": "user", "content": "colour and count?"}]


async def request(structured: StructuredOutput):
    return await structured.request(ASK, schema=SCHEMA, name="pick", max_tokens=100)


async def test_json_schema_response_format(server, client):
    server.add({"colour": "red", "count": 2})
    result = await request(StructuredOutput(client))
    assert result.value == {"colour": "red", "count": 2}
    assert result.mode == "json_schema" and not result.repaired
    body = server.requests[0].body
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "pick", "schema": SCHEMA, "strict": True},
    }
    assert "tools" not in body


async def test_tool_calling_when_the_server_refuses_json_schema(server, client, caplog):
    server.refuse_response_format = True
    server.add({"colour": "blue", "count": 0}, {"colour": "red", "count": 1})
    structured = StructuredOutput(client)
    with caplog.at_level(logging.INFO, logger="tulip_memory.llm"):
        first = await request(structured)
    assert first.value == {"colour": "blue", "count": 0} and first.mode == "tools"
    assert (first.usage.calls, first.usage.failed_requests) == (1, 1)  # the refused request
    assert "refused the json_schema" in caplog.text
    refused, asked = server.requests
    assert "response_format" in refused.body
    assert asked.body["tools"] == [
        {"type": "function", "function": {"name": "pick", "parameters": SCHEMA}}
    ]
    assert asked.body["tool_choice"] == {"type": "function", "function": {"name": "pick"}}
    # The mode that worked is remembered: the next call goes straight to tools.
    assert structured.mode == "tools"
    second = await request(structured)
    assert second.value["colour"] == "red" and second.mode == "tools"
    assert len(server.requests) == 3
    assert "tools" in server.requests[-1].body
    assert "response_format" not in server.requests[-1].body
    assert structured.mode == "tools"


async def test_a_prompt_refused_in_every_mode_keeps_the_mode(server, client):
    """A 400 caused by the prompt (over the context length) in every mode says nothing
    about the server's features: the next request still asks with the JSON schema."""
    too_long = "This model's maximum context length is 8192 tokens"
    server.add(*[Reply(status=400, content=too_long) for _ in range(3)])
    structured = StructuredOutput(client)
    with pytest.raises(LLMError) as caught:
        await request(structured)
    assert caught.value.kind == "rejected" and caught.value.status == 400
    assert caught.value.usage.failed_requests == 3  # json_schema, tools and text refused
    assert structured.mode == "json_schema"
    server.add({"colour": "red", "count": 1})
    result = await request(structured)
    assert result.mode == "json_schema" and result.value == {"colour": "red", "count": 1}
    assert "response_format" in server.requests[-1].body
    assert "tools" not in server.requests[-1].body


async def test_json_in_text_when_the_server_refuses_both(server, client):
    server.refuse_response_format = server.refuse_tools = True
    server.add(Reply(content='```json\n{"colour": "red", "count": 3}\n```'))
    result = await request(StructuredOutput(client))
    assert result.value == {"colour": "red", "count": 3} and result.mode == "text"
    last = server.requests[-1].body
    assert "tools" not in last and "response_format" not in last
    assert '"required":["colour","count"]' in last["messages"][-1]["content"]


async def test_a_fixed_mode_does_not_fall_back(server):
    server.refuse_tools = True
    client = make_client(server, STRUCTURED_OUTPUT="tools")
    with pytest.raises(LLMError) as caught:
        await request(StructuredOutput(client))
    assert caught.value.kind == "rejected" and len(server.requests) == 1


async def test_malformed_json_then_a_repaired_answer(server, client):
    server.add(Reply(content='{"colour": "red", "count": '), {"colour": "red", "count": 4})
    result = await request(StructuredOutput(client))
    assert result.value == {"colour": "red", "count": 4} and result.repaired
    assert result.usage.calls == 2
    repair = server.requests[1].body["messages"]
    assert repair[-2] == {"role": "assistant", "content": '{"colour": "red", "count": '}
    assert "not valid JSON" in repair[-1]["content"]


async def test_schema_mismatch_is_repaired_too(server, client):
    server.add({"colour": "green", "count": 1}, {"colour": "blue", "count": 1})
    result = await request(StructuredOutput(client))
    assert result.value["colour"] == "blue"
    assert "$.colour must be one of ['red', 'blue']" in server.requests[1].prompt_text


async def test_unusable_after_one_repair(server, client, caplog):
    raw = "I think red, maybe " + "x" * 2000
    server.add(Reply(content="not json"), Reply(content=raw))
    with (
        caplog.at_level(logging.DEBUG, logger="tulip_memory.llm"),
        pytest.raises(LLMError) as caught,
    ):
        await request(StructuredOutput(client))
    assert caught.value.kind == "malformed_output"
    assert caught.value.usage.calls == 2 and len(server.requests) == 2
    logged = [r.getMessage() for r in caplog.records if "raw answer" in r.getMessage()]
    assert logged and "I think red" in logged[0] and len(logged[0]) < 900  # truncated


async def test_transport_errors_carry_the_usage_so_far(server):
    client = make_client(server, MAX_RETRIES=0)
    server.add(Reply(content="nope"), Reply(status=500))
    with pytest.raises(LLMError) as caught:
        await request(StructuredOutput(client))
    assert caught.value.kind == "server_error" and caught.value.usage.calls == 1


def test_schema_problem():
    assert schema_problem({"colour": "red", "count": 1}, SCHEMA) is None
    assert schema_problem([], SCHEMA) == "$ must be object, got list"
    assert schema_problem({"colour": "red"}, SCHEMA) == "$ lacks the field 'count'"
    assert schema_problem({"colour": "red", "count": True}, SCHEMA) == (
        "$.count must be integer, got bool"
    )
    assert schema_problem({"colour": "red", "count": -1}, SCHEMA) == "$.count must be >= 0, got -1"
    assert "unknown fields ['x']" in schema_problem({"colour": "red", "count": 1, "x": 0}, SCHEMA)
    nullable = {"type": "array", "items": {"type": ["string", "null"]}}
    assert schema_problem(["a", None], nullable) is None
    assert schema_problem(["a", 1], nullable) == "$[1] must be string or null, got int"


async def test_bad_request_arguments(server, client):
    structured = StructuredOutput(client)
    with pytest.raises(ValueError, match="schema must be a JSON schema dict of an object"):
        await structured.request(ASK, schema={"type": "array"}, name="x", max_tokens=5)
    with pytest.raises(ValueError, match="name must be 1-64 letters"):
        await structured.request(ASK, schema=SCHEMA, name="bad name", max_tokens=5)
    assert server.requests == []


def test_bad_client_argument():
    with pytest.raises(ValueError, match="client must be a ChatClient"):
        StructuredOutput(object())  # type: ignore[arg-type]
