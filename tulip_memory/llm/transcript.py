"""A conversation as compact prompt lines (``user: …``, ``assistant: -> tool f(x=1)``,
``tool f -> …``, ``summary: …``), tool calls and results cut at ``tool_chars``; system
messages other than a summary are left out. Each text is redacted whole before it is cut.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from tulip_memory.conversation.summary import is_summary, summary_text
from tulip_memory.core.text import one_line
from tulip_memory.llm.redaction import Redaction, Redactor
from tulip_memory.messages import Message, Role

__all__ = ["redacted_lines"]


def _arguments(arguments: dict[str, object]) -> str:
    return ", ".join(
        f"{name}={json.dumps(value, ensure_ascii=False, default=str)}"
        for name, value in arguments.items()
    )


def _redacted_line(
    message: Message, redactor: Redactor, tool_chars: int, tool_names: dict[str, str]
) -> Redaction | None:
    """``message`` as one line (each text redacted before it is cut) with the kinds and
    secrets redacted from it, or ``None`` for a message the transcript leaves out."""
    kinds: list[str] = []
    secrets: list[str] = []

    def redact(text: str) -> str:
        found = redactor.redact(text)
        kinds.extend(found.kinds)
        secrets.extend(found.secrets)
        return found.text

    if message.role is Role.SYSTEM:
        if not is_summary(message):
            return None
        line = f"summary: {redact(summary_text(message))}"
    elif message.role is Role.TOOL:
        name = message.name or tool_names.get(message.tool_call_id or "", "")
        label = f"tool {name}".rstrip()
        line = f"{label} -> {one_line(redact(message.content), tool_chars)}"
    else:
        content = redact(message.content)
        parts = [" ".join(content.split())] if content.strip() else []
        parts += [
            f"-> tool {call.name}({one_line(redact(_arguments(call.arguments)), tool_chars)})"
            for call in message.tool_calls
        ]
        if not parts:
            return None
        line = f"{message.role.value}: {' '.join(parts)}"
    return Redaction(line, kinds, secrets)


def redacted_lines(
    messages: Sequence[Message], redactor: Redactor, *, tool_chars: int = 200
) -> list[Redaction]:
    """The lines of ``messages`` (left-out messages skipped), each as a :class:`Redaction`:
    the line, and the kinds and secrets redacted from its message."""
    tool_names = {call.id: call.name for m in messages for call in m.tool_calls}
    lines = (_redacted_line(m, redactor, tool_chars, tool_names) for m in messages)
    return [line for line in lines if line is not None]
