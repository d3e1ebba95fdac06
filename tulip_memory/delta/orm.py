"""ORMDeltaStorage: delta records and message blocks in the database (PostgreSQL under
row-level security, or MySQL/MariaDB); each call one transaction pinned to the tenant.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Collection, Coroutine, Iterable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any, Concatenate, ParamSpec, TypeVar

from asgiref.sync import sync_to_async

from tulip_memory.delta.keyed_locks import WRITER_LOCKS, poll
from tulip_memory.delta.storage import DeltaStorage, root_block_digests
from tulip_memory.delta.types import CheckpointMetadata, DeltaCheckpoint, MessageBlock
from tulip_memory.tenancy.database import TenantDatabase

__all__ = ["ORMDeltaStorage"]

P = ParamSpec("P")
R = TypeVar("R")

_METADATA_FIELDS = (
    "checkpoint_id",
    "thread_id",
    "parent_id",
    "base_id",
    "is_full",
    "chain_depth",
    "created_at",
    "size_bytes",
    "compressed_size_bytes",
    "blocks",
    "subject",
)


def _metadata(row: dict[str, Any]) -> CheckpointMetadata:
    fields = {name: row[name] for name in _METADATA_FIELDS}
    fields["parent_id"] = row["parent_id"] or None
    fields["blocks"] = tuple((str(d), int(n)) for d, n in row["blocks"])
    return CheckpointMetadata(**fields)


def _checkpoint(row: dict[str, Any]) -> DeltaCheckpoint:
    metadata = _metadata(row)
    return DeltaCheckpoint(metadata, bytes(row["data"]), is_delta=not metadata.is_full)


def _block(row: dict[str, Any]) -> MessageBlock:
    return MessageBlock(digest=row["digest"], data=bytes(row["data"]), size_bytes=row["size_bytes"])


def _record_fields(record: DeltaCheckpoint) -> dict[str, Any]:
    meta = record.metadata
    return {
        "parent_id": meta.parent_id or "",
        "base_id": meta.root_id,
        "is_full": meta.is_full,
        "chain_depth": meta.chain_depth,
        "blocks": [list(ref) for ref in meta.blocks],
        "size_bytes": meta.size_bytes,
        "compressed_size_bytes": meta.compressed_size_bytes,
        "data": record.data,
        "created_at": meta.created_at,
        "subject": meta.subject,
    }


def _in_transaction(
    method: Callable[Concatenate[ORMDeltaStorage, str, P], R],
) -> Callable[Concatenate[ORMDeltaStorage, P], Coroutine[Any, Any, R]]:
    """The storage's async method running ``method(tenant, ...)`` in one transaction pinned
    to the tenant, off the event loop (:meth:`TenantDatabase._run`)."""

    async def run(storage: ORMDeltaStorage, /, *args: P.args, **kwargs: P.kwargs) -> R:
        # By name: a subclass's override of the blocking method is the one that runs.
        blocking = getattr(storage, method.__name__)
        return await storage._run(functools.partial(blocking, **kwargs), *args)

    run.__name__ = run.__qualname__ = method.__name__.lstrip("_")
    run.__doc__ = method.__doc__
    return run


def _with_target_first(
    records: list[DeltaCheckpoint], checkpoint_id: str | None
) -> list[DeltaCheckpoint]:
    if checkpoint_id is None or not records:
        return records  # newest first: the newest checkpoint leads
    target = next((r for r in records if r.metadata.checkpoint_id == checkpoint_id), None)
    if target is None:
        return []
    return [target, *(r for r in records if r is not target)]


class ORMDeltaStorage(TenantDatabase, DeltaStorage):
    """DeltaStorage on the Django alias ``using`` (PostgreSQL, MySQL or MariaDB).

    ``tenant`` as for the ORM checkpointers: fixed here, else bound at call time.
    """

    lock_table = "tulip_memory_delta_checkpoint"

    def _records(self, tenant: str, thread_id: str) -> Any:
        from tulip_memory.models import DeltaCheckpointRecord

        return DeltaCheckpointRecord.objects.using(self.using).of_thread(tenant, thread_id)

    def _blocks(self, tenant: str, thread_id: str) -> Any:
        from tulip_memory.models import DeltaBlock

        return DeltaBlock.objects.using(self.using).of_thread(tenant, thread_id)

    def _store(
        self, tenant: str, thread_id: str, checkpoint_id: str, checkpoint: DeltaCheckpoint
    ) -> None:
        fields = _record_fields(checkpoint)
        rows = self._records(tenant, thread_id)
        # In place when it exists: a replaced checkpoint keeps its id, hence its position.
        if not rows.filter(checkpoint_id=checkpoint_id).update(**fields):
            rows.create(tenant=tenant, thread_id=thread_id, checkpoint_id=checkpoint_id, **fields)

    def _store_as_newest(
        self, tenant: str, thread_id: str, checkpoint_id: str, checkpoint: DeltaCheckpoint
    ) -> None:
        rows = self._records(tenant, thread_id)
        # One transaction: the new row (the highest id: the newest) replaces the old one.
        rows.filter(checkpoint_id=checkpoint_id).delete()
        fields = _record_fields(checkpoint)
        rows.create(tenant=tenant, thread_id=thread_id, checkpoint_id=checkpoint_id, **fields)

    def _retrieve(self, tenant: str, thread_id: str, checkpoint_id: str) -> DeltaCheckpoint | None:
        rows = self._records(tenant, thread_id).filter(checkpoint_id=checkpoint_id)
        row = rows.values(*_METADATA_FIELDS, "data").first()
        return None if row is None else _checkpoint(row)

    def _retrieve_chain(
        self, tenant: str, thread_id: str, checkpoint_id: str | None = None
    ) -> list[DeltaCheckpoint]:
        from tulip_memory.models import DeltaCheckpointRecord

        group = DeltaCheckpointRecord.objects.using(self.using).chain_group(
            tenant, thread_id, checkpoint_id
        )
        records = [_checkpoint(row) for row in group.values(*_METADATA_FIELDS, "data")]
        return _with_target_first(records, checkpoint_id)

    def _retrieve_for_load(
        self, tenant: str, thread_id: str, checkpoint_id: str | None = None
    ) -> tuple[list[DeltaCheckpoint], dict[str, MessageBlock]]:
        """Both reads of a load (two SELECTs) in one transaction."""
        from django.db import connections

        from tulip_memory.models import DeltaCheckpointRecord

        if connections[self.using].vendor != "postgresql":
            records = self._retrieve_chain(tenant, thread_id, checkpoint_id)
            digests = list(root_block_digests(records))
            return records, self._retrieve_blocks(tenant, thread_id, digests) if digests else {}
        rows, block_rows = DeltaCheckpointRecord.objects.using(self.using).load_rows(
            tenant, thread_id, checkpoint_id, (*_METADATA_FIELDS, "data")
        )
        blocks = {row["digest"]: _block(row) for row in block_rows}
        return _with_target_first([_checkpoint(row) for row in rows], checkpoint_id), blocks

    def _list(
        self, tenant: str, thread_id: str, limit: int | None = 10
    ) -> list[CheckpointMetadata]:
        rows = self._records(tenant, thread_id).newest_first().values(*_METADATA_FIELDS)
        if limit is not None:
            rows = rows[:limit]
        return [_metadata(row) for row in rows]

    def _delete(self, tenant: str, thread_id: str, checkpoint_id: str | None = None) -> bool:
        rows = self._records(tenant, thread_id)
        if checkpoint_id is not None:
            return rows.filter(checkpoint_id=checkpoint_id).delete()[0] > 0
        self._blocks(tenant, thread_id).delete()
        return rows.delete()[0] > 0

    def _store_blocks(self, tenant: str, thread_id: str, blocks: Iterable[MessageBlock]) -> None:
        blocks = list(blocks)
        existing = set(
            self._blocks(tenant, thread_id)
            .filter(digest__in=[b.digest for b in blocks])
            .values_list("digest", flat=True)
        )
        self._insert_blocks(tenant, thread_id, [b for b in blocks if b.digest not in existing])

    def _insert_blocks(self, tenant: str, thread_id: str, blocks: list[MessageBlock]) -> None:
        from tulip_memory.models import DeltaBlock

        DeltaBlock.objects.using(self.using).bulk_create(
            [
                DeltaBlock(
                    tenant=tenant,
                    thread_id=thread_id,
                    digest=block.digest,
                    data=block.data,
                    size_bytes=block.size_bytes,
                )
                for block in blocks
            ],
            ignore_conflicts=True,
        )

    def _retrieve_blocks(
        self, tenant: str, thread_id: str, digests: Collection[str]
    ) -> dict[str, MessageBlock]:
        rows = self._blocks(tenant, thread_id).filter(digest__in=list(digests))
        return {row["digest"]: _block(row) for row in rows.values("digest", "data", "size_bytes")}

    def _block_sizes(self, tenant: str, thread_id: str) -> dict[str, tuple[int, int]]:
        from django.db.models.functions import Length

        rows = self._blocks(tenant, thread_id).annotate(stored=Length("data"))
        return {
            d: (size, stored)
            for d, size, stored in rows.values_list("digest", "size_bytes", "stored")
        }

    def _delete_blocks(self, tenant: str, thread_id: str, digests: Collection[str]) -> int:
        return self._blocks(tenant, thread_id).filter(digest__in=list(digests)).delete()[0]

    @asynccontextmanager
    async def writer_lock(self, thread_id: str) -> AsyncIterator[None]:
        """The thread's lock in this process, then its database lock (across processes).

        The database lock is session-level on this context's connection; it is polled
        (never waited for inside the database) because the connection's thread may be
        shared by other work of this process, which must not stall behind the wait.
        """
        tenant = self._resolve_tenant()
        name = self._lock_name(tenant, thread_id)
        async with WRITER_LOCKS.hold((self.using, name)):
            await poll(functools.partial(sync_to_async(self._try_lock), name, 0))
            try:
                yield
            finally:
                await sync_to_async(self._unlock)(name)

    async def append_if_newest(
        self,
        thread_id: str,
        checkpoint: DeltaCheckpoint,
        blocks: list[MessageBlock],
        *,
        after: tuple[str, datetime, str],
    ) -> bool:
        """On PostgreSQL ONE transaction: a shared writer lock, a conditional INSERT of the
        record, then its blocks' INSERT when there are any (see the base class)."""
        from django.db import connections

        if connections[self.using].vendor != "postgresql":
            return await super().append_if_newest(thread_id, checkpoint, blocks, after=after)
        name = self._lock_name(self._resolve_tenant(), thread_id)
        # This process's writers of the thread share one database session (Django's
        # thread-sensitive connection), where an advisory lock is re-entrant: the
        # in-process lock keeps them apart; the shared database lock keeps the other
        # processes' exclusive writers (deletes, prunes, re-saves) out.
        async with WRITER_LOCKS.hold((self.using, name)):
            return await self._run(self._append_if_newest, thread_id, checkpoint, blocks, after)

    def _append_if_newest(
        self,
        tenant: str,
        thread_id: str,
        checkpoint: DeltaCheckpoint,
        blocks: list[MessageBlock],
        after: tuple[str, datetime, str],
    ) -> bool:
        from tulip_memory.models import DeltaCheckpointRecord

        if not self._try_shared_transaction_lock(self._lock_name(tenant, thread_id)):
            return False
        meta = checkpoint.metadata
        appended = DeltaCheckpointRecord.objects.using(self.using).append_if_newest(
            tenant, thread_id, meta.checkpoint_id, _record_fields(checkpoint), after=after
        )
        if appended and blocks:
            self._insert_blocks(tenant, thread_id, blocks)
        return appended

    store = _in_transaction(_store)
    store_as_newest = _in_transaction(_store_as_newest)
    retrieve = _in_transaction(_retrieve)
    retrieve_chain = _in_transaction(_retrieve_chain)
    retrieve_for_load = _in_transaction(_retrieve_for_load)
    list_checkpoints = _in_transaction(_list)
    delete = _in_transaction(_delete)
    store_blocks = _in_transaction(_store_blocks)
    retrieve_blocks = _in_transaction(_retrieve_blocks)
    block_sizes = _in_transaction(_block_sizes)
    delete_blocks = _in_transaction(_delete_blocks)
