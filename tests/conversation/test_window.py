"""SlidingWindowManager: pinned system messages, slide_step grid, turn boundaries, anchor."""

from __future__ import annotations

import copy

import pytest

from tests.conversation.histories import (
    agent_loop,
    assistant,
    call,
    chat,
    leading_tool_free,
    result,
    system,
    tool_calls_unsplit,
    tool_round,
    user,
)
from tulip_memory.conversation import SlidingWindowManager
from tulip_memory.events import EV_MEMORY_CONVERSATION_PRUNED, memory_event
from tulip_memory.messages import Role


def non_pinned(messages, pinned=1):
    return messages[pinned:]


def test_short_history_is_returned_as_a_new_equal_list_and_no_event(events):
    history = chat(3)
    managed = SlidingWindowManager(window_size=10).apply(history)
    assert managed == history
    assert managed is not history
    assert events == []


def test_empty_history():
    assert SlidingWindowManager().apply([]) == []


def test_keeps_leading_system_messages_and_the_last_window_size_messages(events):
    history = [system("a"), system("b", tulip_memory_block=True), *chat(10, leading=0)]
    managed = SlidingWindowManager(window_size=4, preserve_first_user=False).apply(history)
    assert managed == history[:2] + history[-4:]
    (payload,) = events.named(EV_MEMORY_CONVERSATION_PRUNED)
    assert payload["removed_count"] == 16
    assert payload["strategy"] == "sliding_window"
    assert payload["window_size"] == 4


def test_a_mid_run_system_note_stays_in_place_and_leaves_with_its_turns():
    note = system("Reminder: budget is 300 EUR.")
    history = [system("instructions"), *chat(3, leading=0), note, *chat(3, leading=0)]
    # The note is inside the window: it stays where it was written.
    managed = SlidingWindowManager(window_size=8).apply(history)
    assert managed[0].content == "instructions"
    assert managed[1:] == history[-8:]
    assert managed[2] is note
    # Once the window has moved past it, it is gone (not moved to the front).
    managed = SlidingWindowManager(window_size=4).apply(history)
    assert note not in managed
    assert managed == [history[0], *history[-4:]]


def test_without_preserve_system_leading_system_messages_count_and_can_go():
    history = chat(5, leading=2)
    managed = SlidingWindowManager(
        window_size=4, preserve_system=False, preserve_first_user=False
    ).apply(history)
    assert managed == history[-4:]
    assert all(m.role != Role.SYSTEM for m in managed)


@pytest.mark.parametrize(("window_size", "slide_step"), [(10, 1), (10, 4), (10, 10), (7, 3)])
def test_window_length_stays_between_its_bounds(window_size, slide_step):
    manager = SlidingWindowManager(window_size=window_size, slide_step=slide_step)
    history = chat(60)
    for length in range(2, len(history) + 1):
        window = non_pinned(manager.apply(history[:length]))
        if length - 1 <= window_size:
            assert len(window) == length - 1
        else:
            assert window_size - slide_step + 1 <= len(window) <= window_size


def test_slide_step_keeps_the_window_start_byte_identical_until_it_refills():
    """The prompt-cache property: between slides each request extends the previous one."""
    window_size, slide_step = 10, 4
    manager = SlidingWindowManager(window_size=window_size, slide_step=slide_step)
    history = chat(60)
    previous = manager.apply(history[:2])
    slides = []
    for length in range(3, len(history) + 1):
        current = manager.apply(history[:length])
        if current[: len(previous)] == previous:
            assert current == [*previous, history[length - 1]]
        else:
            slides.append(length)
            # A slide drops exactly one step from the front.
            assert current[1:] == [*previous[1 + slide_step :], history[length - 1]]
        previous = current
    # Once full, exactly one request in slide_step moves the start.
    first_overflow = window_size + 2
    assert slides == list(range(first_overflow, len(history) + 1, slide_step))


