"""A conversation rendered as compact lines of text for a prompt.

One line per message: ``user: …``, ``assistant: …``; an assistant's tool calls as
``assistant: -> tool get_weather(city="Paris")`` and a tool result as
``tool get_weather -> …``, cut at ``tool_chars`` characters (results are often long and
rarely hold what a summary or a memory needs). An earlier summary of the conversation is
rendered as ``summary: …``; other system messages (instructions, memory blocks) are left
out: they are not what the user said.

Pure Python.
"""

from __future__ import annotations

import json

from tulip_memory.conversation.summary import is_summary, summary_text
from tulip_memory.messages import Message, Role

__all__ = ["render_message", "render_messages"]


def _cut(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _arguments(arguments: dict[str, object], limit: int) -> str:
    rendered = ", ".join(
        f"{name}={json.dumps(value, ensure_ascii=False, default=str)}"
        for name, value in arguments.items()
    )
    return _cut(rendered, limit)


def render_message(
    message: Message, *, tool_chars: int = 200, tool_names: dict[str, str] | None = None
) -> str | None:
    """``message`` as one line, or ``None`` for a message the transcript leaves out.

    ``tool_names`` maps tool-call ids to tool names, so a result names its tool.
    """
    if message.role is Role.SYSTEM:
        return f"summary: {summary_text(message)}" if is_summary(message) else None
    if message.role is Role.TOOL:
        name = message.name or (tool_names or {}).get(message.tool_call_id or "", "")
        label = f"tool {name}".rstrip()
        return f"{label} -> {_cut(message.content, tool_chars)}"
    parts = [" ".join(message.content.split())] if message.content.strip() else []
    parts += [
        f"-> tool {call.name}({_arguments(call.arguments, tool_chars)})"
        for call in message.tool_calls
    ]
    if not parts:
        return None
    return f"{message.role.value}: {' '.join(parts)}"


def render_messages(messages: list[Message], *, tool_chars: int = 200) -> list[str]:
    """The lines of ``messages`` (left-out messages skipped)."""
    names = {call.id: call.name for m in messages for call in m.tool_calls}
    lines = (render_message(m, tool_chars=tool_chars, tool_names=names) for m in messages)
    return [line for line in lines if line is not None]
