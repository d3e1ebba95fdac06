"""Agent state (what checkpointers persist) and run information (what resolvers see).
Pure Python."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from tulip_memory.messages import Message, check_type

CHECKPOINT_FORMAT = 1


@dataclass
class AgentState:
    """The state of one agent thread: its messages and free-form metadata."""

    messages: list[Message] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    thread_id: str | None = None

    def __post_init__(self) -> None:
        check_type("AgentState.messages", self.messages, list, "a list")
        for index, message in enumerate(self.messages):
            if not isinstance(message, Message):
                raise ValueError(
                    f"AgentState.messages[{index}] must be a Message, got "
                    f"{type(message).__name__} (Message.from_dict() reads a dict)"
                )
        check_type("AgentState.metadata", self.metadata, dict, "a dict")
        check_type("AgentState.thread_id", self.thread_id, (str, type(None)), "a str or None")

    def to_checkpoint(self) -> dict[str, Any]:
        """A JSON-serialisable snapshot; ``from_checkpoint`` rebuilds an equal state."""
        return {
            "format": CHECKPOINT_FORMAT,
            "thread_id": self.thread_id,
            "messages": [message.to_dict() for message in self.messages],
            "metadata": copy.deepcopy(self.metadata),
        }

    @classmethod
    def from_checkpoint(cls, data: dict[str, Any]) -> AgentState:
        """The state :meth:`to_checkpoint` wrote in ``data``; ValueError (TypeError, KeyError for
        a malformed message) otherwise."""
        if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
            raise ValueError(
                "AgentState.from_checkpoint needs a dict with a 'messages' list, got "
                + _described(data)
            )
        if not isinstance(data.get("metadata") or {}, dict):
            raise ValueError(
                "AgentState.from_checkpoint needs 'metadata' to be a dict, got "
                f"{type(data['metadata']).__name__}"
            )
        return cls(
            messages=[Message.from_dict(m) for m in data["messages"]],
            metadata=copy.deepcopy(data.get("metadata") or {}),
            thread_id=data.get("thread_id"),
        )


def _described(data: object) -> str:
    if not isinstance(data, dict):
        return f"a {type(data).__name__}"
    if "messages" not in data:
        return "a dict without one"
    return f"'messages' of type {type(data['messages']).__name__}"


@dataclass(frozen=True)
class RunInfo:
    """What a namespace resolver receives about the run it resolves for."""

    thread_id: str | None
    metadata: dict[str, Any]

    @classmethod
    def from_state(cls, state: AgentState) -> RunInfo:
        return cls(thread_id=state.thread_id, metadata=dict(state.metadata))


def checked_state(state: object, caller: str) -> AgentState:
    """``state`` if it is an :class:`AgentState`, else ``ValueError`` naming ``caller``."""
    if not isinstance(state, AgentState):
        raise ValueError(f"{caller}() takes an AgentState, got {type(state).__name__}")
    return state
