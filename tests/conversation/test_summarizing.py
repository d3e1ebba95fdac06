"""SummarizingManager: system messages, turn-boundary cut, cache, sync/async fns, failures."""

from __future__ import annotations

import asyncio
import copy
import gc
import logging
import threading

import pytest

from tests.conversation.histories import (
    agent_loop,
    assistant,
    call,
    chat,
    result,
    system,
    tool_calls_unsplit,
    user,
)
from tulip_memory.conversation import SummarizingManager
from tulip_memory.events import (
    EV_MEMORY_COMPACTOR_COMPLETED,
    EV_MEMORY_COMPACTOR_FAILED,
    EV_MEMORY_COMPACTOR_TRIGGERED,
)
from tulip_memory.messages import Message, Role

HEADER = "[Summary of previous conversation ({} messages)]:\n"


class Summariser:
    """A deterministic stand-in for an LLM summariser that records what it was given."""

    def __init__(self) -> None:
        self.calls: list[list[Message]] = []

    def __call__(self, messages: list[Message]) -> str:
        self.calls.append(list(messages))
        return f"summary #{len(self.calls)} of {len(messages)} messages"


class AsyncSummariser(Summariser):
    async def __call__(self, messages: list[Message]) -> str:  # type: ignore[override]
        await asyncio.sleep(0)
        return super().__call__(messages)


def summaries(messages: list[Message]) -> list[Message]:
    return [m for m in messages if m.content.startswith("[Summary of previous conversation")]


def test_under_threshold_the_history_is_returned_unchanged(events):
    history = chat(5)  # system + 10
    managed = SummarizingManager(threshold=10, keep_recent=4).apply(history)
    assert managed == history
    assert managed is not history
    assert events == []


def test_over_threshold_older_messages_become_one_system_summary(events):
    history = chat(6)  # system + 12; T=10, K=4 -> grid cut 7
    fn = Summariser()
    managed = SummarizingManager(threshold=10, keep_recent=4, summarize_fn=fn).apply(history)
    assert managed[0] is history[0]
    summary = managed[1]
    assert summary.role == Role.SYSTEM
    assert summary.content == HEADER.format(7) + "summary #1 of 7 messages"
    assert managed[2:] == history[8:]
    assert fn.calls == [history[1:8]]


def test_exactly_keep_recent_messages_stay_when_the_threshold_is_first_crossed():
    history = chat(5)
    history.append(user("one more"))  # 11 after the system prompt
    managed = SummarizingManager(threshold=10, keep_recent=4, summarize_fn=Summariser()).apply(
        history
    )
    assert managed[2:] == history[-4:]


def test_recent_part_stays_between_keep_recent_and_threshold():
    manager = SummarizingManager(threshold=10, keep_recent=4, summarize_fn=Summariser())
    history = chat(40)
    for length in range(12, len(history) + 1):
        managed = manager.apply(history[:length])
        assert len(summaries(managed)) == 1
        recent = managed[2:]
        assert 4 <= len(recent) <= 10
        assert recent == history[length - len(recent) : length]


def test_all_leading_system_messages_are_kept_in_order():
    # The reference kept only the last system message and dropped the others.
    leading = [system("rules"), system("persona"), system("memory", tulip_memory_block=True)]
    history = [*leading, *chat(8, leading=0)]
    managed = SummarizingManager(threshold=10, keep_recent=4).apply(history)
    assert managed[:3] == leading
    assert summaries(managed) == [managed[3]]


def test_a_mid_run_system_note_is_conversation_not_a_pinned_message():
    note = system("Note: the user prefers trains.")
    history = [system("rules"), *chat(2, leading=0), note, *chat(6, leading=0)]
    fn = Summariser()
    managed = SummarizingManager(threshold=10, keep_recent=4, summarize_fn=fn).apply(history)
    assert note in fn.calls[0]  # summarised with its turns...
    assert note not in managed  # ...and not moved to the front
    # In the recent part it stays where it was written.
    late = [system("rules"), *chat(5, leading=0), note, *chat(1, leading=0)]
    managed = SummarizingManager(threshold=10, keep_recent=4).apply(late)
    assert managed[-3:] == late[-3:]
    assert managed[-3] is note


