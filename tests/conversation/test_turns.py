"""Turn boundaries: where a history may be cut without orphaning tool results."""

from __future__ import annotations

import pytest

from tests.conversation.histories import assistant, call, result, system, user
from tulip_memory.conversation.turns import (
    TurnBoundaries,
    last_boundary_at_or_before,
    leading_system_count,
)


def test_leading_system_count():
    assert leading_system_count([]) == 0
    assert leading_system_count([system(), system(), user("x"), system()]) == 2
    assert leading_system_count([user("x"), system()]) == 0


def boundaries(messages):
    found = TurnBoundaries(messages)
    return [i for i in range(len(messages) + 1) if found.is_boundary(i)]


def test_tool_results_and_the_span_up_to_the_last_result_are_not_boundaries():
    history = [
        user("task"),  # 0
        assistant("", call("a"), call("b")),  # 1
        result("a"),  # 2
        system("note while b ran"),  # 3: inside the open call b
        result("b"),  # 4
        assistant("done"),  # 5
    ]
    assert boundaries(history) == [0, 1, 5, 6]


def test_an_orphan_in_the_input_blocks_nothing_but_is_never_a_start():
    history = [user("task"), result("nobody-called-this"), assistant("hi")]
    assert boundaries(history) == [0, 2, 3]


def test_an_unanswered_call_does_not_block_later_cuts():
    history = [user("task"), assistant("", call("never-answered")), user("next")]
    assert boundaries(history) == [0, 1, 2, 3]


def test_search_in_both_directions():
    history = [user("t"), assistant("", call("a")), result("a"), result("a2"), assistant("x")]
    found = TurnBoundaries(history)
    assert found.at_or_after(2) == 4
    assert found.at_or_before(3) == 1
    assert found.at_or_before(99) == 5
    assert found.at_or_after(-3) == 0
    empty = TurnBoundaries([])
    assert empty.at_or_after(0) == 0
    assert empty.at_or_before(0) == 0


def test_a_region_finds_calls_made_long_before_it():
    history = [user("t"), assistant("", call("early")), *(user(f"u{i}") for i in range(200))]
    history.append(result("early"))
    history.append(assistant("after"))
    region = TurnBoundaries(history, 150)
    # The call at 1 stays open until its result at 202: nothing in between is a boundary.
    assert [i for i in range(150, len(history) + 1) if region.is_boundary(i)] == [203, 204]
    assert last_boundary_at_or_before(history, 202) == 1


def test_a_region_start_out_of_range_is_refused():
    with pytest.raises(ValueError, match="start"):
        TurnBoundaries([user("x")], 2)
