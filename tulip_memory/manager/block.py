"""The memory block: the one system message, after the leading system messages, that
carries recalled memories to the model. Injecting and stripping return a new state.
"""

from __future__ import annotations

import dataclasses

from tulip_memory.conversation.turns import leading_system_count
from tulip_memory.manager.types import Memory, MemoryType
from tulip_memory.messages import Message, Role
from tulip_memory.state import AgentState

__all__ = [
    "MEMORY_BLOCK_MARKER",
    "format_memory_block",
    "inject_memory_block",
    "is_memory_block",
    "latest_user_text",
    "strip_memory_blocks",
]

MEMORY_BLOCK_MARKER = "tulip_memory_block"

_HEADINGS = {
    MemoryType.USER: "About the user",
    MemoryType.FEEDBACK: "Feedback on how to work",
    MemoryType.PROJECT: "About the project",
    MemoryType.REFERENCE: "References",
}


def is_memory_block(message: Message) -> bool:
    return message.role is Role.SYSTEM and bool(message.metadata.get(MEMORY_BLOCK_MARKER))


def format_memory_block(memories: list[Memory]) -> str:
    """The block's text: memories grouped by type, in the order given within a type."""
    lines = ["Long-term memory (facts remembered from earlier conversations):"]
    for memory_type in MemoryType:
        group = [m for m in memories if m.type is memory_type]
        if not group:
            continue
        lines.append(f"\n{_HEADINGS[memory_type]}:")
        lines.extend(f"- {m.content}" for m in group)
    return "\n".join(lines)


def strip_memory_blocks(state: AgentState) -> AgentState:
    """A copy of ``state`` without memory blocks (``state`` itself if it has none)."""
    if not any(is_memory_block(m) for m in state.messages):
        return state
    return dataclasses.replace(
        state, messages=[m for m in state.messages if not is_memory_block(m)]
    )


def inject_memory_block(state: AgentState, memories: list[Memory]) -> AgentState:
    """A copy of ``state`` with one block for ``memories`` after its leading system messages."""
    messages = strip_memory_blocks(state).messages
    position = leading_system_count(messages)
    block = Message(
        role=Role.SYSTEM,
        content=format_memory_block(memories),
        metadata={MEMORY_BLOCK_MARKER: True},
    )
    return dataclasses.replace(state, messages=[*messages[:position], block, *messages[position:]])


def latest_user_text(state: AgentState) -> str | None:
    """The content of the last user message with text, the retrieval query of a turn."""
    for message in reversed(state.messages):
        if message.role is Role.USER and message.content.strip():
            return message.content
    return None