def test_the_cut_never_separates_tool_calls_from_their_results():
    # body = user + 6 rounds of (assistant, result, result) = 19 messages. The grid cut
    # (14) and the reference's cut (19 - 4 = 15) both land on tool results.
    history = agent_loop(6, parallel=2)
    assert history[1 + 14].role == Role.TOOL
    assert history[1 + 15].role == Role.TOOL
    fn = Summariser()
    managed = SummarizingManager(threshold=10, keep_recent=4, summarize_fn=fn).apply(history)
    recent = managed[2:]
    assert recent == history[1 + 13 :]
    assert recent[0].role == Role.ASSISTANT
    assert tool_calls_unsplit(recent)
    assert tool_calls_unsplit(fn.calls[0])


def test_no_cut_possible_leaves_the_history_unchanged(events):
    calls = [call(f"c{i}") for i in range(15)]
    history = [system(), assistant("", *calls), *(result(c.id) for c in calls)]
    managed = SummarizingManager(threshold=10, keep_recent=4).apply(history)
    assert managed == history
    assert events == []


def test_a_history_that_only_grew_reuses_the_summary(events):
    fn = Summariser()
    manager = SummarizingManager(threshold=10, keep_recent=4, summarize_fn=fn)
    history = chat(6)
    first = manager.apply(history)
    events.clear()
    for extra in range(1, 6):
        grown = [*history, *chat(extra, leading=0)][:-1]  # 13..21 messages, grid cut 7
        if len(grown) - 1 > 17:
            break
        managed = manager.apply(grown)
        assert len(fn.calls) == 1
        assert managed[: len(first)] == first  # the prefix is byte-identical
    assert events == []  # a reused summary is not a compaction


def test_the_next_compaction_summarises_only_the_earlier_summary_and_new_messages(events):
    fn = Summariser()
    manager = SummarizingManager(threshold=10, keep_recent=4, summarize_fn=fn)
    history = chat(12)  # system + 24
    manager.apply(history[:13])  # body 12 -> summary of body[:7]
    managed = manager.apply(history[:19])  # body 18 -> grid cut 14
    assert len(fn.calls) == 2
    earlier, *new = fn.calls[1]
    assert earlier.content == HEADER.format(7) + "summary #1 of 7 messages"
    assert new == history[8:15]
    assert managed[1].content == HEADER.format(14) + "summary #2 of 8 messages"
    assert managed[2:] == history[15:19]
    (completed,) = events.named(EV_MEMORY_COMPACTOR_COMPLETED)[1:]
    assert completed["incremental"] is True
    assert completed["summarized_count"] == 14


def test_the_cache_matches_by_value_so_a_reloaded_history_hits():
    fn = Summariser()
    manager = SummarizingManager(threshold=10, keep_recent=4, summarize_fn=fn)
    history = chat(6)
    manager.apply(history)
    reloaded = [Message.from_dict(m.to_dict()) for m in history]
    manager.apply([*reloaded, user("next")])
    assert len(fn.calls) == 1


def test_a_changed_prefix_is_summarised_again_in_full():
    fn = Summariser()
    manager = SummarizingManager(threshold=10, keep_recent=4, summarize_fn=fn)
    history = chat(6)
    manager.apply(history)
    edited = list(history)
    edited[3] = user("an edited question")
    manager.apply(edited)
    assert len(fn.calls) == 2
    assert fn.calls[1] == edited[1:8]


def test_one_manager_caches_several_conversations():
    fn = Summariser()
    manager = SummarizingManager(threshold=10, keep_recent=4, summarize_fn=fn)
    first = chat(6)
    second = [system(), *(user(f"other {i}") for i in range(12))]
    manager.apply(first)
    manager.apply(second)
    manager.apply([*first, user("more")])
    manager.apply([*second, user("more")])
    assert len(fn.calls) == 2


def conversation(tag: str, turns: int, first: Message) -> list[Message]:
    history = [first]
    for turn in range(turns):
        history += [user(f"{tag} question {turn}"), assistant(f"{tag} answer {turn}")]
    return history


