"""Type-strict equality of values and messages (what a chain treats as unchanged)."""

from __future__ import annotations

import json
import math

import pytest

from tulip_memory.chains.equality import same_item, same_message
from tulip_memory.messages import Message, Role, ToolCall


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (0, False),
        (1, True),
        (1, 1.0),
        (0.0, -0.0),
        (0, 0.0),
        ([1, 2], (1, 2)),
        ({"a": [1, {"b": 1}]}, {"a": [1, {"b": True}]}),
        ({"a": 1}, {"a": 1, "b": 1}),
        ([1], [1, 1]),
        (None, 0),
        ("1", 1),
    ],
    ids=repr,
)
def test_values_equal_in_python_but_written_differently_in_json_differ(a, b):
    assert same_item(a, b) is same_item(b, a) is False


@pytest.mark.parametrize(
    "value",
    [0, True, 1.5, -0.0, math.nan, math.inf, "x", None, [1, [True, None]], {"a": {"b": [0.0]}}],
    ids=repr,
)
def test_a_value_is_the_same_as_what_json_reads_back(value):
    assert same_item(value, json.loads(json.dumps(value))) is True


def test_dicts_in_another_key_order_differ():
    # Each loads back in its own order: a delta stores the reordered value.
    assert same_item({"a": 1, "b": 2}, {"b": 2, "a": 1}) is False


def _message(value: object) -> Message:
    return Message(
        Role.ASSISTANT,
        "text",
        tool_calls=[ToolCall("c1", "f", {"flag": value})],
        metadata={"flag": value},
    )


def test_messages_differing_only_in_a_type_differ():
    assert _message(1) == _message(True)  # what == says
    assert same_message(_message(1), _message(True)) is False
    assert same_message(_message(1), _message(1.0)) is False
    assert same_message(_message(0), _message(1)) is False
    assert same_message(_message(1), _message(1)) is True
    plain = Message(Role.USER, "hi")
    assert same_message(plain, Message(Role.USER, "hi")) is True
    assert same_message(plain, plain) is True
    assert same_message(Message(Role.USER, "hi", name="1"), Message(Role.USER, "hi")) is False
    only_metadata = [Message(Role.USER, "hi", metadata={"n": n}) for n in (1, True)]
    assert same_message(*only_metadata) is False