def test_slide_step_one_moves_the_start_on_every_request_once_full():
    manager = SlidingWindowManager(window_size=5, slide_step=1)
    history = chat(10)
    starts = {manager.apply(history[:n])[1].content for n in range(7, len(history) + 1)}
    assert len(starts) == len(history) - 6


def test_an_orphan_tool_result_never_starts_the_window(events):
    history = agent_loop(10, parallel=2)  # system, user, then 10 x (assistant, 2 results)
    for window_size in range(1, 12):
        managed = SlidingWindowManager(window_size=window_size).apply(history)
        assert leading_tool_free(managed)
        assert tool_calls_unsplit(managed)
        assert len(non_pinned(managed)) <= window_size


def test_a_result_whose_call_id_is_reused_later_still_counts_as_an_orphan():
    # The reference kept a leading tool result when *any* assistant in the window used
    # its id; a window can never start with a tool result.
    history = [
        system(),
        user("task"),
        assistant("", call("dup")),
        result("dup", "first"),
        result("dup", "second answer, same id"),
        user("again"),
        assistant("", call("dup")),
        result("dup", "third"),
    ]
    managed = SlidingWindowManager(window_size=4).apply(history)
    assert managed == [history[0], *history[5:]]


def test_a_system_note_between_a_call_and_its_result_is_not_a_cut_point():
    history = [
        system(),
        user("task"),
        assistant("", call("a")),
        system("note written while the tool ran"),
        result("a"),
        assistant("done"),
        user("thanks"),
        assistant("bye"),
    ]
    managed = SlidingWindowManager(window_size=5).apply(history)
    # The grid cut falls on the note; starting there would orphan result "a".
    assert managed == [history[0], *history[5:]]
    assert tool_calls_unsplit(managed)


def test_the_opening_user_message_is_reattached_in_an_agent_loop(events):
    history = agent_loop(12)
    managed = SlidingWindowManager(window_size=6).apply(history)
    assert managed[0] == history[0]
    assert managed[1] is history[1]  # the task
    assert len(non_pinned(managed)) <= 6
    assert tool_calls_unsplit(managed)
    assert managed[2].role == Role.ASSISTANT
    (payload,) = events.named(EV_MEMORY_CONVERSATION_PRUNED)
    assert payload["first_user_reattached"] is True
    assert payload["removed_count"] == len(history) - len(managed)


def test_a_chat_is_left_alone_while_a_user_turn_survives(events):
    history = chat(10)
    managed = SlidingWindowManager(window_size=4).apply(history)
    assert managed == [history[0], *history[-4:]]
    assert history[1] not in managed
    assert events.named(EV_MEMORY_CONVERSATION_PRUNED)[0]["first_user_reattached"] is False


def test_preserve_first_user_false_never_reattaches():
    history = agent_loop(12)
    managed = SlidingWindowManager(window_size=6, preserve_first_user=False).apply(history)
    assert all(m.role != Role.USER for m in managed)


def test_reattaching_slides_one_more_step_when_the_window_is_full_and_renormalises():
    # body = user + 7 rounds of (assistant, result, result) = 22 messages. With window 6
    # and step 2 the grid cut (16) lands on an assistant: the window is full, no room for
    # the task. One more step (18) lands on a tool result, which is skipped too (19).
    history = agent_loop(7, parallel=2)
    managed = SlidingWindowManager(window_size=6, slide_step=2).apply(history)
    assert managed == [history[0], history[1], *history[20:]]
    assert history[20].role == Role.ASSISTANT
    assert tool_calls_unsplit(managed)


def test_reattachment_keeps_the_slide_grid_so_the_start_stays_put():
    manager = SlidingWindowManager(window_size=8, slide_step=4)
    history = agent_loop(30, parallel=2)
    previous = manager.apply(history[:10])
    moves = 0
    for length in range(11, len(history) + 1):
        current = manager.apply(history[:length])
        assert len(non_pinned(current)) <= 8
        assert leading_tool_free(current[2:])
        assert current[1] is history[1]
        if current[: len(previous)] != previous:
            moves += 1
        previous = current
    # Far fewer moves than requests: the start moves only when the window refills.
    assert moves <= (len(history) - 10) // 4 + 1