@pytest.mark.parametrize(
    ("preserve_system", "first"),
    [(False, system("You are Bot.")), (True, user("hi"))],
    ids=["shared-system-prompt", "shared-greeting"],
)
def test_conversations_sharing_a_first_message_keep_their_own_summaries(preserve_system, first):
    # The cache was keyed by the first summarised message: two users of one manager
    # overwrote each other's entry, so every request was summarised and every prefix changed.
    fn = Summariser()
    manager = SummarizingManager(
        threshold=10, keep_recent=4, summarize_fn=fn, preserve_system=preserve_system
    )
    histories = {tag: conversation(tag, 20, first) for tag in "AB"}
    previous: dict[str, list[Message]] = {}
    compactions = 0
    for length in range(11, 41):
        for tag, history in histories.items():
            managed = manager.apply(history[:length])
            before = previous.get(tag)
            if before is not None and managed[: len(before)] != before:
                compactions += 1  # the prefix changed: a new summary, on the grid only
                assert (length - 11) % 7 == 0
            previous[tag] = managed
    # One summary per conversation per compaction step (lengths 11, 18, 25, 32 and 39).
    assert len(fn.calls) == 2 * 5
    assert compactions == 2 * 4


def test_a_shared_manager_summarises_each_of_many_conversations_once_per_step():
    # With 17 conversations the 16-entry cache thrashed: summarize_fn ran on every request.
    fn = Summariser()
    manager = SummarizingManager(summarize_fn=fn)  # threshold 30, keep_recent 10: step 21
    histories = [conversation(f"user {n}", 40, system("You are Bot.")) for n in range(40)]
    for length in range(32, 74):
        for history in histories:
            manager.apply(history[:length])
    # Compactions at lengths 32 and 53 (bodies of 31 and 52 messages), and 74 is not reached.
    assert len(fn.calls) == 40 * 2


def test_a_shared_manager_is_safe_across_threads():
    fn = Summariser()
    lock = threading.Lock()

    def summarise(messages: list[Message]) -> str:
        with lock:
            return fn(messages)

    manager = SummarizingManager(
        threshold=10, keep_recent=4, summarize_fn=summarise, preserve_system=False
    )
    errors: list[BaseException] = []
    step = threading.Barrier(20, timeout=60)  # the conversations advance in lock step

    def run(number: int) -> None:
        history = conversation(f"user {number}", 30, system("You are Bot."))
        try:
            for length in range(2, len(history) + 1):
                step.wait()
                manager.apply(history[:length])
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    # Bodies of 11, 18, 25, 32, 39, 46, 53 and 60 messages: 8 compactions each.
    assert len(fn.calls) == 20 * 8


def test_cache_size_bounds_the_summaries_kept():
    fn = Summariser()
    manager = SummarizingManager(threshold=10, keep_recent=4, summarize_fn=fn, cache_size=2)
    histories = [conversation(f"user {n}", 10, system()) for n in range(3)]
    for history in histories * 2:
        manager.apply(history[:14])
    assert len(fn.calls) == 6  # three conversations do not fit in two entries
    uncached = SummarizingManager(threshold=10, keep_recent=4, summarize_fn=fn, cache_size=0)
    uncached.apply(histories[0][:14])
    uncached.apply(histories[0][:15])
    assert len(fn.calls) == 8
    assert "cache_size=0" in repr(uncached)


def test_a_message_edited_in_place_is_noticed():
    fn = Summariser()
    manager = SummarizingManager(threshold=10, keep_recent=4, summarize_fn=fn)
    history = chat(6)
    manager.apply(history)
    history[3].content = "an edited question"
    manager.apply(history)
    assert len(fn.calls) == 2


def test_two_hundred_compactions_of_the_default_summary_keep_the_task_and_the_totals():
    # The default summary nested the previous one under "Earlier: " and kept its first
    # 1,500 characters: after ~167 compactions only "Earlier: Earlier: ..." was left.
    manager = SummarizingManager(threshold=3, keep_recent=2)  # a compaction every 2 messages
    task = "TASK: migrate the billing database to PostgreSQL 16"
    history = [system("You are a DBA agent."), user(task)]
    for step in range(420):
        history.append(assistant(f"step {step} done"))
        managed = manager.apply(history)
    summary = managed[1].content
    covered = 420 + 1 - len(managed[2:])
    assert covered > 400
    assert summary.startswith(HEADER.format(covered))
    assert (
        f"Messages summarised: {covered} (user 1, assistant {covered - 1}, tool results 0, "
        "system notes 0)."
    ) in summary
    assert f'First user message of the conversation: "{task}"' in summary
    assert f'last assistant message "step {covered - 2} done"' in summary  # the newest span
    assert len(summary) < 3500
    assert "Earlier:" not in summary
    assert summary.count("First user message") == summary.count("Messages summarised") == 1


