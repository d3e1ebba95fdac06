"""Chat messages: the unit every layer of tulip_memory works on. Pure Python."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tulip_memory.core import nul_characters


class Role(StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


# Role by value: the lookup of every message read back from JSON (faster than Role(value)).
_ROLES: dict[object, Role] = {role.value: role for role in Role}


@dataclass
class ToolCall:
    """A tool invocation requested by an assistant message (``arguments=None`` is ``{}``)."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_str("ToolCall.id", self.id)
        _check_str("ToolCall.name", self.name)
        if self.arguments is None:
            self.arguments = {}
        check_type("ToolCall.arguments", self.arguments, dict, "a dict")

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": dict(self.arguments)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolCall:
        """Read our shape, ``{"id", "name", "arguments"}``, or OpenAI's (``function`` with
        JSON-text arguments)."""
        return _read_tool_call(data, "ToolCall.from_dict")


@dataclass
class Message:
    """One message of a conversation, compared by value; None tool_calls/metadata are
    empty, any other wrong type a ValueError naming the field."""

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
        check_type("Message.content", self.content, str, "a str")
        if self.tool_calls is None:
            self.tool_calls = []
        elif not isinstance(self.tool_calls, list):
            kind = type(self.tool_calls).__name__
            raise ValueError(f"Message.tool_calls must be a list of ToolCall, got {kind}")
        elif self.tool_calls and not all(isinstance(c, ToolCall) for c in self.tool_calls):
            index, call = next(
                (i, c) for i, c in enumerate(self.tool_calls) if not isinstance(c, ToolCall)
            )
            hint = " (Message.from_dict() reads dicts)" if isinstance(call, dict) else ""
            raise ValueError(
                f"Message.tool_calls[{index}] must be a ToolCall, got {type(call).__name__}{hint}"
            )
        if self.tool_call_id is not None:
            _check_str("Message.tool_call_id", self.tool_call_id)
        if self.name is not None:
            _check_str("Message.name", self.name)
        if self.metadata is None:
            self.metadata = {}
        check_type("Message.metadata", self.metadata, dict, "a dict")

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
        """Read :meth:`to_dict`'s shape or an OpenAI chat message, without modifying ``data``."""
        if not isinstance(data, dict) or "role" not in data:
            raise ValueError(f"Message.from_dict needs a dict with a 'role', got {data!r:.80}")
        calls = data.get("tool_calls")
        check_type("Message.tool_calls", calls, (list, type(None)), "a list")
        metadata = data.get("metadata")
        check_type("Message.metadata", metadata, (dict, type(None)), "a dict")
        return cls(
            role=data["role"],
            content=data.get("content") or "",
            tool_calls=[
                _read_tool_call(call, f"Message.tool_calls[{index}]")
                for index, call in enumerate(calls or ())
            ],
            tool_call_id=data.get("tool_call_id"),
            name=data.get("name"),
            metadata=dict(metadata) if metadata else {},
        )


def check_type(label: str, value: object, kind: type | tuple[type, ...], what: str) -> None:
    """``ValueError`` "<label> must be <what>, got <type>" unless ``value`` is a ``kind``."""
    if not isinstance(value, kind):
        raise ValueError(f"{label} must be {what}, got {type(value).__name__}")


def _check_str(label: str, value: object) -> None:
    check_type(label, value, str, "a str")


def _read_tool_call(data: object, where: str) -> ToolCall:
    if not isinstance(data, dict):
        raise ValueError(f"{where} must be a dict, got {type(data).__name__}")
    # OpenAI's shape holds the name and the arguments under "function".
    function = data.get("function")
    check_type(f"{where}.function", function, (dict, type(None)), "a dict")
    source, label = (data, where) if function is None else (function, f"{where}.function")
    missing = [f"{where}.id"] if "id" not in data else []
    if "name" not in source:
        missing.append(f"{label}.name")
    if missing:
        raise ValueError(f"{' and '.join(missing)} missing; got keys {sorted(map(str, data))}")
    _check_str(f"{where}.id", data["id"])
    _check_str(f"{label}.name", source["name"])
    arguments = source.get("arguments")
    if isinstance(arguments, str):  # OpenAI sends the arguments as a JSON text
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError as error:
            raise ValueError(f"{label}.arguments is not valid JSON: {error}") from None
    check_type(f"{label}.arguments", arguments, (dict, type(None)), "a JSON object")
    return ToolCall(data["id"], source["name"], dict(arguments or {}))


def without_nul(messages: Iterable[Message]) -> list[Message]:
    """``messages`` without NUL characters anywhere (PostgreSQL text cannot hold one)."""
    cleaned = []
    for message in messages:
        data = message.to_dict()
        stripped = nul_characters.without_nul(data)
        cleaned.append(message if stripped == data else Message.from_dict(stripped))
    return cleaned
