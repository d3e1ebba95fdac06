"""The records a :class:`~tulip_memory.delta.DeltaStorage` keeps: checkpoint metadata,
the stored checkpoint (metadata + compressed payload) and message blocks.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

__all__ = ["BlockRef", "CheckpointMetadata", "DeltaCheckpoint", "MessageBlock"]

# (digest, number of messages) of a block referred to by a full checkpoint.
BlockRef = tuple[str, int]


@dataclass(frozen=True)
class CheckpointMetadata:
    """Metadata of one checkpoint: ``chain_depth`` 0 when full, else the parent's + 1;
    ``base_id`` the full checkpoint at its chain's root (None: itself); sizes of its payload
    before and after compression (blocks apart); ``subject`` (``""``: nobody)."""

    checkpoint_id: str
    thread_id: str
    parent_id: str | None = None
    is_full: bool = True
    chain_depth: int = 0
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    size_bytes: int = 0
    compressed_size_bytes: int = 0
    base_id: str | None = None
    blocks: tuple[BlockRef, ...] = ()
    subject: str = ""

    @property
    def root_id(self) -> str:
        """The full checkpoint this one's chain starts from."""
        return self.base_id or self.checkpoint_id

    def rebased(self, base_id: str, depth_delta: int) -> CheckpointMetadata:
        return replace(self, base_id=base_id, chain_depth=self.chain_depth - depth_delta)


@dataclass(frozen=True)
class DeltaCheckpoint:
    """A stored checkpoint: its metadata and compressed payload (a delta or a full one)."""

    metadata: CheckpointMetadata
    data: bytes
    is_delta: bool = True

    @property
    def compression_ratio(self) -> float:
        """Uncompressed size over compressed size (1.0 when unknown)."""
        stored = self.metadata.compressed_size_bytes
        return self.metadata.size_bytes / stored if stored else 1.0


@dataclass(frozen=True)
class MessageBlock:
    """Messages stored once: ``data`` is the compressed JSON list, ``digest`` names it."""

    digest: str
    data: bytes
    size_bytes: int  # before compression

    @property
    def compressed_size_bytes(self) -> int:
        return len(self.data)
