"""DeltaCheckpointer: each save a splice of the messages and a metadata patch against its
parent; full checkpoints refer to shared message blocks; a load is two storage reads.
A state that cannot be rebuilt exactly raises CheckpointCorruptError. Design:
docs/design/checkpoint-chains.md.
"""

from __future__ import annotations

import copy
import json
import logging
import time
import zlib
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from tulip_memory.backends.base import BaseCheckpointer, validate_checkpoint_id, validate_thread_id
from tulip_memory.chains import codec
from tulip_memory.chains.equality import same_message
from tulip_memory.chains.options import MAX_DEPTH
from tulip_memory.chains.splice import Splice
from tulip_memory.chains.walk import corrupt, walk_up
from tulip_memory.core.lru import LRUCache
from tulip_memory.core.numbers import check_int
from tulip_memory.core.subjects import subject_of
from tulip_memory.delta import payload
from tulip_memory.delta.storage import DeltaStorage, InMemoryDeltaStorage
from tulip_memory.delta.types import BlockRef, CheckpointMetadata, DeltaCheckpoint, MessageBlock
from tulip_memory.events import EV_CHECKPOINT_PRUNED
from tulip_memory.exceptions import CheckpointCorruptError
from tulip_memory.messages import Message, ToolCall
from tulip_memory.state import AgentState