def test_a_fed_back_summary_is_folded_into_the_next_one():
    fn = Summariser()
    stored = SummarizingManager(threshold=10, keep_recent=4, summarize_fn=fn).apply(chat(6))
    assert len(stored) == 7  # system, summary (7 messages), 5 recent
    continued = [*stored, *chat(3, leading=0)]  # 11 after the pinned two
    fresh = SummarizingManager(threshold=10, keep_recent=4, summarize_fn=fn)
    managed = fresh.apply(continued)
    assert fn.calls[1][0] is stored[1]
    assert fn.calls[1][1:] == continued[2:9]
    assert len(summaries(managed)) == 1
    assert managed[1].content.startswith(HEADER.format(14))
    assert managed[2:] == continued[9:]


def _fed_back_cases() -> list[tuple[str, list[Message], int, int, bool]]:
    """Histories whose managed output used to be summarised again by a second pass."""
    return [
        # The summary counted towards the body: 1 + 30 recent messages > threshold.
        ("without-preserve-system", chat(25), 30, 10, False),
        # The cut moved back to a turn boundary and left 3 > threshold recent messages.
        (
            "cut-moved-back",
            [user("request"), assistant("", call("c1")), result("c1"), user("again")],
            2,
            1,
            True,
        ),
    ]


@pytest.mark.parametrize(
    ("history", "threshold", "keep_recent", "preserve_system"),
    [case[1:] for case in _fed_back_cases()],
    ids=[case[0] for case in _fed_back_cases()],
)
def test_applying_the_manager_to_its_own_output_changes_nothing(
    history, threshold, keep_recent, preserve_system, events
):
    fn = Summariser()
    manager = SummarizingManager(threshold, keep_recent, fn, preserve_system)
    once = manager.apply(history)
    assert len(summaries(once)) == 1
    events.clear()
    assert manager.apply(once) == once
    assert SummarizingManager(threshold, keep_recent, fn, preserve_system).apply(once) == once
    assert len(fn.calls) == 1
    assert events == []


def test_a_system_note_never_starts_the_recent_part():
    # It did when the grid cut fell on it; fed back, the next pass then pinned it with the
    # instructions for good, and cut elsewhere than the full history would.
    note = system("Note: the user prefers trains.")
    history = [system(), *chat(3, leading=0), user("one more"), note, *chat(2, leading=0)]
    history.append(user("last"))
    assert history[1 + 7] is note  # body of 13: the grid cut is 7
    once = SummarizingManager(threshold=10, keep_recent=4).apply(history)
    assert once[2:] == history[7:]  # the cut moved back to the turn before the note
    more = chat(8, leading=0)
    fed_back = SummarizingManager(threshold=10, keep_recent=4).apply([*once, *more])
    full = SummarizingManager(threshold=10, keep_recent=4).apply([*history, *more])
    assert fed_back[2:] == full[2:] == [*history, *more][22:]
    assert fed_back[1].content.partition("\n")[0] == full[1].content.partition("\n")[0]


def test_without_preserve_system_the_system_prompt_is_summarised_too():
    history = chat(6)
    fn = Summariser()
    managed = SummarizingManager(
        threshold=10, keep_recent=4, summarize_fn=fn, preserve_system=False
    ).apply(history)
    assert fn.calls[0][0] is history[0]
    assert history[0] not in managed
    assert managed[0].content.startswith(HEADER.format(7))


def test_without_preserve_system_a_fed_back_summary_still_counts_what_it_covered():
    # The summary is then in the summarised span (not pinned): the new summary must count
    # the messages it stood for, not count it as one message.
    fn = Summariser()
    stored = SummarizingManager(
        threshold=10, keep_recent=4, summarize_fn=fn, preserve_system=False
    ).apply(chat(6))
    assert stored[0].content.startswith(HEADER.format(7))
    continued = [*stored, *chat(6, leading=0)]
    managed = SummarizingManager(
        threshold=10, keep_recent=4, summarize_fn=fn, preserve_system=False
    ).apply(continued)
    (summary,) = summaries(managed)
    kept = len(managed) - 1
    assert summary.content.startswith(HEADER.format(7 + len(continued) - 1 - kept))


