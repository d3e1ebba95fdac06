""":class:`DeltaCheckpointer` over a :class:`DeltaStorage`: :class:`InMemoryDeltaStorage`
or :class:`ORMDeltaStorage` (the database; imported on first access).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tulip_memory.delta.checkpointer import DeltaCheckpointer
from tulip_memory.delta.storage import DeltaStorage, InMemoryDeltaStorage
from tulip_memory.delta.types import CheckpointMetadata, DeltaCheckpoint, MessageBlock

if TYPE_CHECKING:
    from tulip_memory.delta.orm import ORMDeltaStorage

__all__ = [
    "CheckpointMetadata",
    "DeltaCheckpoint",
    "DeltaCheckpointer",
    "DeltaStorage",
    "InMemoryDeltaStorage",
    "MessageBlock",
    "ORMDeltaStorage",
]


def __getattr__(name: str) -> Any:
    if name == "ORMDeltaStorage":
        from tulip_memory.delta.orm import ORMDeltaStorage

        return ORMDeltaStorage
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