__all__ = ["DeltaCheckpointer"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Head:
    checkpoint_id: str
    messages: tuple[Message, ...]
    metadata: dict[str, Any]
    state_thread_id: str | None
    base_id: str
    depth: int
    base_blocks: tuple[BlockRef, ...]
    stable: int  # leading messages unchanged since the base (those its blocks cover)
    created_at: datetime  # of the record: a replaced checkpoint gets a new one

    def describes(self, meta: CheckpointMetadata) -> bool:
        """Whether this (cached) head still matches the stored record ``meta``."""
        return self.created_at == meta.created_at and self.base_id == meta.root_id

    def to_state(self) -> AgentState:
        return AgentState(
            messages=[_clone(m) for m in self.messages],
            metadata=copy.deepcopy(self.metadata),
            thread_id=self.state_thread_id,
        )


# What damaged stored data raises while being decoded.
_DECODE_ERRORS = (ValueError, KeyError, TypeError, IndexError, zlib.error)


def _clone(message: Message) -> Message:
    """A copy sharing nothing mutable with ``message``; faster than deepcopy, and built
    without ``__init__`` (``message`` was validated when it was made)."""
    clone = object.__new__(Message)
    clone.__dict__.update(message.__dict__)
    clone.tool_calls = [
        ToolCall(c.id, c.name, copy.deepcopy(c.arguments)) for c in message.tool_calls
    ]
    clone.metadata = copy.deepcopy(message.metadata) if message.metadata else {}
    return clone


def _json_copy(value: Any) -> Any:
    return json.loads(codec.dumps(value))


def _parent_id(record: DeltaCheckpoint) -> str | None:
    return None if record.metadata.is_full else record.metadata.parent_id or ""


class DeltaCheckpointer(BaseCheckpointer):
    """Stores each save as a delta against its parent; see the module docstring."""

    def __init__(
        self,
        storage: DeltaStorage | None = None,
        max_chain_depth: int = 5,
        compression_level: int = 6,
        *,
        cache_size: int = 128,
    ) -> None:
        if storage is not None and not isinstance(storage, DeltaStorage):
            raise ValueError(f"storage must be a DeltaStorage, got {type(storage).__name__}")
        check_int(max_chain_depth, "max_chain_depth", 0, MAX_DEPTH)
        check_int(compression_level, "compression_level", 0, 9)
        check_int(cache_size, "cache_size", 0, 10_000_000)
        self.storage = storage if storage is not None else InMemoryDeltaStorage()
        self.max_chain_depth = max_chain_depth
        self.compression_level = compression_level
        self.cache_size = cache_size
        self._cache: LRUCache[tuple[str, str], _Head] = LRUCache(cache_size, name="cache_size")
        # thread -> the id of the newest checkpoint this checkpointer wrote there.
        self._newest: LRUCache[str, str] = LRUCache(cache_size, name="cache_size")

    def __repr__(self) -> str:
        return (
            f"<DeltaCheckpointer storage={type(self.storage).__name__} "
            f"max_chain_depth={self.max_chain_depth}>"
        )

    async def aclose(self) -> None:
        """Close the storage and drop the cached states."""
        await self.storage.aclose()
        self._cache.clear()
        self._newest.clear()
        await super().aclose()

    def _remember(self, thread_id: str, head: _Head) -> None:
        self._cache.put((thread_id, head.checkpoint_id), head)

    def _cached(self, thread_id: str, checkpoint_id: str) -> _Head | None:
        return self._cache.get((thread_id, checkpoint_id))

    def _forget_thread(self, thread_id: str) -> None:
        self._cache.discard_where(lambda key: key[0] == thread_id)
        self._newest.pop(thread_id)

    async def _rebuild(self, thread_id: str, checkpoint_id: str | None) -> _Head | None:
        records, blocks = await self.storage.retrieve_for_load(thread_id, checkpoint_id)
        if not records:
            return None
        chain = await self._chain_to_base(thread_id, records)
        base, target = chain[0], chain[-1]
        messages = await self._read_blocks(thread_id, base, blocks)
        try:
            full = codec.unpack(base.data)
            metadata, state_thread_id = payload.read_full(full)
            payload.check_count(full, messages)
        except _DECODE_ERRORS as exc:
            raise corrupt(thread_id, base.metadata.checkpoint_id, f"bad payload ({exc})") from exc
        stable = len(messages)
        for record in chain[1:]:
            try:
                delta = codec.unpack(record.data)
                metadata, state_thread_id, at = payload.apply_delta(
                    delta, messages, metadata, state_thread_id
                )
                if at is not None:
                    stable = min(stable, at)
                payload.check_count(delta, messages)
            except _DECODE_ERRORS as exc:
                raise corrupt(
                    thread_id, record.metadata.checkpoint_id, f"bad delta ({exc})"
                ) from exc
        return _Head(
            checkpoint_id=target.metadata.checkpoint_id,
            messages=tuple(messages),
            metadata=metadata,
            state_thread_id=state_thread_id,
            base_id=base.metadata.checkpoint_id,
            depth=len(chain) - 1,
            base_blocks=tuple((str(d), int(n)) for d, n in base.metadata.blocks),
            stable=stable,
            created_at=target.metadata.created_at,
        )

    async def _chain_to_base(
        self, thread_id: str, records: list[DeltaCheckpoint]
    ) -> list[DeltaCheckpoint]:
        known = {r.metadata.checkpoint_id: r for r in records}
        fetched = set()
        while True:
            chain, gap = walk_up(records[0], _parent_id, known)
            if gap is None:
                return chain[::-1]
            target = records[0].metadata.checkpoint_id
            if gap in known:
                raise corrupt(thread_id, target, "its chain has a cycle")
            if gap in fetched or not gap:
                raise corrupt(thread_id, target, f"its parent checkpoint {gap!r} is missing")
            # Only after an interrupted re-base do chains span two roots: one more read.
            fetched.add(gap)
            more = await self.storage.retrieve_chain(thread_id, gap)
            known.update((r.metadata.checkpoint_id, r) for r in more)

    async def _read_blocks(
        self, thread_id: str, base: DeltaCheckpoint, blocks: dict[str, MessageBlock]
    ) -> list[Message]:
        refs = base.metadata.blocks
        missing = {digest for digest, _ in refs} - set(blocks)
        if missing:  # only when the chain left its root (an interrupted re-base)
            blocks = {**blocks, **await self.storage.retrieve_blocks(thread_id, missing)}
        messages: list[Message] = []
        for digest, count in refs:
            block = blocks.get(digest)
            if block is None:
                raise corrupt(
                    thread_id, base.metadata.checkpoint_id, f"its message block {digest} is missing"
                )
            try:
                raw = zlib.decompress(block.data)
                if codec.digest(raw) != digest:
                    raise ValueError("content does not match its digest")
                decoded = [Message.from_dict(m) for m in json.loads(raw)]
                if len(decoded) != count:
                    raise ValueError(f"{len(decoded)} messages, {count} expected")
            except _DECODE_ERRORS as exc:
                raise corrupt(
                    thread_id, base.metadata.checkpoint_id, f"message block {digest}: {exc}"
                ) from exc
            messages.extend(decoded)
        return messages

    async def _head(self, thread_id: str, checkpoint_id: str | None) -> _Head | None:
        if checkpoint_id is not None:
            head = self._cached(thread_id, checkpoint_id)
            if head is not None:
                # One read checks it: another checkpointer over the same storage (another
                # process) may have replaced, re-based or deleted it since it was cached.
                record = await self.storage.retrieve(thread_id, checkpoint_id)
                if record is None:
                    self._cache.pop((thread_id, checkpoint_id))
                    return None
                if head.describes(record.metadata):
                    return head
        head = await self._rebuild(thread_id, checkpoint_id)
        if head is not None:
            self._remember(thread_id, head)
        return head

    def _new_blocks(
        self, parent: _Head | None, stable: int, messages: list[Message]
    ) -> tuple[tuple[BlockRef, ...], list[MessageBlock]]:
        """Block references of a full checkpoint, and the blocks to store for it: the
        parent's base blocks within the unchanged prefix (``stable``), then one new block."""
        refs: list[BlockRef] = []
        covered = 0
        for digest, count in parent.base_blocks if parent else ():
            if covered + count > stable:
                break
            refs.append((digest, count))
            covered += count
        rest = messages[covered:]
        if not rest:
            return tuple(refs), []
        raw, data = codec.pack([m.to_dict() for m in rest], self.compression_level, canonical=True)
        block = MessageBlock(digest=codec.digest(raw), data=data, size_bytes=len(raw))
        refs.append((block.digest, len(rest)))
        return tuple(refs), [block]

    async def _write(
        self,
        thread_id: str,
        built: tuple[DeltaCheckpoint, list[MessageBlock], _Head],
        *,
        as_newest: bool = False,
    ) -> None:
        """Store what :meth:`_build` made (so a state that cannot be stored raises before
        anything is written). An existing record of its id is replaced in place, or,
        ``as_newest``, by one that becomes the thread's newest; either way in one storage
        call."""
        record, blocks, head = built
        if blocks:  # blocks first: a reader never sees a record whose blocks are missing
            await self.storage.store_blocks(thread_id, blocks)
        store = self.storage.store_as_newest if as_newest else self.storage.store
        await store(thread_id, record.metadata.checkpoint_id, record)
        self._remember(thread_id, head)

    def _build(
        self,
        state: AgentState,
        thread_id: str,
        checkpoint_id: str,
        parent: _Head | None,
        *,
        force_full: bool = False,
        created_at: datetime | None = None,
    ) -> tuple[DeltaCheckpoint, list[MessageBlock], _Head]:
        subject = subject_of(state.metadata)  # refuses a bad tag before anything is built
        metadata = _json_copy(state.metadata)
        if parent is None:
            splice = Splice(0, 0, list(state.messages))
            stable = 0
        else:
            splice = Splice.between(parent.messages, state.messages, same_message)
            stable = min(parent.stable, splice.at)
        full = force_full or parent is None or parent.depth >= self.max_chain_depth
        if full:
            refs, blocks = self._new_blocks(parent, stable, state.messages)
            record_payload = payload.full_payload(metadata, state.thread_id, len(state.messages))
            parent_id, depth, base_id, base_blocks = None, 0, checkpoint_id, refs
            stable = len(state.messages)
        else:
            assert parent is not None
            record_payload = payload.delta_payload(
                splice,
                len(state.messages),
                parent_metadata=parent.metadata,
                metadata=metadata,
                parent_thread_id=parent.state_thread_id,
                thread_id=state.thread_id,
            )
            refs, blocks = (), []
            parent_id, depth = parent.checkpoint_id, parent.depth + 1
            base_id, base_blocks = parent.base_id, parent.base_blocks
        raw, data = codec.pack(record_payload, self.compression_level)
        created_at = created_at or datetime.now(UTC)
        record = DeltaCheckpoint(
            metadata=CheckpointMetadata(
                checkpoint_id=checkpoint_id,
                thread_id=thread_id,
                parent_id=parent_id,
                is_full=full,
                chain_depth=depth,
                size_bytes=len(raw),
                compressed_size_bytes=len(data),
                base_id=base_id,
                blocks=refs,
                created_at=created_at,
                subject=subject,
            ),
            data=data,
            is_delta=not full,
        )
        # The new state, as a load would rebuild it: the parent's unchanged messages are
        # shared (never mutated), only the inserted ones are copied.
        old = parent.messages if parent else ()
        inserted = [
            Message.from_dict(m) for m in _json_copy([m.to_dict() for m in splice.inserted])
        ]
        head = _Head(
            checkpoint_id=checkpoint_id,
            messages=splice.applied(old, inserted),
            metadata=metadata,
            state_thread_id=state.thread_id,
            base_id=base_id,
            depth=depth,
            base_blocks=base_blocks,
            stable=stable,
            created_at=created_at,
        )
        return record, blocks, head

    async def _save(
        self, state: AgentState, thread_id: str, checkpoint_id: str, *, may_exist: bool
    ) -> None:
        last_saved = None if may_exist else self._newest.get(thread_id)
        parent = None if last_saved is None else self._cached(thread_id, last_saved)
        if parent is not None:
            # The common case, a new checkpoint on the one this checkpointer saved or read
            # last: built from the cache and appended in one storage call, which refuses
            # if that checkpoint is no longer the newest (another writer got there first).
            record, blocks, head = self._build(state, thread_id, checkpoint_id, parent)
            after = (parent.checkpoint_id, parent.created_at, parent.base_id)
            if await self.storage.append_if_newest(thread_id, record, blocks, after=after):
                self._remember(thread_id, head)
                self._newest.put(thread_id, checkpoint_id)
                return
        async with self.storage.writer_lock(thread_id):
            # Re-saving an id: the checkpoints built on it are re-based first (their states
            # stay the same), so that nothing depends on the record about to be replaced;
            # that record stays until the new one takes its place in one storage call, so
            # a state that cannot be stored, or a crash, leaves it as it was.
            replacing = (
                may_exist and await self.storage.retrieve(thread_id, checkpoint_id) is not None
            )
            if replacing:
                await self._detach(thread_id, {checkpoint_id})
                self._forget_thread(thread_id)
            parent = await self._parent(thread_id, checkpoint_id)
            built = self._build(state, thread_id, checkpoint_id, parent)
            await self._write(thread_id, built, as_newest=replacing)
            if replacing:
                await self._collect_blocks(thread_id)
            self._newest.put(thread_id, checkpoint_id)

    async def _parent(self, thread_id: str, checkpoint_id: str) -> _Head | None:
        newest = [
            meta
            for meta in await self.storage.list_checkpoints(thread_id, limit=2)
            if meta.checkpoint_id != checkpoint_id
        ]
        if not newest:
            return None
        parent = self._cached(thread_id, newest[0].checkpoint_id)
        # Another checkpointer may have replaced or re-based it since it was cached.
        if parent is not None and parent.describes(newest[0]):
            return parent
        try:
            parent = await self._rebuild(thread_id, newest[0].checkpoint_id)
        except CheckpointCorruptError as exc:
            # No delta can be written against a checkpoint that cannot be read: this one
            # is stored whole and the thread goes on.
            logger.warning(
                "thread %r: the newest checkpoint cannot be read (%s); "
                "checkpoint %r is stored whole",
                thread_id,
                exc,
                checkpoint_id,
            )
            return None
        if parent is not None:
            self._remember(thread_id, parent)
        return parent

    async def _load(self, thread_id: str, checkpoint_id: str | None) -> AgentState | None:
        head = await self._head(thread_id, checkpoint_id)
        if head is None:
            return None
        if checkpoint_id is None:  # the newest: the next save appends to it
            self._newest.put(thread_id, head.checkpoint_id)
        return head.to_state()

    async def _list(self, thread_id: str, limit: int) -> list[str]:
        return [m.checkpoint_id for m in await self.storage.list_checkpoints(thread_id, limit)]

    async def _delete(self, thread_id: str, checkpoint_id: str | None) -> bool:
        async with self.storage.writer_lock(thread_id):
            if checkpoint_id is None:
                self._forget_thread(thread_id)
                return await self.storage.delete(thread_id)
            return await self._remove(thread_id, {checkpoint_id}) > 0

    async def get_metadata(self, thread_id: str, checkpoint_id: str) -> CheckpointMetadata | None:
        """Metadata of one checkpoint, or None."""
        validate_thread_id(thread_id)
        validate_checkpoint_id(checkpoint_id)
        record = await self.storage.retrieve(thread_id, checkpoint_id)
        return record.metadata if record else None

    async def get_storage_stats(self, thread_id: str) -> dict[str, Any]:
        """Sizes of what the thread stores (all checkpoints, and the blocks).

        ``total_checkpoints``, ``total_size``, ``compressed_size``, ``compression_ratio``,
        ``full_checkpoints`` and ``delta_checkpoints`` count records AND blocks (what the
        thread really occupies); ``blocks`` and ``block_bytes`` give the blocks' share.
        """
        validate_thread_id(thread_id)
        records = await self.storage.list_checkpoints(thread_id, limit=None)
        blocks = await self.storage.block_sizes(thread_id)
        block_raw = sum(size for size, _ in blocks.values())
        block_stored = sum(stored for _, stored in blocks.values())
        total = sum(m.size_bytes for m in records) + block_raw
        stored = sum(m.compressed_size_bytes for m in records) + block_stored
        return {
            "total_checkpoints": len(records),
            "total_size": total,
            "compressed_size": stored,
            "compression_ratio": total / stored if stored else 1.0,
            "full_checkpoints": sum(1 for m in records if m.is_full),
            "delta_checkpoints": sum(1 for m in records if not m.is_full),
            "blocks": len(blocks),
            "block_bytes": block_stored,
        }

    def event_tenant(self) -> str | None:
        """The tenant of the storage (fixed, else bound); ``None`` for storage without."""
        return self.storage.event_tenant()

    async def prune(self, thread_id: str, keep_last: int) -> int:
        """Keep the newest ``keep_last`` checkpoints of the thread; return how many went.

        Kept checkpoints that depended on a deleted one are re-based first (rewritten
        as full checkpoints), so every kept checkpoint still loads to the same state.
        Sends ``checkpoint.pruned`` when any went.
        """
        validate_thread_id(thread_id)
        check_int(keep_last, "keep_last", 0)
        started = time.perf_counter()
        async with self.storage.writer_lock(thread_id):
            records = await self.storage.list_checkpoints(thread_id, limit=None)
            doomed = {m.checkpoint_id for m in records[keep_last:]}
            removed = await self._remove(thread_id, doomed) if doomed else 0
        if removed:
            await self._emit(
                EV_CHECKPOINT_PRUNED, thread_id, started, checkpoints=removed, threads=0
            )
        return removed

    async def _remove(self, thread_id: str, doomed: set[str]) -> int:
        doomed = await self._detach(thread_id, doomed)
        if not doomed:
            return 0
        for checkpoint_id in doomed:
            await self.storage.delete(thread_id, checkpoint_id)
        self._forget_thread(thread_id)
        await self._collect_blocks(thread_id)
        return len(doomed)

    async def _detach(self, thread_id: str, doomed: set[str]) -> set[str]:
        """Re-base the other checkpoints built on one of ``doomed``; return those that exist.

        Afterwards no checkpoint depends on a doomed one (each kept one loads to the same
        state as before), so the doomed ones can be deleted or replaced.
        """
        records = await self.storage.list_checkpoints(thread_id, limit=None)
        doomed = doomed & {meta.checkpoint_id for meta in records}
        # Oldest first, so that a re-based checkpoint's state is rebuilt before any of
        # its ancestors is rewritten.
        for meta in reversed(records):
            if meta.checkpoint_id in doomed or meta.is_full or meta.parent_id not in doomed:
                continue
            await self._rebase(thread_id, meta)
        return doomed

    async def _rebase(self, thread_id: str, meta: CheckpointMetadata) -> None:
        head = await self._rebuild(thread_id, meta.checkpoint_id)
        if head is None:
            raise corrupt(thread_id, meta.checkpoint_id, "it vanished while being re-based")
        group = await self.storage.retrieve_chain(thread_id, meta.checkpoint_id)
        children: dict[str, list[DeltaCheckpoint]] = {}
        for record in group:
            children.setdefault(record.metadata.parent_id or "", []).append(record)
        # Descendants first: if interrupted, their chains still reach a full checkpoint.
        pending = list(children.get(meta.checkpoint_id, ()))
        while pending:
            record = pending.pop()
            rebased = replace(
                record, metadata=record.metadata.rebased(meta.checkpoint_id, meta.chain_depth)
            )
            await self.storage.store(thread_id, record.metadata.checkpoint_id, rebased)
            pending.extend(children.get(record.metadata.checkpoint_id, ()))
        built = self._build(
            head.to_state(),
            thread_id,
            meta.checkpoint_id,
            head,
            force_full=True,
            created_at=meta.created_at,
        )
        await self._write(thread_id, built)

    async def _collect_blocks(self, thread_id: str) -> None:
        records = await self.storage.list_checkpoints(thread_id, limit=None)
        referenced = {digest for m in records if m.is_full for digest, _ in m.blocks}
        unreferenced = set(await self.storage.block_sizes(thread_id)) - referenced
        if unreferenced:
            await self.storage.delete_blocks(thread_id, unreferenced)
