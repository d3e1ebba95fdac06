"""tulip_memory.messages: roles, tool calls, JSON round trips and bad input."""

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