def test_removed_count_is_what_really_went_with_orphans_and_anchor(events):
    history = agent_loop(9, parallel=3)
    for window_size in (2, 5, 9, 13):
        for slide_step in {1, 2, window_size}:
            events.clear()
            managed = SlidingWindowManager(window_size=window_size, slide_step=slide_step).apply(
                history
            )
            (payload,) = events.named(EV_MEMORY_CONVERSATION_PRUNED)
            assert payload["removed_count"] == len(history) - len(managed)
            assert payload["kept_count"] == len(managed)
            assert payload["slide_step"] == slide_step


def test_the_input_is_never_mutated():
    history = agent_loop(10)
    snapshot = copy.deepcopy(history)
    SlidingWindowManager(window_size=3, slide_step=2).apply(history)
    assert history == snapshot


async def test_async_apply_gives_the_same_result_and_awaits_the_event(events):
    history = agent_loop(10)
    manager = SlidingWindowManager(window_size=5)
    assert await manager.async_apply(history) == manager.apply(history)
    assert events.names() == [EV_MEMORY_CONVERSATION_PRUNED] * 2
    assert events[0][1] == events[1][1]


def test_history_without_user_message_gets_no_anchor():
    history = [system(), *tool_round(0), *tool_round(1), *tool_round(2)]
    managed = SlidingWindowManager(window_size=2).apply(history)
    assert managed == [history[0], *history[-2:]]


def test_a_window_of_one_message_in_an_agent_loop_holds_the_task_only():
    history = agent_loop(3)
    managed = SlidingWindowManager(window_size=1).apply(history)
    assert managed == history[:2]


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"window_size": 0}, "window_size"),
        ({"window_size": -3}, "window_size"),
        ({"window_size": "20"}, "window_size"),
        ({"window_size": True}, "window_size"),
        ({"window_size": 2.5}, "window_size"),
        ({"slide_step": 0}, "slide_step"),
        ({"window_size": 5, "slide_step": 6}, "slide_step"),
        ({"slide_step": None}, "slide_step"),
        ({"preserve_system": "yes"}, "preserve_system"),
        ({"preserve_first_user": 1}, "preserve_first_user"),
    ],
)
def test_bad_arguments_raise_value_error_naming_them(kwargs, name):
    with pytest.raises(ValueError, match=name):
        SlidingWindowManager(**kwargs)


@pytest.mark.parametrize("bad", [None, "hello", {"role": "user"}, [user("x"), {"role": "user"}]])
def test_bad_messages_raise_value_error_naming_them(bad):
    with pytest.raises(ValueError, match="messages"):
        SlidingWindowManager().apply(bad)


def test_a_tuple_of_messages_is_accepted():
    history = tuple(chat(2))
    assert SlidingWindowManager().apply(history) == list(history)


async def test_async_apply_awaits_async_receivers(events):
    awaited = []

    async def async_receiver(sender, event, payload, **kwargs):
        awaited.append(payload["removed_count"])

    memory_event.connect(async_receiver, weak=False)
    try:
        await SlidingWindowManager(window_size=4).async_apply(chat(10))
    finally:
        memory_event.disconnect(async_receiver)
    assert awaited == [16]


def raising_receiver(sender, event, payload, **kwargs):
    raise RuntimeError("broken observer")


async def test_a_raising_receiver_breaks_neither_apply_nor_async_apply(events):
    history = chat(10)
    memory_event.connect(raising_receiver, weak=False)
    try:
        managed = await SlidingWindowManager(window_size=4).async_apply(history)
        assert SlidingWindowManager(window_size=4).apply(history) == managed
    finally:
        memory_event.disconnect(raising_receiver)
    assert managed == [history[0], *history[-4:]]
    assert len(events.named(EV_MEMORY_CONVERSATION_PRUNED)) == 2
