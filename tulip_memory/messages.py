"""Chat messages: the unit every layer of tulip_memory works on.

Pure Python: importable without Django settings.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tulip_memory import nul_characters


class Role(StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


# Role by value: the lookup of every message read back from JSON (faster than Role(value)).
_ROLES: dict[object, Role] = {role.value: role for role in Role}


@dataclass
class ToolCall:
    """A tool invocation requested by an assistant message."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": dict(self.arguments)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolCall:
        return cls(id=data["id"], name=data["name"], arguments=dict(data.get("arguments") or {}))


@dataclass
class Message:
    """One message of a conversation, compared by value."""

    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Accept plain strings ("user") so that messages read back from JSON compare equal.
        if not isinstance(self.role, Role):
            try:
                self.role = _ROLES[self.role]
            except (KeyError, TypeError):
                raise ValueError(
                    f"Message.role must be one of {[r.value for r in Role]}, got {self.role!r}"
                ) from None
        if not isinstance(self.content, str):
            raise ValueError(f"Message.content must be a str, got {type(self.content).__name__}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict; optional fields are left out when empty."""
        data: dict[str, Any] = {"role": self.role.value, "content": self.content}
        if self.tool_calls:
            data["tool_calls"] = [call.to_dict() for call in self.tool_calls]
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            data["name"] = self.name
        if self.metadata:
            data["metadata"] = dict(self.metadata)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Message:
        if not isinstance(data, dict) or "role" not in data:
            raise ValueError(f"Message.from_dict needs a dict with a 'role', got {data!r:.80}")
        calls = data.get("tool_calls")
        metadata = data.get("metadata")
        return cls(
            role=data["role"],
            content=data.get("content") or "",
            tool_calls=[ToolCall.from_dict(c) for c in calls] if calls else [],
            tool_call_id=data.get("tool_call_id"),
            name=data.get("name"),
            metadata=dict(metadata) if metadata else {},
        )


def without_nul(messages: Iterable[Message]) -> list[Message]:
    """``messages`` with every NUL character removed from their texts (content, tool calls,
    names, metadata): what memory extraction reads. A NUL carries nothing in a chat, and
    PostgreSQL's text and JSON types cannot hold it."""
    cleaned = []
    for message in messages:
        data = message.to_dict()
        stripped = nul_characters.without_nul(data)
        cleaned.append(message if stripped == data else Message.from_dict(stripped))
    return cleaned
