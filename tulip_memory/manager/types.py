"""The value types of the memory manager: :class:`Memory`, :class:`MemoryType`,
:class:`ExtractionOutcome`. Pure Python.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, Protocol, TypeVar

from tulip_memory.core.identifiers import validate_identifier
from tulip_memory.core.nul_characters import nul_at
from tulip_memory.llm.usage import Usage
from tulip_memory.messages import Message

__all__ = ["BeforeSave", "ExtractFn", "ExtractMode", "ExtractionOutcome", "Memory", "MemoryType"]

# The longest key a memory may have: keys name store rows and history namespaces.
MEMORY_KEY_MAX_LENGTH = 200


class MemoryType(StrEnum):
    """Semantic category of a memory; each has its own namespace in the store."""

    USER = "user"  # who the user is: role, name, preferences
    FEEDBACK = "feedback"  # how to work with them: corrections and confirmed approaches
    PROJECT = "project"  # facts about the work: stack, decisions, deadlines
    REFERENCE = "reference"  # pointers to outside material: URLs, documents, tickets


@dataclass
class Memory:
    """One durable fact.

    ``key`` is the fact's stable name within its type: saving a memory with the same
    ``(type, key)`` updates the stored record instead of adding a second one.
    """

    type: MemoryType
    key: str
    content: str
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.type, MemoryType):
            try:
                self.type = MemoryType(self.type)
            except ValueError:
                raise ValueError(
                    f"Memory.type must be one of {[t.value for t in MemoryType]}, got {self.type!r}"
                ) from None
        self.check()

    def check(self) -> None:
        """Raise ``ValueError`` naming the first field that is not valid (the fields of a
        dataclass can be reassigned after it was built: ``save()`` checks again)."""
        if not isinstance(self.type, MemoryType):
            raise ValueError(f"Memory.type must be a MemoryType, got {self.type!r}")
        validate_memory_key(self.key)
        if not isinstance(self.content, str):
            raise ValueError(f"Memory.content must be a str, got {type(self.content).__name__}")
        if not self.content.strip():
            raise ValueError("Memory.content is blank: a memory must state something")
        if "\x00" in self.content:
            raise ValueError("Memory.content must not contain a NUL character")
        if not isinstance(self.metadata, dict):
            raise ValueError(f"Memory.metadata must be a dict, got {type(self.metadata).__name__}")
        try:
            json.dumps(self.metadata, allow_nan=False)
        except (TypeError, ValueError) as error:
            raise ValueError(f"Memory.metadata is not JSON-serialisable: {error}") from None
        where = nul_at(self.metadata, "Memory.metadata")
        if where is not None:
            raise ValueError(f"Memory.metadata must not contain a NUL character (at {where})")

    def to_store_value(self) -> dict[str, Any]:
        """A JSON-serialisable dict, as kept in the store (metadata copied)."""
        return {
            "type": self.type.value,
            "key": self.key,
            "content": self.content,
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_store_value(cls, value: dict[str, Any]) -> Memory:
        if not isinstance(value, dict):
            raise ValueError(f"a stored memory must be a dict, got {type(value).__name__}")
        try:
            return cls(
                type=MemoryType(value["type"]),
                key=value["key"],
                content=value["content"],
                metadata=dict(value.get("metadata") or {}),
            )
        except KeyError as exc:
            raise ValueError(f"a stored memory lacks the field {exc.args[0]!r}") from None


def validate_memory_key(key: object) -> str:
    """``key`` if it can name a memory (a non-blank identifier of at most
    ``MEMORY_KEY_MAX_LENGTH`` characters), else ``ValueError`` naming the problem."""
    return validate_identifier(
        key, "Memory.key", max_length=MEMORY_KEY_MAX_LENGTH, allow_blank=False
    )


def check_memories(memories: object) -> None:
    """Raise ``ValueError`` unless ``memories`` is a list of valid :class:`Memory` objects,
    naming the first one that is not (what every manager's ``save`` checks before writing)."""
    if isinstance(memories, Memory) or not isinstance(memories, Sequence):
        raise ValueError("save() takes a list of Memory objects")
    for index, memory in enumerate(memories):
        if not isinstance(memory, Memory):
            raise ValueError(f"memories[{index}] must be a Memory, got {type(memory).__name__}")
        try:
            memory.check()
        except ValueError as error:
            raise ValueError(f"memories[{index}]: {error}") from None


class _Addressed(Protocol):
    @property
    def type(self) -> MemoryType: ...

    @property
    def key(self) -> str: ...


AddressedT = TypeVar("AddressedT", bound=_Addressed)


def latest_per_key(items: Iterable[AddressedT]) -> list[AddressedT]:
    """One item per ``(type, key)``: the last one given, in the order of those last ones."""
    latest: dict[tuple[MemoryType, str], AddressedT] = {}
    for item in items:
        latest.pop((item.type, item.key), None)
        latest[(item.type, item.key)] = item
    return list(latest.values())


@dataclass
class ExtractionOutcome:
    """What one extraction run did: the memories it added or updated and, when a chat model
    made the decisions, the model, the usage of its calls and the operation counts."""

    memories: list[Memory]
    model: str | None = None
    usage: Usage | None = None
    #: Extra fields of the ``memory.manager.extracted`` event (``operations``, ``run_id`` ...).
    details: dict[str, Any] = field(default_factory=dict)
    #: What the run did to stored memories, as ``(event, type, key)``: a chat model's
    #: applied ``ADD``/``UPDATE``/``DELETE``, else ``SAVE`` per memory saved.
    applied: list[tuple[str, str, str]] = field(default_factory=list)

    def event_fields(self) -> dict[str, Any]:
        """The fields of the ``memory.manager.extracted`` event of this run."""
        fields: dict[str, Any] = {
            "memory_count": len(self.memories),
            "types": [m.type.value for m in self.memories],
            **self.details,
        }
        if self.usage is not None:
            fields.update(model=self.model, **self.usage.as_fields())
        return fields


ExtractFn = Callable[[list[Message]], Awaitable[list[Memory]]]
# Awaited by an extraction run after its extraction (every model call) and right before its
# first write; what it raises ends the run with nothing written (the Celery lease fence).
BeforeSave = Callable[[], Awaitable[None]]
ExtractMode = Literal["inline", "background", "celery"]
