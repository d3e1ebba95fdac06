"""The summary message format and the fallback summary."""

from __future__ import annotations

import re

from tests.conversation.histories import agent_loop, assistant, call, result, system, user
from tulip_memory.conversation.summary import (
    covered_count,
    fallback_summary,
    is_summary,
    summary_message,
    summary_text,
)
from tulip_memory.messages import Message, Role


def test_summary_message_format_and_recognition():
    message = summary_message("they talked", 12)
    assert message.role == Role.SYSTEM
    assert message.content == "[Summary of previous conversation (12 messages)]:\nthey talked"
    assert is_summary(message)
    assert covered_count(message) == 12
    assert summary_text(message) == "they talked"
    assert is_summary(Message.from_dict(message.to_dict()))


def test_ordinary_messages_are_not_summaries():
    assert not is_summary(system("plain"))
    assert not is_summary(system("bool", tulip_memory_summary=True))
    assert not is_summary(Message(Role.USER, "x", metadata={"tulip_memory_summary": 3}))
    assert covered_count(user("x")) == 1


def test_fallback_summary_states_counts_tools_and_requests():
    history = [
        user("Book a table for two."),
        assistant("", call("1", "find_restaurant"), call("2", "find_restaurant")),
        assistant("", call("3", "book")),
        user("Make it 8pm."),
        assistant("Booked for 8pm."),
        system("note"),
    ]
    text = fallback_summary(history)
    assert text.splitlines() == [
        "Messages summarised: 6 (user 2, assistant 3, tool results 0, system notes 1).",
        "Tools called: find_restaurant (2), book (1).",
        'First user message of the conversation: "Book a table for two."',
        'Messages 1-6: last user message "Make it 8pm."; last assistant message "Booked for 8pm.".',
    ]


def test_fallback_summary_stays_small_however_long_the_span():
    history = agent_loop(5000)
    for message in history:
        message.content = message.content * 50
    text = fallback_summary(history)
    assert len(text) < 1500
    # An earlier summary it cannot read back (a summarize_fn's) is quoted, clipped, once.
    nested = fallback_summary([summary_message(text * 10, 10001), *agent_loop(3)])
    assert 'Messages 1-10001: earlier summary "Messages summarised: 10002 (' in nested
    assert len(nested) < 2500


def rolled(spans: list[list[Message]]) -> tuple[str, int]:
    """The fallback summary of ``spans`` written as a manager does, one compaction per span:
    each time the earlier summary followed by the new messages."""
    text, covered = "", 0
    for span in spans:
        earlier = [summary_message(text, covered)] if covered else []
        text = fallback_summary([*earlier, *span])
        covered += len(span)
    return text, covered


def test_a_rolling_summary_keeps_totals_and_the_first_request_at_the_top():
    # The earlier summary used to be nested under "Earlier: " and clipped, and the counts
    # and "First user message" described only the newest span.
    spans = [
        [user("Plan a trip to Lisbon."), assistant("", call("1", "search"))],
        [result("1"), assistant("Found flights.")],
        [user("Cheapest one?"), assistant("", call("2", "search"), call("3", "book"))],
        [result("2"), result("3"), system("note"), assistant("Booked.")],
    ]
    text, covered = rolled(spans)
    assert text.splitlines() == [
        "Messages summarised: 10 (user 2, assistant 4, tool results 3, system notes 1).",
        "Tools called: search (2), book (1).",
        'First user message of the conversation: "Plan a trip to Lisbon."',
        "Messages 1-2: the first user message (quoted above).",
        'Messages 3-4: last assistant message "Found flights.".',
        'Messages 5-6: last user message "Cheapest one?".',
        'Messages 7-10: last assistant message "Booked.".',
    ]
    assert covered == 10
    # The same messages summarised at once give the same totals and first request.
    at_once = fallback_summary([m for span in spans for m in span]).splitlines()
    assert at_once[:3] == text.splitlines()[:3]


def test_a_rolling_summary_stays_bounded_and_drops_the_oldest_quotes_first():
    spans = [[user("The original task " + "x" * 900)]]
    spans += [[user(f"request {i} " * 30), assistant(f"reply {i} " * 30)] for i in range(300)]
    text, covered = rolled(spans)
    lines = text.splitlines()
    assert lines[0] == (
        f"Messages summarised: {covered} (user 301, assistant 300, tool results 0, system notes 0)."
    )
    assert lines[1].startswith('First user message of the conversation: "The original task x')
    assert lines[2].startswith("Messages 1-") and lines[2].endswith(
        ": not quoted (dropped to keep this summary short)."
    )
    assert "request 299" in lines[-1] and "reply 299" in lines[-1]
    assert "request 298" in lines[-2]
    assert len(text) < 3500
    assert text.count("Messages summarised") == text.count("First user message") == 1
    assert "Earlier:" not in text


def test_tool_totals_stay_exact_when_tools_leave_the_list():
    spans = [
        [assistant("", *(call(f"{i}-{n}", f"tool_{i}") for n in range(i + 1)))] for i in range(12)
    ]
    spans.append([assistant("", call("again", "tool_0"))])
    text, _ = rolled(spans)
    (tools,) = [line for line in text.splitlines() if line.startswith("Tools called:")]
    listed = [int(n) for n in re.findall(r"\((\d+)(?: calls?)?\)", tools)]
    assert sum(listed) == sum(range(1, 13)) + 1
    assert "tool_11 (12)" in tools and "other tools (" in tools


def test_an_earlier_summary_in_another_format_is_quoted_once_not_itemised():
    earlier = summary_message("The user wants a flight.\nThey prefer mornings.", 40)
    text = fallback_summary([earlier, user("And a hotel."), assistant("Sure.")])
    assert text.splitlines() == [
        "Messages summarised: 42 (user 1, assistant 1, tool results 0, system notes 0, "
        "in an earlier summary 40).",
        'Messages 1-40: earlier summary "The user wants a flight. They prefer mornings.".',
        'Messages 41-42: last user message "And a hotel."; last assistant message "Sure.".',
    ]
    # The user message after it is not claimed to be the conversation's first one; read
    # back, the summary is extended, not quoted again.
    again = fallback_summary([summary_message(text, 42), user("Thanks.")])
    assert again.count("earlier summary") == 2  # the counts label and the one quote
    assert again.splitlines()[0].endswith("in an earlier summary 40).")
