"""tulip_memory.messages: roles, tool calls, JSON round trips and bad input."""

import copy
import json

import pytest

from tulip_memory.messages import Message, Role, ToolCall


def test_role_is_a_str_enum():
    assert Role.SYSTEM == "system" and Role("tool") is Role.TOOL
    assert [r.value for r in Role] == ["system", "user", "assistant", "tool"]


def test_round_trip_through_json_keeps_every_field():
    message = Message(
        Role.ASSISTANT,
        "calling",
        tool_calls=[ToolCall("c1", "search", {"q": "tulips", "n": 3})],
        name="planner",
        metadata={"turn": 2},
    )
    tool = Message(Role.TOOL, "result", tool_call_id="c1")
    for original in (message, tool, Message(Role.USER)):
        assert Message.from_dict(json.loads(json.dumps(original.to_dict()))) == original


def test_to_dict_leaves_out_empty_optional_fields():
    assert Message(Role.USER, "hi").to_dict() == {"role": "user", "content": "hi"}


def test_messages_compare_by_value_and_defaults_are_not_shared():
    a, b = Message(Role.USER, "x"), Message(Role.USER, "x")
    assert a == b
    a.metadata["k"] = 1
    assert b.metadata == {} and a != b


def test_plain_string_role_is_accepted():
    assert Message("user", "x").role is Role.USER  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"content": "no role"}, "role"),
        ({"role": "wizard"}, "Message.role"),
        ("not a dict", "role"),
    ],
)
def test_bad_input_names_the_problem(data, match):
    with pytest.raises(ValueError, match=match):
        Message.from_dict(data)


def test_content_must_be_text():
    with pytest.raises(ValueError, match="content"):
        Message(Role.USER, 42)  # type: ignore[arg-type]


@pytest.mark.parametrize("field", ["tool_calls", "metadata"])
def test_none_for_tool_calls_or_metadata_is_read_as_empty(field):
    # Accepted before, and then a manager crashed on it (TypeError / AttributeError).
    message = Message(Role.ASSISTANT, "hi", **{field: None})
    assert getattr(message, field) in ([], {})
    assert message == Message(Role.ASSISTANT, "hi")
    assert ToolCall("c1", "search", None).arguments == {}  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"tool_calls": [{"id": "c1", "name": "search"}]}, r"Message\.tool_calls\[0\] .*got dict"),
        (
            {"tool_calls": [ToolCall("c1", "search"), "search"]},
            r"Message\.tool_calls\[1\] must be a ToolCall, got str",
        ),
        ({"tool_calls": ToolCall("c1", "search")}, r"Message\.tool_calls must be a list.*ToolCall"),
        ({"metadata": ["turn", 2]}, r"Message\.metadata must be a dict, got list"),
        ({"tool_call_id": 7}, r"Message\.tool_call_id must be a str, got int"),
        ({"name": b"planner"}, r"Message\.name must be a str, got bytes"),
    ],
)
def test_a_bad_field_raises_value_error_naming_it(fields, match):
    snapshot = copy.deepcopy(fields)
    with pytest.raises(ValueError, match=match):
        Message(Role.ASSISTANT, "", **fields)
    assert fields == snapshot  # nothing was converted in place


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((1, "search"), r"ToolCall\.id must be a str, got int"),
        (("c1", None), r"ToolCall\.name must be a str, got NoneType"),
        (("c1", "search", '{"q": 1}'), r"ToolCall\.arguments must be a dict, got str"),
    ],
)
def test_a_bad_tool_call_raises_value_error_naming_the_field(args, match):
    with pytest.raises(ValueError, match=match):
        ToolCall(*args)


def test_from_dict_reads_an_openai_tool_call():
    data = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
            },
            {"id": "call_2", "type": "function", "function": {"name": "now", "arguments": ""}},
        ],
    }
    snapshot = copy.deepcopy(data)
    message = Message.from_dict(data)
    assert message == Message(
        Role.ASSISTANT,
        "",
        tool_calls=[ToolCall("call_1", "get_weather", {"city": "Oslo"}), ToolCall("call_2", "now")],
    )
    assert data == snapshot
    assert ToolCall.from_dict(data["tool_calls"][0]) == message.tool_calls[0]


@pytest.mark.parametrize(
    ("calls", "match"),
    [
        # The OpenAI shape used to raise a bare KeyError: 'name'.
        ([{"id": "c1", "type": "function"}], r"Message\.tool_calls\[0\]\.name missing"),
        (
            [{"name": "search"}, {"type": "function", "function": {"arguments": "{}"}}],
            r"Message\.tool_calls\[0\]\.id missing",
        ),
        (
            [{"id": "c", "name": "s"}, {"type": "function", "function": {"arguments": "{}"}}],
            r"Message\.tool_calls\[1\]\.id and Message\.tool_calls\[1\]\.function\.name missing",
        ),
        (
            [{"id": "c1", "function": {"name": "s", "arguments": "{not json"}}],
            r"Message\.tool_calls\[0\]\.function\.arguments is not valid JSON",
        ),
        (
            [{"id": "c1", "function": {"name": "s", "arguments": "[1, 2]"}}],
            r"Message\.tool_calls\[0\]\.function\.arguments must be a JSON object, got list",
        ),
        (
            [{"id": "c1", "function": "search"}],
            r"Message\.tool_calls\[0\]\.function must be a dict",
        ),
        ([{"id": 1, "name": "s"}], r"Message\.tool_calls\[0\]\.id must be a str, got int"),
        (["search"], r"Message\.tool_calls\[0\] must be a dict, got str"),
        ({"id": "c1"}, r"Message\.tool_calls must be a list, got dict"),
    ],
)
def test_from_dict_names_what_a_tool_call_is_missing(calls, match):
    data = {"role": "assistant", "tool_calls": calls}
    snapshot = copy.deepcopy(data)
    with pytest.raises(ValueError, match=match):
        Message.from_dict(data)
    assert data == snapshot


def test_from_dict_reads_null_fields_and_names_a_bad_metadata():
    assert Message.from_dict({"role": "user", "content": None, "metadata": None}) == Message(
        Role.USER
    )
    with pytest.raises(ValueError, match=r"Message\.metadata must be a dict, got str"):
        Message.from_dict({"role": "user", "metadata": "x"})
