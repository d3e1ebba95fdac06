"""Where a :class:`~tulip_memory.delta.DeltaCheckpointer` keeps records and blocks.

:class:`DeltaStorage` is the contract (store, retrieve, list, delete, blocks, and the
one-read ``retrieve_chain``/``retrieve_for_load`` a storage may do better than the
defaults); ``writer_lock`` serialises a thread's writers. :class:`InMemoryDeltaStorage`
keeps everything in dicts of this process.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable
from contextlib import AbstractAsyncContextManager
from datetime import datetime

from tulip_memory.delta.keyed_locks import WRITER_LOCKS
from tulip_memory.delta.types import CheckpointMetadata, DeltaCheckpoint, MessageBlock

__all__ = ["DeltaStorage", "InMemoryDeltaStorage", "root_block_digests"]


def root_block_digests(records: list[DeltaCheckpoint]) -> set[str]:
    """Digests of the blocks of ``records[0]``'s chain root, if it is among ``records``."""
    if not records:
        return set()
    root = records[0].metadata.root_id
    for record in records:
        if record.metadata.checkpoint_id == root:
            return {digest for digest, _ in record.metadata.blocks}
    return set()


class DeltaStorage(ABC):
    """Abstract storage of delta checkpoints and message blocks, per thread."""

    def event_tenant(self) -> str | None:
        """The tenant the checkpointer's events name; ``None`` for storage without tenants."""
        return None

    @abstractmethod
    async def store(self, thread_id: str, checkpoint_id: str, checkpoint: DeltaCheckpoint) -> None:
        """Insert, or replace in place, a checkpoint."""

    @abstractmethod
    async def retrieve(self, thread_id: str, checkpoint_id: str) -> DeltaCheckpoint | None:
        """One checkpoint, or None."""

    @abstractmethod
    async def list_checkpoints(
        self, thread_id: str, limit: int | None = 10
    ) -> list[CheckpointMetadata]:
        """Metadata, newest first; ``limit=None`` lists them all."""

    @abstractmethod
    async def delete(self, thread_id: str, checkpoint_id: str | None = None) -> bool:
        """Delete one checkpoint, or every record and block of the thread."""

    @abstractmethod
    async def store_blocks(self, thread_id: str, blocks: Iterable[MessageBlock]) -> None:
        """Store blocks; a digest already stored is left as it is."""

    @abstractmethod
    async def retrieve_blocks(
        self, thread_id: str, digests: Collection[str]
    ) -> dict[str, MessageBlock]:
        """The stored blocks among ``digests`` (missing ones are absent), in one read."""

    @abstractmethod
    async def block_sizes(self, thread_id: str) -> dict[str, tuple[int, int]]:
        """digest -> (size before compression, stored size) of every block of the thread."""

    @abstractmethod
    async def delete_blocks(self, thread_id: str, digests: Collection[str]) -> int:
        """Delete these blocks; return how many were deleted."""

    async def store_as_newest(
        self, thread_id: str, checkpoint_id: str, checkpoint: DeltaCheckpoint
    ) -> None:
        """Insert, or replace, a checkpoint so that it becomes the thread's newest, in one step
        where the storage can; this default deletes, then stores.
        """
        await self.delete(thread_id, checkpoint_id)
        await self.store(thread_id, checkpoint_id, checkpoint)

    def writer_lock(self, thread_id: str) -> AbstractAsyncContextManager[None]:
        """Held around each write of the thread: one writer of the thread at a time."""
        return WRITER_LOCKS.hold((id(self), thread_id))

    async def append_if_newest(
        self,
        thread_id: str,
        checkpoint: DeltaCheckpoint,
        blocks: list[MessageBlock],
        *,
        after: tuple[str, datetime, str],
    ) -> bool:
        """Store a new checkpoint and its blocks if ``after`` (``(checkpoint_id, created_at,
        root_id)`` of its parent) is still the thread's newest; False (nothing stored) when not:
        the writer then takes the writer lock and starts over. This default runs under
        :meth:`writer_lock`; a storage may do it in one transaction.
        """
        async with self.writer_lock(thread_id):
            listed = await self.list_checkpoints(thread_id, limit=1)
            newest = listed[0] if listed else None
            if newest is None or (newest.checkpoint_id, newest.created_at, newest.root_id) != after:
                return False
            if blocks:
                await self.store_blocks(thread_id, blocks)
            await self.store(thread_id, checkpoint.metadata.checkpoint_id, checkpoint)
            return True

    async def aclose(self) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Release what the storage holds (connections, clients); this default holds nothing."""

    async def retrieve_for_load(
        self, thread_id: str, checkpoint_id: str | None = None
    ) -> tuple[list[DeltaCheckpoint], dict[str, MessageBlock]]:
        """``retrieve_chain``, and the blocks its root (when among the records) refers to."""
        records = await self.retrieve_chain(thread_id, checkpoint_id)
        return records, await self.retrieve_blocks(thread_id, root_block_digests(records))

    async def retrieve_chain(
        self, thread_id: str, checkpoint_id: str | None = None
    ) -> list[DeltaCheckpoint]:
        """The checkpoint (newest when None) first, then records sharing its chain root.

        This default walks the parents one ``retrieve`` at a time (chain depth + 1
        reads); the storages of tulip_memory override it with a single read.
        """
        if checkpoint_id is None:
            newest = await self.list_checkpoints(thread_id, limit=1)
            if not newest:
                return []
            checkpoint_id = newest[0].checkpoint_id
        chain: list[DeltaCheckpoint] = []
        current: str | None = checkpoint_id
        while current is not None:
            record = await self.retrieve(thread_id, current)
            if record is None:
                break
            chain.append(record)
            current = None if record.metadata.is_full else record.metadata.parent_id
        return chain


class InMemoryDeltaStorage(DeltaStorage):
    """Records and blocks in dicts of this process (tests, throw-away runs)."""

    def __init__(self) -> None:
        self._storage: dict[str, dict[str, DeltaCheckpoint]] = {}
        self._blocks: dict[str, dict[str, MessageBlock]] = {}

    async def store(self, thread_id: str, checkpoint_id: str, checkpoint: DeltaCheckpoint) -> None:
        self._storage.setdefault(thread_id, {})[checkpoint_id] = checkpoint

    async def store_as_newest(
        self, thread_id: str, checkpoint_id: str, checkpoint: DeltaCheckpoint
    ) -> None:
        records = self._storage.setdefault(thread_id, {})
        records.pop(checkpoint_id, None)  # no await between: one step
        records[checkpoint_id] = checkpoint

    async def retrieve(self, thread_id: str, checkpoint_id: str) -> DeltaCheckpoint | None:
        return self._storage.get(thread_id, {}).get(checkpoint_id)

    async def retrieve_chain(
        self, thread_id: str, checkpoint_id: str | None = None
    ) -> list[DeltaCheckpoint]:
        records = self._storage.get(thread_id, {})
        if not records:
            return []
        if checkpoint_id is None:
            checkpoint_id = next(reversed(records))
        target = records.get(checkpoint_id)
        if target is None:
            return []
        root = target.metadata.root_id
        group = [
            r for r in reversed(records.values()) if r is not target and r.metadata.root_id == root
        ]
        return [target, *group]

    async def list_checkpoints(
        self, thread_id: str, limit: int | None = 10
    ) -> list[CheckpointMetadata]:
        metadata = [r.metadata for r in reversed(self._storage.get(thread_id, {}).values())]
        return metadata if limit is None else metadata[:limit]

    async def delete(self, thread_id: str, checkpoint_id: str | None = None) -> bool:
        if checkpoint_id is None:
            self._blocks.pop(thread_id, None)
            return bool(self._storage.pop(thread_id, None))
        return self._storage.get(thread_id, {}).pop(checkpoint_id, None) is not None

    async def store_blocks(self, thread_id: str, blocks: Iterable[MessageBlock]) -> None:
        stored = self._blocks.setdefault(thread_id, {})
        for block in blocks:
            stored.setdefault(block.digest, block)

    async def retrieve_blocks(
        self, thread_id: str, digests: Collection[str]
    ) -> dict[str, MessageBlock]:
        stored = self._blocks.get(thread_id, {})
        return {d: stored[d] for d in digests if d in stored}

    async def block_sizes(self, thread_id: str) -> dict[str, tuple[int, int]]:
        return {
            d: (b.size_bytes, b.compressed_size_bytes)
            for d, b in self._blocks.get(thread_id, {}).items()
        }

    async def delete_blocks(self, thread_id: str, digests: Collection[str]) -> int:
        stored = self._blocks.get(thread_id, {})
        return sum(stored.pop(d, None) is not None for d in digests)
