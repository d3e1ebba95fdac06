"""How DjangoSaver tells a list channel's unchanged items (tulip_memory.langgraph.chains).

A new version of a message list is stored as a splice of the saver's private copy of the
parent's list: the items both share are told apart by ``same_item``, which must never
call two different items the same (the splice would then miss a change).
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from tulip_memory.delta.splice import Splice
from tulip_memory.langgraph import DjangoSaver
from tulip_memory.langgraph.chains import same_item

SERDE = JsonPlusSerializer()


def _copy(value: Any) -> Any:
    """What the saver holds of a value it stored: a private copy, decoded."""
    return SERDE.loads_typed(SERDE.dumps_typed(value))


def _ai(**fields: Any) -> AIMessage:
    return AIMessage(content="4", id="a1", tool_calls=[], **fields)


@pytest.mark.parametrize(
    "a, b",
    [
        (HumanMessage("2 + 2?", id="h1"), HumanMessage("2 + 2?", id="h1")),
        (_ai(response_metadata={"model": "m"}), _ai(response_metadata={"model": "m"})),
        (
            ToolMessage("4", tool_call_id="c1", id="t1"),
            ToolMessage("4", tool_call_id="c1", id="t1"),
        ),
        ({"role": "user", "content": "hi"}, {"role": "user", "content": "hi"}),
        ("text", "text"),
        (3, 3.0),
    ],
)
def test_equal_items_are_the_same(a: Any, b: Any) -> None:
    assert a == b
    assert same_item(a, b)
    assert same_item(a, _copy(b))


@pytest.mark.parametrize(
    "a, b",
    [
        (HumanMessage("2 + 2?", id="h1"), HumanMessage("2 + 3?", id="h1")),
        (HumanMessage("2 + 2?", id="h1"), HumanMessage("2 + 2?", id="h2")),
        (HumanMessage("4", id="x"), AIMessage("4", id="x")),
        (_ai(response_metadata={"model": "m"}), _ai(response_metadata={"model": "n"})),
        # An extra field (LangChain's messages allow them) is not in the fields' dict.
        (HumanMessage("hi", id="h1", lang="en"), HumanMessage("hi", id="h1", lang="fr")),
        (HumanMessage("hi", id="h1", lang="en"), HumanMessage("hi", id="h1")),
        ({"role": "user", "content": "hi"}, {"role": "user", "content": "ho"}),
        (HumanMessage("hi", id="h1"), {"content": "hi", "id": "h1"}),
    ],
)
def test_different_items_are_not(a: Any, b: Any) -> None:
    assert a != b
    assert not same_item(a, b)
    assert not same_item(b, a)


def test_the_splice_of_an_appended_turn_holds_the_new_messages_only() -> None:
    old = [HumanMessage("2 + 2?", id="h1"), _ai()]
    new = [*old, HumanMessage("and 3 + 3?", id="h2")]
    splice = Splice.between(_copy(old), new, same_item)
    assert (splice.at, splice.removed, splice.inserted) == (2, 0, [new[2]])
    # An edit of an earlier message is in the splice.
    edited = [HumanMessage("2 + 5?", id="h1"), *new[1:]]
    splice = Splice.between(_copy(new), edited, same_item)
    assert (splice.at, splice.removed, splice.inserted) == (0, 1, [edited[0]])


@pytest.mark.django_db(transaction=True)
def test_a_message_changed_in_place_after_its_put_is_stored_anew() -> None:
    """The graph's own message objects may be changed after a put (a node editing the
    state in place): the next delta compares with the saver's copy, not the object."""
    saver = DjangoSaver(tenant="acme")
    question = HumanMessage("2 + 2?", id="h1")
    first = empty_checkpoint()
    first["channel_values"] = {"messages": [question]}
    first["channel_versions"] = {"messages": saver.get_next_version(None, None)}
    config = saver.put(
        {"configurable": {"thread_id": "in-place", "checkpoint_ns": ""}},
        first,
        {"step": 0},
        first["channel_versions"],
    )
    question.content = "2 + 5?"
    second = empty_checkpoint()
    second["channel_values"] = {"messages": [question, _ai()]}
    second["channel_versions"] = {
        "messages": saver.get_next_version(first["channel_versions"]["messages"], None)
    }
    child = saver.put(config, second, {"step": 1}, second["channel_versions"])
    stored = DjangoSaver(tenant="acme").get_tuple(child)
    assert stored.checkpoint["channel_values"]["messages"] == [question, _ai()]
    assert stored.checkpoint["channel_values"]["messages"][0].content == "2 + 5?"
    # Its parent keeps what it was given.
    parent = DjangoSaver(tenant="acme").get_tuple(config)
    assert parent.checkpoint["channel_values"]["messages"][0].content == "2 + 2?"
