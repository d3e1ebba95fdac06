"""Invariants of the window and summarising managers on generated histories (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conversation.histories import (
    assistant,
    call,
    result,
    system,
    tool_calls_unsplit,
    user,
)
from tulip_memory.conversation import SlidingWindowManager, SummarizingManager
from tulip_memory.conversation.summary import is_summary
from tulip_memory.conversation.turns import (
    TurnBoundaries,
    last_boundary_at_or_before,
    leading_system_count,
)
from tulip_memory.events import EV_MEMORY_CONVERSATION_PRUNED, memory_event
from tulip_memory.messages import Message, Role

TURN_KINDS = st.sampled_from(["user", "text", "tools", "note"])


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    """Histories with well-formed tool round-trips, mid-run notes and leading instructions."""
    leading = draw(st.integers(0, 3))
    history = [system(f"instructions {i}") for i in range(leading)]
    for turn, kind in enumerate(draw(st.lists(TURN_KINDS, max_size=60))):
        if kind == "user":
            history.append(user(f"request {turn}"))
        elif kind == "text":
            history.append(assistant(f"reply {turn}"))
        elif kind == "note":
            history.append(system(f"note {turn}"))
        else:
            ids = [f"c{turn}-{i}" for i in range(draw(st.integers(1, 3)))]
            history.append(assistant("", *(call(i) for i in ids)))
            history.extend(result(i) for i in ids)
    return history


def can_cut(body: list[Message], cut: int, system_first: bool = True) -> bool:
    """Keeping ``body[cut:]`` starts with no tool result (nor a system note unless
    ``system_first``) and answers no call made before it."""
    called_before = {c.id for m in body[:cut] for c in m.tool_calls}
    kept = body[cut:]
    banned_first = {Role.TOOL} if system_first else {Role.TOOL, Role.SYSTEM}
    return (not kept or kept[0].role not in banned_first) and not any(
        m.role == Role.TOOL and m.tool_call_id in called_before for m in kept
    )


def is_suffix(part: list[Message], whole: list[Message]) -> bool:
    return part == whole[len(whole) - len(part) :]


def record_pruned() -> tuple[list[dict], object]:
    seen: list[dict] = []

    def receiver(sender: object, event: str, payload: dict, **kwargs: object) -> None:
        if event == EV_MEMORY_CONVERSATION_PRUNED:
            seen.append(payload)

    return seen, receiver


@settings(max_examples=300, deadline=None)
@given(
    histories(),
    st.integers(1, 25),
    st.integers(1, 25),
    st.booleans(),
    st.booleans(),
)
def test_sliding_window_invariants(drawn, window_size, slide_step, preserve_system, first_user):
    history = drawn
    slide_step = min(slide_step, window_size)
    manager = SlidingWindowManager(window_size, preserve_system, first_user, slide_step)
    seen, receiver = record_pruned()
    memory_event.connect(receiver, weak=False)
    try:
        managed = manager.apply(history)
    finally:
        memory_event.disconnect(receiver)
    pinned = leading_system_count(history) if preserve_system else 0
    assert managed[:pinned] == history[:pinned]
    window = managed[pinned:]
    body = history[pinned:]
    assert len(window) <= window_size
    assert window == body or len(window) < len(body)
    assert tool_calls_unsplit(window)
    # Never starts with a tool result; no result without its call before it.
    assert not window or window[0].role != Role.TOOL
    # The window is a suffix of the body, or the re-attached first user message + one.
    first_user_message = next((m for m in body if m.role == Role.USER), None)
    assert is_suffix(window, body) or (
        first_user
        and window[0] is first_user_message
        and is_suffix(window[1:], body)
        and not any(m.role == Role.USER for m in window[1:])
    )
    if first_user and any(m.role == Role.USER for m in body):
        assert any(m.role == Role.USER for m in window)
    if seen:
        assert seen[0]["removed_count"] == len(history) - len(managed) > 0
    else:
        assert managed == history


@settings(max_examples=300, deadline=None)
@given(histories(), st.integers(2, 30), st.integers(1, 29), st.booleans())
def test_summarizing_invariants(drawn, threshold, keep_recent, preserve_system):
    history = drawn
    keep_recent = min(keep_recent, threshold - 1)
    manager = SummarizingManager(threshold, keep_recent, None, preserve_system)
    managed = manager.apply(history)
    pinned = leading_system_count(history) if preserve_system else 0
    assert managed[:pinned] == history[:pinned]
    body = history[pinned:]
    if managed == history:
        # Left alone only when no compaction is due: the body fits, or no cut that far back
        # keeps tool calls with their results (the cut is never later than len - threshold).
        # With preserve_system the recent part never starts with a system note (the next
        # pass would pin it).
        assert len(body) <= threshold or not any(
            can_cut(body, cut, not preserve_system) for cut in range(1, len(body) - threshold + 1)
        )
        return
    summary, *recent = managed[pinned:]
    assert is_summary(summary)
    assert summary.content.startswith(
        f"[Summary of previous conversation ({len(body) - len(recent)} messages)]:\n"
    )
    assert keep_recent <= len(recent) <= len(body) - 1
    assert recent == body[len(body) - len(recent) :]
    assert not recent or recent[0].role != Role.TOOL
    assert not (preserve_system and recent and recent[0].role == Role.SYSTEM)
    assert tool_calls_unsplit(recent)
    # A second pass over the same history reuses the cached summary: identical output.
    assert manager.apply(history) == managed


@settings(max_examples=100, deadline=None)
@given(histories(), st.integers(2, 12), st.integers(1, 11))
def test_summarizing_cuts_do_not_depend_on_the_cache(history, threshold, keep_recent):
    """Replaying a run request by request gives the same cuts as a fresh manager each time."""
    keep_recent = min(keep_recent, threshold - 1)
    replayed = SummarizingManager(threshold, keep_recent)
    for length in range(len(history) + 1):
        cached = replayed.apply(history[:length])
        fresh = SummarizingManager(threshold, keep_recent).apply(history[:length])
        assert len(cached) == len(fresh)
        for mine, theirs in zip(cached, fresh, strict=True):
            assert mine is theirs or (is_summary(mine) and is_summary(theirs))
            if is_summary(mine):
                assert mine.content.partition("\n")[0] == theirs.content.partition("\n")[0]


def brute_force_boundaries(messages: list[Message]) -> list[bool]:
    """Cut i is a boundary iff messages[i:] has no tool result at its start or whose
    call (the latest assistant calling that id before it) lies before i."""
    flags = []
    for cut in range(len(messages) + 1):
        ok = cut == len(messages) or messages[cut].role != Role.TOOL
        for position in range(cut, len(messages)):
            message = messages[position]
            if message.role != Role.TOOL:
                continue
            callers = [
                p
                for p in range(position)
                if any(c.id == message.tool_call_id for c in messages[p].tool_calls)
            ]
            if callers and callers[-1] < cut:
                ok = False
        flags.append(ok)
    return flags


@st.composite
def shuffled_histories(draw: st.DrawFn) -> list[Message]:
    """Histories with results moved around: late, early, orphaned, ids reused."""
    history = draw(histories())
    moves = draw(st.lists(st.tuples(st.integers(0, 200), st.integers(0, 200)), max_size=4))
    for source, target in moves:
        if history:
            message = history.pop(source % len(history))
            history.insert(target % (len(history) + 1), message)
    return history


@settings(max_examples=200, deadline=None)
@given(shuffled_histories(), st.data())
def test_turn_boundaries_of_a_region_match_the_definition(history, data):
    expected = brute_force_boundaries(history)
    start = data.draw(st.integers(0, len(history)))
    region = TurnBoundaries(history, start)
    assert [region.is_boundary(i) for i in range(start, len(history) + 1)] == expected[start:]
    position = data.draw(st.integers(0, len(history)))
    assert last_boundary_at_or_before(history, position) == max(
        (i for i in range(position + 1) if expected[i]), default=0
    )


class CountingSummariser:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, messages: list[Message]) -> str:
        self.calls += 1
        return f"summary {self.calls}"


@settings(max_examples=400, deadline=None)
@given(
    st.one_of(histories(), shuffled_histories()),
    st.integers(2, 12),
    st.integers(1, 11),
    st.booleans(),
)
def test_summarizing_is_idempotent(history, threshold, keep_recent, preserve_system):
    """apply(apply(x)) == apply(x), with no second summarize_fn call, on the same manager
    (its cache warm) and on a fresh one."""
    keep_recent = min(keep_recent, threshold - 1)
    fn = CountingSummariser()
    manager = SummarizingManager(threshold, keep_recent, fn, preserve_system)
    once = manager.apply(history)
    calls = fn.calls
    assert manager.apply(once) == once
    assert SummarizingManager(threshold, keep_recent, fn, preserve_system).apply(once) == once
    assert fn.calls == calls


@settings(max_examples=200, deadline=None)
@given(histories(), st.integers(2, 12), st.integers(1, 11), st.booleans())
def test_feeding_the_output_back_at_every_step_cuts_like_the_full_history(
    history, threshold, keep_recent, preserve_system
):
    """A run that stores the managed list and appends to it keeps the same recent messages
    as one that keeps the full history, and one summary whose N counts what it replaced."""
    keep_recent = min(keep_recent, threshold - 1)
    fed_back = SummarizingManager(threshold, keep_recent, None, preserve_system)
    full = SummarizingManager(threshold, keep_recent, None, preserve_system)
    state: list[Message] = []
    for length in range(1, len(history) + 1):
        state = fed_back.apply([*state, history[length - 1]])
        reference = full.apply(history[:length])
        assert [m for m in state if not is_summary(m)] == [
            m for m in reference if not is_summary(m)
        ]
        found = [m for m in state if is_summary(m)]
        assert len(found) <= 1
        covered = found[0].metadata["tulip_memory_summary"] if found else 0
        assert covered + len(state) - len(found) == length
    assert tool_calls_unsplit([m for m in state if m.role != Role.SYSTEM])
