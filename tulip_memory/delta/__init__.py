""":class:`DeltaCheckpointer` over a :class:`DeltaStorage`: :class:`InMemoryDeltaStorage`
or :class:`ORMDeltaStorage` (the database; imported on first access).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tulip_memory.core.optional_dependencies import lazy_attributes
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


__getattr__ = lazy_attributes(__name__, {"ORMDeltaStorage": "tulip_memory.delta.orm"})
