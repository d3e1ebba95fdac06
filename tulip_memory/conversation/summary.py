"""The summary message SummarizingManager writes, and the summary used without a summarize_fn.

A summary is one SYSTEM message whose content starts with
``[Summary of previous conversation (N messages)]:\\n``, N being the number of original
messages it stands for (a summary of a summary counts what the earlier one covered). Its
``metadata["tulip_memory_summary"]`` holds N, which is how a later pass recognises it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from tulip_memory.messages import Message, Role

SUMMARY_METADATA_KEY = "tulip_memory_summary"
SUMMARY_HEADER = "[Summary of previous conversation ({count} messages)]:\n"

# Bounds of the fallback summary, so that it stays small however long the history is.
_EARLIER_SUMMARY_CHARS = 1500
_QUOTE_CHARS = 200
_TOOLS_LISTED = 8


def summary_message(text: str, covered: int) -> Message:
    """The SYSTEM message standing for ``covered`` earlier messages."""
    return Message(
        role=Role.SYSTEM,
        content=SUMMARY_HEADER.format(count=covered) + text,
        metadata={SUMMARY_METADATA_KEY: covered},
    )


def is_summary(message: Message) -> bool:
    """Whether ``message`` is a summary written by SummarizingManager."""
    covered = message.metadata.get(SUMMARY_METADATA_KEY)
    return (
        message.role == Role.SYSTEM
        and isinstance(covered, int)
        and not isinstance(covered, bool)
        and covered > 0
    )


def covered_count(message: Message) -> int:
    """How many original messages ``message`` stands for (1 unless it is a summary)."""
    return message.metadata[SUMMARY_METADATA_KEY] if is_summary(message) else 1


def summary_text(message: Message) -> str:
    """The text of a summary message, without its header line."""
    header, _, text = message.content.partition("\n")
    return text if header.startswith("[Summary of previous conversation") else message.content


def _quote(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def fallback_summary(messages: Sequence[Message]) -> str:
    """A bounded, deterministic digest of ``messages``, used when no summarize_fn is given.

    It states what the span held (counts per role, tools called), the first and last user
    requests and the last assistant message; an earlier summary in the span is kept,
    clipped, on the first line.
    """
    lines: list[str] = []
    roles: Counter[Role] = Counter()
    tools: Counter[str] = Counter()
    first_user: Message | None = None
    last_user: Message | None = None
    last_assistant: Message | None = None
    for message in messages:
        if is_summary(message):
            lines.append("Earlier: " + _quote(summary_text(message), _EARLIER_SUMMARY_CHARS))
            continue
        roles[message.role] += 1
        if message.role == Role.USER:
            first_user = first_user or message
            last_user = message
        elif message.role == Role.ASSISTANT:
            tools.update(call.name for call in message.tool_calls)
            if message.content.strip():
                last_assistant = message
    lines.append(
        f"{roles.total()} messages: {roles[Role.USER]} from the user, "
        f"{roles[Role.ASSISTANT]} from the assistant, {roles[Role.TOOL]} tool results, "
        f"{roles[Role.SYSTEM]} system notes."
    )
    if tools:
        listed = ", ".join(f"{name} ({count})" for name, count in tools.most_common(_TOOLS_LISTED))
        more = len(tools) - _TOOLS_LISTED
        lines.append(f"Tools called: {listed}" + (f" and {more} more." if more > 0 else "."))
    if first_user is not None:
        lines.append(f'First user message: "{_quote(first_user.content, _QUOTE_CHARS)}"')
    if last_user is not None and last_user is not first_user:
        lines.append(f'Last user message: "{_quote(last_user.content, _QUOTE_CHARS)}"')
    if last_assistant is not None:
        lines.append(f'Last assistant message: "{_quote(last_assistant.content, _QUOTE_CHARS)}"')
    return "\n".join(lines)
