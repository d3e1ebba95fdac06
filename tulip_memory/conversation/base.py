"""The conversation-manager contract (the full history in, a new list for the model out,
the input never mutated), the no-op manager and the managers' argument checks.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from tulip_memory.messages import Message


def check_messages(messages: Sequence[Message]) -> list[Message]:
    """Return ``messages`` as a new list, or raise ValueError if it is not a list of Message."""
    if not isinstance(messages, list | tuple):
        raise ValueError(f"messages must be a list of Message, got {type(messages).__name__}")
    # The distinct types are few: checking them (not every item in Python) keeps this cheap.
    if all(issubclass(kind, Message) for kind in set(map(type, messages))):
        return list(messages)
    index, item = next((i, m) for i, m in enumerate(messages) if not isinstance(m, Message))
    raise ValueError(f"messages[{index}] must be a Message, got {type(item).__name__}")


def check_bool(name: str, value: object) -> bool:
    """Return ``value`` if it is a bool; else ValueError naming it."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be a bool, got {type(value).__name__}")
    return value


class ConversationManager(ABC):
    """Decides which messages of a run's history are sent to the model."""

    # The attributes its repr shows, as keyword arguments.
    _repr_fields: tuple[str, ...] = ()

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._repr_fields)
        return f"{type(self).__name__}({fields})"

    @abstractmethod
    def apply(self, messages: list[Message]) -> list[Message]:
        """Return the managed history (a new list; ``messages`` is left untouched)."""

    async def async_apply(self, messages: list[Message]) -> list[Message]:
        """Async twin of :meth:`apply`; managers with async work (events, LLM calls) override it."""
        return self.apply(messages)


class NullManager(ConversationManager):
    """Keeps the whole history unchanged (a copy of the list)."""

    def apply(self, messages: list[Message]) -> list[Message]:
        return check_messages(messages)
