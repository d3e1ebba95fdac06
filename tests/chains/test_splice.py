"""How DjangoSaver tells a list channel's unchanged items (tulip_memory.chains.channels).

A new version of a message list is stored as a splice of the saver's private copy of the
parent's list: the items both share are told apart by ``same_item``, which must never
call two different items the same (the splice would then miss a change).
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any, NamedTuple

import numpy as np
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from tulip_memory.chains.channels import Head, encode
from tulip_memory.chains.equality import key_of, same_item
from tulip_memory.chains.splice import Splice
from tulip_memory.langgraph import DjangoSaver

SERDE = JsonPlusSerializer()
EST = timezone(timedelta(hours=-5))


class Point(NamedTuple):
    x: Any
    y: Any


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
        (3, 3),
        (2.5, 2.5),
        ([1, {"a": [2.0, "x", None]}], [1, {"a": [2.0, "x", None]}]),
        (HumanMessage("hi", id="h1", additional_kwargs={"n": 1}),) * 2,
        (Decimal("1.5"), Decimal("1.5")),
        (Point(1, 2.0), Point(1, 2.0)),
    ],
)
def test_equal_items_are_the_same(a: Any, b: Any) -> None:
    assert a == b
    assert same_item(a, b)
    assert same_item(a, _copy(b))
    # Where both have a key, the keys are equal.
    assert key_of(a) is None or key_of(a) == key_of(b) == key_of(_copy(b))


def _same_by_key(a: Any, b: Any) -> bool:
    return key_of(a) is not None and key_of(a) == key_of(b)


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
        # Equal to ``==``, yet each loads back as itself: type-strict at every level.
        (3, 3.0),
        (0, False),
        (1, True),
        ({"score": 1}, {"score": 1.0}),
        ({"ok": 0}, {"ok": False}),
        ([1, [2]], [1, [2.0]]),
        ((1, 2), (1.0, 2)),
        ({1: "x"}, {1.0: "x"}),
        ({1}, {1.0}),
        (0.0, -0.0),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}),
        (Decimal("1.0"), Decimal("1.00")),
        (datetime(2026, 1, 1, 12, tzinfo=UTC), datetime(2026, 1, 1, 7, tzinfo=EST)),
        (Point(1, 2), Point(1, 2.0)),
        (
            HumanMessage("hi", id="h1", additional_kwargs={"n": 1}),
            HumanMessage("hi", id="h1", additional_kwargs={"n": 1.0}),
        ),
        (
            _ai(response_metadata={"usage": {"tokens": 1}}),
            _ai(response_metadata={"usage": {"tokens": True}}),
        ),
    ],
)
def test_different_items_are_not(a: Any, b: Any) -> None:
    assert not same_item(a, b)
    assert not same_item(b, a)
    assert not _same_by_key(a, b)
    assert not _same_by_key(b, a)


def test_a_message_of_plain_fields_has_a_key_and_one_msgpack_blurs_has_none() -> None:
    assert key_of(HumanMessage("hi", id="h1")) == key_of(_copy(HumanMessage("hi", id="h1")))
    assert key_of(HumanMessage("hi", id="h1")) != key_of(AIMessage("hi", id="h1"))
    # bytes and bytearray pack alike; tuples, subclasses, dates and Decimals pack as others.
    for blurred in (b"x", bytearray(b"x"), (1, 2), Point(1, 2), Decimal(1), datetime.now(UTC)):
        assert key_of(HumanMessage("hi", additional_kwargs={"v": blurred})) is None
    assert not _same_by_key(
        HumanMessage("hi", additional_kwargs={"v": b"x"}),
        HumanMessage("hi", additional_kwargs={"v": bytearray(b"x")}),
    )
    # Extra fields are not in the fields' dict: compared by same_item.
    assert key_of(HumanMessage("hi", lang="en")) is None


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


def _put_twice(saver: Any, first: list[Any], second: list[Any]) -> tuple[Any, Any]:
    """Put ``first``, then ``second`` as its child; the child's config and list as loaded."""
    config: Any = {"configurable": {"thread_id": "strict", "checkpoint_ns": ""}}
    version = None
    for checkpoint_id, items in (("1", first), ("2", second)):
        version = saver.get_next_version(version, None)
        checkpoint = empty_checkpoint()
        checkpoint["id"] = checkpoint_id
        checkpoint["channel_values"] = {"items": items}
        checkpoint["channel_versions"] = {"items": version}
        config = saver.put(config, checkpoint, {"step": int(checkpoint_id)}, {"items": version})
    return config, saver.get_tuple(config).checkpoint["channel_values"]["items"]


