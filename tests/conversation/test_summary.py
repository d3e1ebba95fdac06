"""The summary message format and the fallback summary."""

from __future__ import annotations

from tests.conversation.histories import agent_loop, assistant, call, system, user
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
        "6 messages: 2 from the user, 3 from the assistant, 0 tool results, 1 system notes.",
        "Tools called: find_restaurant (2), book (1).",
        'First user message: "Book a table for two."',
        'Last user message: "Make it 8pm."',
        'Last assistant message: "Booked for 8pm."',
    ]


def test_fallback_summary_stays_small_however_long_the_span():
    history = agent_loop(5000)
    for message in history:
        message.content = message.content * 50
    text = fallback_summary(history)
    assert len(text) < 1000
    nested = fallback_summary([summary_message(text * 10, 10001), *agent_loop(3)])
    assert nested.startswith("Earlier: ")
    assert len(nested) < 2500