def test_the_fallback_summary_is_used_without_summarize_fn():
    history = agent_loop(8)
    managed = SummarizingManager(threshold=10, keep_recent=4).apply(history)
    summary = managed[1].content
    assert summary.startswith("[Summary of previous conversation (")
    assert "search (" in summary
    assert (
        'First user message of the conversation: "Find the cheapest flight to Lisbon."' in summary
    )


def test_events_and_their_payloads(events):
    history = chat(6)
    managed = SummarizingManager(threshold=10, keep_recent=4).apply(history)
    assert events.names() == [EV_MEMORY_COMPACTOR_TRIGGERED, EV_MEMORY_COMPACTOR_COMPLETED]
    triggered, completed = (payload for _, payload in events)
    assert triggered == {
        "strategy": "summarizing",
        "threshold": 10,
        "messages_before": 12,
        "summarized_count": 7,
        "incremental": False,
    }
    assert completed["messages_before"] == 12
    assert completed["messages_after"] == len(managed) == 7
    assert completed["summarized_count"] == 7
    assert isinstance(completed["duration_ms"], float)
    assert completed["duration_ms"] >= 0


def test_messages_before_counts_the_non_system_messages(events):
    history = [*chat(6, leading=2), system("a mid-run note"), user("one more")]
    SummarizingManager(threshold=10, keep_recent=4).apply(history)
    triggered, completed = (payload for _, payload in events)
    assert triggered["messages_before"] == completed["messages_before"] == 13
    events.clear()
    SummarizingManager(threshold=10, keep_recent=4, preserve_system=False).apply(history)
    triggered, completed = (payload for _, payload in events)
    assert triggered["messages_before"] == completed["messages_before"] == len(history) == 16


def test_sync_summarize_fn_with_apply():
    fn = Summariser()
    SummarizingManager(threshold=10, keep_recent=4, summarize_fn=fn).apply(chat(6))
    assert len(fn.calls) == 1


async def test_async_summarize_fn_is_awaited_by_async_apply(events):
    fn = AsyncSummariser()
    managed = await SummarizingManager(threshold=10, keep_recent=4, summarize_fn=fn).async_apply(
        chat(6)
    )
    assert managed[1].content.endswith("summary #1 of 7 messages")
    assert events.names() == [EV_MEMORY_COMPACTOR_TRIGGERED, EV_MEMORY_COMPACTOR_COMPLETED]


async def test_a_plain_async_function_is_awaited_too():
    async def summarise(messages: list[Message]) -> str:
        return f"async {len(messages)}"

    manager = SummarizingManager(threshold=10, keep_recent=4, summarize_fn=summarise)
    managed = await manager.async_apply(chat(6))
    assert managed[1].content.endswith("async 7")


async def test_a_sync_summarize_fn_runs_off_the_event_loop_in_async_apply():
    loop_thread = threading.get_ident()
    threads = []

    def summarise(messages: list[Message]) -> str:
        threads.append(threading.get_ident())
        return "from a thread"

    manager = SummarizingManager(threshold=10, keep_recent=4, summarize_fn=summarise)
    managed = await manager.async_apply(chat(6))
    assert managed[1].content.endswith("from a thread")
    assert threads and threads[0] != loop_thread


def test_an_async_summarize_fn_also_works_with_sync_apply():
    fn = AsyncSummariser()
    managed = SummarizingManager(threshold=10, keep_recent=4, summarize_fn=fn).apply(chat(6))
    assert managed[1].content.endswith("summary #1 of 7 messages")


async def test_sync_apply_with_an_async_fn_inside_a_running_loop_loses_nothing(events, recwarn):
    history = chat(6)
    manager = SummarizingManager(threshold=10, keep_recent=4, summarize_fn=AsyncSummariser())
    managed = manager.apply(history)
    assert managed == history
    (failed,) = events.named(EV_MEMORY_COMPACTOR_FAILED)
    assert failed["error_type"] == "RuntimeError"
    gc.collect()
    assert not [w for w in recwarn if "never awaited" in str(w.message)]


def _boom(messages: list[Message]) -> str:
    raise RuntimeError("LLM unavailable")


async def _async_boom(messages: list[Message]) -> str:
    raise RuntimeError("LLM unavailable")