def _numpy_cases() -> list[Any]:
    return [
        ([np.array([1.0, 2.0])], [np.array([1.0, 2.0]), np.array([3.0, 4.0])]),
        ([np.array([1, 2]), "x"], [np.array([1.0, 2.0]), "x", "y"]),
        ([np.array([1.0, 2.0])], [np.array([1.0, 5.0]), np.array([1.0])]),
    ]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "first, second",
    [
        ([0, 1, 2], [False, True, 2]),
        ([1, 2, 3], [1.0, 2.5, 3]),
        ([{"score": 1}, {"ok": 0}], [{"score": 1.0}, {"ok": False}]),
        ([0.0, "x"], [-0.0, "x", "y"]),
        ([{"a": 1, "b": 2}, "x"], [{"b": 2, "a": 1}, "x", "y"]),
        ([Decimal("1.0"), "x"], [Decimal("1.00"), "x", "y"]),
        (
            [HumanMessage("hi", id="h1", additional_kwargs={"n": 1}), HumanMessage("a", id="h2")],
            [
                HumanMessage("hi", id="h1", additional_kwargs={"n": 1.0}),
                HumanMessage("a", id="h2"),
                HumanMessage("b", id="h3"),
            ],
        ),
        pytest.param(None, None, id="numpy"),
    ],
)
def test_a_list_loads_as_in_memory_saver_gives_it_back(first: Any, second: Any) -> None:
    """Items equal to ``==`` but not alike (0 and False, 1 and 1.0, NumPy's arrays whose
    ``==`` is element-wise) load back as they were put, not as the parent's item."""
    cases = _numpy_cases() if first is None else [(first, second)]
    for old, new in cases:
        _, expected = _put_twice(InMemorySaver(), old, new)
        saver = DjangoSaver(tenant="acme")
        config, got = _put_twice(saver, old, new)
        fresh = DjangoSaver(tenant="acme").get_tuple(config).checkpoint["channel_values"]["items"]
        assert repr(got) == repr(expected)
        assert repr(fresh) == repr(expected)
        assert [type(item) for item in fresh] == [type(item) for item in expected]
        saver.delete_thread("strict")


def test_without_ormsgpack_items_are_compared_by_same_item(monkeypatch) -> None:
    monkeypatch.delitem(sys.modules, "ormsgpack")
    assert key_of(HumanMessage("hi", id="h1")) is None
    head = Head("v", (HumanMessage("hi", id="h1"),))
    assert head.packed is None
    assert not head.starts([HumanMessage("hi", id="h1")])
    # The splice is then taken item by item.
    stored = encode("messages", "w", [HumanMessage("hi", id="h1"), _ai()], head, SERDE.dumps_typed)
    assert stored.entry.parent_version == "v"


def test_a_head_tells_an_appended_turn_in_one_pass_and_any_change_before_it() -> None:
    old = [HumanMessage("2 + 2?", id="h1"), _ai(response_metadata={"n": 1})]
    head = Head("v", tuple(_copy(old)))
    assert head.starts([*old, HumanMessage("and 3 + 3?", id="h2")])
    assert head.starts(list(old))
    assert not head.starts(old[:1])
    for changed in (
        HumanMessage("2 + 2?", id="h1", lang="en"),  # an extra field
        AIMessage("2 + 2?", id="h1"),  # another class
        HumanMessage("2 + 2?", id="h1", additional_kwargs={"n": 1.0}),
    ):
        assert not head.starts([changed, old[1]])
    assert not head.starts([old[0], _ai(response_metadata={"n": True})])
    # A head holding bytes (msgpack's bin) has no packed run: items compared one by one.
    assert Head("v", (HumanMessage("x", additional_kwargs={"b": b"x"}),)).packed is None