@pytest.mark.parametrize("use_async", [False, True])
async def test_a_raising_summarize_fn_loses_nothing(use_async, events, caplog):
    history = chat(6)
    snapshot = copy.deepcopy(history)
    manager = SummarizingManager(
        threshold=10, keep_recent=4, summarize_fn=_async_boom if use_async else _boom
    )
    with caplog.at_level(logging.ERROR, logger="tulip_memory.conversation"):
        managed = await manager.async_apply(history) if use_async else manager.apply(history)
    assert managed == history == snapshot
    assert managed is not history
    assert events.names() == [EV_MEMORY_COMPACTOR_TRIGGERED, EV_MEMORY_COMPACTOR_FAILED]
    failed = events.named(EV_MEMORY_COMPACTOR_FAILED)[0]
    assert failed["error_type"] == "RuntimeError"
    assert failed["error"] == "LLM unavailable"
    assert failed["strategy"] == "summarizing"
    assert failed["summarized_count"] == 7
    assert failed["duration_ms"] >= 0
    (record,) = [r for r in caplog.records if r.name == "tulip_memory.conversation"]
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None
    assert "LLM unavailable" in caplog.text


def test_a_failure_is_not_cached_and_the_next_call_retries():
    attempts = []

    def flaky(messages: list[Message]) -> str:
        attempts.append(len(messages))
        if len(attempts) == 1:
            raise TimeoutError("slow model")
        return "recovered"

    manager = SummarizingManager(threshold=10, keep_recent=4, summarize_fn=flaky)
    history = chat(6)
    assert manager.apply(history) == history
    managed = manager.apply(history)
    assert managed[1].content.endswith("recovered")
    assert attempts == [7, 7]


@pytest.mark.parametrize("bad_summary", [None, 42, "", "   \n"])
def test_a_summarize_fn_returning_no_text_counts_as_a_failure(bad_summary, events):
    history = chat(6)
    manager = SummarizingManager(threshold=10, keep_recent=4, summarize_fn=lambda m: bad_summary)
    assert manager.apply(history) == history
    (failed,) = events.named(EV_MEMORY_COMPACTOR_FAILED)
    assert failed["error_type"] == "ValueError"
    assert "summarize_fn" in failed["error"]


def test_between_compactions_each_output_extends_the_previous_one():
    manager = SummarizingManager(threshold=10, keep_recent=4, summarize_fn=Summariser())
    history = chat(30)
    previous = manager.apply(history[:12])
    compactions = 0
    for length in range(13, len(history) + 1):
        current = manager.apply(history[:length])
        if current[: len(previous)] == previous:
            assert current == [*previous, history[length - 1]]
        else:
            compactions += 1
        previous = current
    # One compaction every threshold - keep_recent + 1 = 7 messages.
    assert compactions == (len(history) - 12) // 7


def test_the_input_is_never_mutated():
    history = agent_loop(10, parallel=2)
    snapshot = copy.deepcopy(history)
    manager = SummarizingManager(threshold=10, keep_recent=4, summarize_fn=Summariser())
    manager.apply(history)
    manager.apply(history)
    assert history == snapshot


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"threshold": 0}, "threshold"),
        ({"threshold": 1, "keep_recent": 1}, "threshold"),
        ({"threshold": "30"}, "threshold"),
        ({"threshold": False}, "threshold"),
        ({"keep_recent": 0}, "keep_recent"),
        ({"keep_recent": 3.0}, "keep_recent"),
        ({"threshold": 10, "keep_recent": 10}, "keep_recent"),
        ({"threshold": 10, "keep_recent": 12}, "keep_recent"),
        ({"summarize_fn": "my_module.summarise"}, "summarize_fn"),
        ({"preserve_system": None}, "preserve_system"),
        ({"cache_size": -1}, "cache_size"),
        ({"cache_size": "1024"}, "cache_size"),
        ({"cache_size": True}, "cache_size"),
    ],
)
def test_bad_arguments_raise_value_error_naming_them(kwargs, name):
    with pytest.raises(ValueError, match=name):
        SummarizingManager(**kwargs)


@pytest.mark.parametrize("bad", [None, "text", [user("x"), "y"]])
async def test_bad_messages_raise_value_error_naming_them(bad):
    manager = SummarizingManager()
    with pytest.raises(ValueError, match="messages"):
        manager.apply(bad)
    with pytest.raises(ValueError, match="messages"):
        await manager.async_apply(bad)
