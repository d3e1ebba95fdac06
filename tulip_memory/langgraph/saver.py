"""DjangoSaver: LangGraph's checkpoint saver on this app's tables, per tenant, delta-compressed.

One row per checkpoint (:mod:`tulip_memory.models.langgraph`); a child of the checkpoint
this saver wrote last stores only the changed values, a list as a splice. Every statement
runs pinned to the tenant (the ``tenant`` argument, else the bound one; never the graph's
config). Design: docs/design/checkpoint-chains.md.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, TypeVar, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from tulip_memory.chains import channels as chains
from tulip_memory.chains.options import MAX_DEPTH
from tulip_memory.chains.rows import (
    Record,
    RowVersion,
    chain_rows,
    pack_record,
    pack_writes,
    record_bytes,
    unpack_writes,
)
from tulip_memory.chains.walk import corrupt, where
from tulip_memory.core.identifiers import (
    CHECKPOINT_ID_MAX_LENGTH,
    THREAD_ID_MAX_LENGTH,
    surrogate_at,
    validate_identifier,
)
from tulip_memory.core.json_paths import first_at
from tulip_memory.core.lru import LRUCache
from tulip_memory.core.numbers import check_int
from tulip_memory.core.subjects import subject_of
from tulip_memory.events import (
    EV_CHECKPOINT_DELETED,
    EV_CHECKPOINT_LOADED,
    EV_CHECKPOINT_PRUNED,
    EV_CHECKPOINT_SAVED,
    elapsed_ms,
    emit,
    emit_sync,
)
from tulip_memory.tenancy.connections import SharedConnection
from tulip_memory.tenancy.database import TenantDatabase

__all__ = ["DjangoSaver"]

T = TypeVar("T")

# The digits of a channel version's counter (see DjangoSaver.get_next_version).
VERSION_DIGITS = 12

PRUNE_STRATEGIES = ("keep_latest", "delete")

# A list channel's head in this process: (tenant, thread, namespace, channel) -> Head.
_HeadKey = tuple[str, str, str, str]
# A namespace's tip in this process: (tenant, thread, namespace) -> _Tip.
_TipKey = tuple[str, str, str]


def _thread_id(value: object, what: str = "thread_id") -> str:
    return validate_identifier(value, what, max_length=THREAD_ID_MAX_LENGTH)


def _checkpoint_id(value: object, what: str) -> str:
    return validate_identifier(value, what, max_length=CHECKPOINT_ID_MAX_LENGTH)


def _configurable(config: RunnableConfig) -> tuple[str, str, str | None]:
    configurable = config.get("configurable") or {}
    thread_id = _thread_id(configurable.get("thread_id"), "config['configurable']['thread_id']")
    checkpoint_ns = configurable.get("checkpoint_ns") or ""
    if not isinstance(checkpoint_ns, str):
        raise ValueError(f"checkpoint_ns must be a string, got {checkpoint_ns!r}")
    if checkpoint_ns:
        validate_identifier(
            checkpoint_ns,
            "config['configurable']['checkpoint_ns']",
            max_length=THREAD_ID_MAX_LENGTH,
        )
    checkpoint_id = get_checkpoint_id(config)
    if checkpoint_id is not None and checkpoint_id != "":
        _checkpoint_id(checkpoint_id, "config['configurable']['checkpoint_id']")
    return thread_id, checkpoint_ns, checkpoint_id


def _run_id(metadata: CheckpointMetadata) -> str:
    from tulip_memory.models.langgraph import NAME_MAX_LENGTH

    run_id = metadata.get("run_id")
    text = "" if run_id is None else str(run_id)
    if text:
        validate_identifier(text, "metadata['run_id']", max_length=NAME_MAX_LENGTH)
    return text


def _has_surrogate(text: object) -> bool:
    return isinstance(text, str) and surrogate_at(text) is not None


# A put's config ids, its metadata as stored and its run id.
_Checked = tuple[tuple[str, str, str | None], CheckpointMetadata, str]


def _check_put(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
) -> _Checked:
    """The config's ids, the metadata as stored and its run id; ValueError naming the
    field if ``put`` cannot store these. The serializer cannot encode a lone surrogate in
    a key and writes ``?`` for one in a value: refused here."""
    ids = _configurable(config)
    _checkpoint_id(checkpoint.get("id"), "checkpoint['id']")
    for name, versions in (
        ("checkpoint['channel_versions']", checkpoint.get("channel_versions") or {}),
        ("new_versions", new_versions or {}),
    ):
        for channel in versions:
            validate_identifier(channel, f"{name} key {channel!r}")
    serializable = get_serializable_checkpoint_metadata(config, metadata)
    found = first_at(serializable, "metadata", _has_surrogate)
    if found is not None:
        raise ValueError(f"{found[0]} holds a lone surrogate, which UTF-8 cannot encode")
    return ids, serializable, _run_id(serializable)


def _before_id(before: RunnableConfig | None) -> str | None:
    before_id = get_checkpoint_id(before) if before is not None else None
    if not before_id:
        return None
    return _checkpoint_id(before_id, "before['configurable']['checkpoint_id']")


@dataclass(frozen=True)
class _ListQuery:
    lookups: dict[str, str]
    filter: dict[str, Any] | None
    limit: int | None


def _list_query(
    config: RunnableConfig | None,
    filter: dict[str, Any] | None,
    before: RunnableConfig | None,
    limit: int | None,
) -> _ListQuery:
    lookups = {}
    if config is not None:
        thread_id, checkpoint_ns, checkpoint_id = _configurable(config)
        lookups["thread_id"] = thread_id
        if (config.get("configurable") or {}).get("checkpoint_ns") is not None:
            lookups["checkpoint_ns"] = checkpoint_ns
        if checkpoint_id is not None:
            lookups["checkpoint_id"] = checkpoint_id
    if (before_id := _before_id(before)) is not None:
        lookups["checkpoint_id__lt"] = before_id
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
        raise ValueError(f"limit must be an int or None, got {limit!r}")
    if filter is not None and not isinstance(filter, dict):
        raise ValueError(f"filter must be a dict or None, got {filter!r}")
    return _ListQuery(lookups, filter, limit)


def _id_list(values: object, what: str, kind: str) -> list[object]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ValueError(f"{what} must be a sequence of {kind}, got {values!r}")
    return list(values)


def _writes_ids(config: RunnableConfig) -> tuple[str, str, str, str]:
    """The thread, namespace and checkpoint ids of ``put_writes`` and the subject its row is
    tagged with: the one the checkpoint's metadata takes from the same config (writes may
    come before their checkpoint; erasure finds the row by it)."""
    thread_id, checkpoint_ns, checkpoint_id = _configurable(config)
    if checkpoint_id is None:
        raise ValueError("put_writes needs config['configurable']['checkpoint_id']")
    subject = subject_of(get_serializable_checkpoint_metadata(config, {}))
    return thread_id, checkpoint_ns, checkpoint_id, subject


def _checked_writes(
    writes: Sequence[tuple[str, Any]], task_id: object, task_path: object
) -> list[tuple[str, Any]]:
    validate_identifier(task_id, "task_id")
    if task_path != "":
        validate_identifier(task_path, "task_path")
    pairs = _id_list(writes, "writes", "(channel, value) pairs")
    for index, write in enumerate(pairs):
        if not isinstance(write, (tuple, list)) or len(write) != 2:
            raise ValueError(f"writes[{index}] must be a (channel, value) pair, got {write!r:.80}")
        validate_identifier(write[0], f"writes[{index}] channel")
    return cast(list[tuple[str, Any]], pairs)


def _thread_ids(values: object, what: str = "thread_ids") -> list[str]:
    ids = _id_list(values, what, "thread ids")
    return [_thread_id(value, f"{what}[{i}]") for i, value in enumerate(ids)]


def _run_ids(values: object) -> list[str]:
    ids = _id_list(values, "run_ids", "run ids")
    return [validate_identifier(str(value), f"run_ids[{i}]") for i, value in enumerate(ids)]


def _config(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": checkpoint_ns,
            "checkpoint_id": checkpoint_id,
        }
    }


@dataclass(frozen=True)
class _Tip:
    """The checkpoint this saver wrote last in a namespace: its record without values and
    the pending writes stored with it since (what a child is compressed against), and its
    row's id and version (a row changed by anyone else is no parent to compress against).
    """

    checkpoint_id: str
    record: Record
    depth: int
    row_version: RowVersion
    writes: bytes = b""


def _ids(tenant: str, config: RunnableConfig, started: float) -> dict[str, Any]:
    configurable = config["configurable"]
    return {
        "tenant": tenant,
        "thread_id": configurable["thread_id"],
        "checkpoint_ns": configurable.get("checkpoint_ns", ""),
        "checkpoint_id": configurable.get("checkpoint_id"),
        "duration_ms": elapsed_ms(started),
    }


def _loaded(
    tenant: str, config: RunnableConfig, found: CheckpointTuple | None, started: float
) -> dict[str, Any]:
    return {**_ids(tenant, config, started), "found": found is not None}


def _deleted(tenant: str, thread_id: str, checkpoints: int, started: float) -> dict[str, Any]:
    return {
        "tenant": tenant,
        "thread_id": thread_id,
        "checkpoint_id": None,
        "deleted": checkpoints > 0,
        "duration_ms": elapsed_ms(started),
    }


def _pruned(tenant: str, removed: dict[str, int], started: float) -> dict[str, Any]:
    return {"tenant": tenant, "thread_id": None, **removed, "duration_ms": elapsed_ms(started)}


class DjangoSaver(TenantDatabase, BaseCheckpointSaver[str]):
    """LangGraph checkpoint saver on the PostgreSQL alias ``using``.

    ``tenant`` fixes the tenant (else the bound one at call time); ``serde`` is LangGraph's
    serializer; ``max_chain_depth`` bounds the parents a load reads; ``cache_size`` the
    namespaces' tips and list heads kept; ``record_cache_bytes`` the unpacked rows kept.
    """

    vendor = "postgresql"

    def __init__(
        self,
        using: str = "default",
        *,
        tenant: str | None = None,
        serde: SerializerProtocol | None = None,
        max_chain_depth: int = 32,
        cache_size: int = 1024,
        record_cache_bytes: int = 16 * 2**20,
    ) -> None:
        check_int(max_chain_depth, "max_chain_depth", 0, MAX_DEPTH)
        check_int(cache_size, "cache_size", 0, 10_000_000)
        check_int(record_cache_bytes, "record_cache_bytes", 0, 2**40)
        TenantDatabase.__init__(self, using, tenant=tenant)
        BaseCheckpointSaver.__init__(self, serde=serde)
        self.max_chain_depth = max_chain_depth
        self._heads: LRUCache[_HeadKey, chains.Head] = LRUCache(cache_size, name="cache_size")
        self._tips: LRUCache[_TipKey, _Tip] = LRUCache(cache_size, name="cache_size")
        # Rows unpacked by loads, by row id and row version: a row's record is unpacked
        # once while it is unchanged, however many loads walk through it.
        self._records: LRUCache[RowVersion, Record] = LRUCache(
            record_cache_bytes, name="record_cache_bytes", weigh=record_bytes
        )
        # The sync API's connection, and a thread for callers in an event loop's thread.
        self._connection = SharedConnection(using)
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tulip-langgraph")

    def _call(self, func: Callable[..., T], *args: Any, pin: bool = False) -> T:
        """``func(tenant, *args)`` on the saver's connection (see :meth:`_execute`); from a
        thread running an event loop, where Django refuses blocking calls, on the saver's
        worker thread."""
        tenant = self._resolve_tenant()
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return self._connection.run(self._execute, tenant, func, args, pin)
        run = self._connection.run
        return self._worker.submit(run, self._execute, tenant, func, args, pin).result()

    async def _acall(self, func: Callable[..., T], *args: Any, pin: bool = False) -> T:
        from asgiref.sync import sync_to_async

        return await sync_to_async(self._execute)(self._resolve_tenant(), func, args, pin)

    def _execute(self, tenant: str, func: Callable[..., T], args: tuple[Any, ...], pin: bool) -> T:
        """``func(tenant, *args)`` in a tenant transaction; with ``pin``, a func of one
        statement (or a few that stand alone) gets ``pin=tenant`` instead when the
        connection is in autocommit and binds client-side: each statement then goes with
        ``set_config`` in one query, one implicit transaction, one round trip (not on Citus,
        whose workers see no ``set_config``)."""
        import psycopg
        from django.db import connections

        from tulip_memory.tenancy.cluster import is_citus
        from tulip_memory.tenancy.context import tenant_atomic

        if pin:
            connection = connections[self.using]
            connection.ensure_connection()
            factory = connection.connection.cursor_factory
            autocommit = connection.get_autocommit() and not connection.in_atomic_block
            one_query = autocommit and issubclass(factory, psycopg.ClientCursor)
            if one_query and not is_citus(connection):
                return func(tenant, *args, pin=tenant)
        with tenant_atomic(tenant, using=self.using):
            return func(tenant, *args, pin=None) if pin else func(tenant, *args)

    def get_next_version(self, current: str | None, channel: None) -> str:
        """A zero-padded counter and a random tie-breaker, ``000000000042.9f86d081``.

        They sort as strings in counter order (as LangGraph compares them), two forks writing a
        channel at one counter get different versions, and a thread written with
        ``PostgresSaver``-style versions goes on after them.
        """
        if current is None:
            counter = 0
        elif isinstance(current, int):
            counter = current
        else:
            counter = int(current.split(".")[0])
        if counter + 1 >= 10**VERSION_DIGITS:
            raise ValueError(
                f"channel {channel!r} has reached {counter} versions: the version counter "
                f"has {VERSION_DIGITS} digits"
            )
        return f"{counter + 1:0{VERSION_DIGITS}}.{random.getrandbits(32):08x}"

    def _entries(
        self,
        key: _TipKey,
        values: dict[str, Any],
        versions: ChannelVersions,
        parent: _Tip | None,
    ) -> list[chains.Stored]:
        stored = []
        for channel, version in versions.items():
            if channel not in values:
                continue  # a version without a value (a trigger channel): nothing to store
            head = self._heads.get((*key, channel))
            known = parent.record.versions.get(channel) if parent else None
            # Stored whole unless the head is the parent's version; the head serves anyway
            # to build the next one.
            whole = head is None or head.version != str(known)
            dumps = self.serde.dumps_typed
            stored.append(
                chains.encode(channel, str(version), values[channel], head, dumps, whole=whole)
            )
        return stored

    def _put(
        self,
        tenant: str,
        checked: _Checked,
        checkpoint: Checkpoint,
        new_versions: ChannelVersions,
        *,
        pin: str | None,
    ) -> RunnableConfig:
        from tulip_memory.models import LangGraphCheckpoint

        (thread_id, checkpoint_ns, parent_id), serializable, run_id = checked
        body = dict(checkpoint)
        values = cast(dict[str, Any], body.pop("channel_values", {}) or {})
        versions = cast(ChannelVersions, body.pop("channel_versions", {}) or {})
        checkpoint_type, checkpoint_data = self.serde.dumps_typed(body)
        metadata_type, metadata_data = self.serde.dumps_typed(serializable)
        key = (tenant, thread_id, checkpoint_ns)
        # Stored against the parent when this saver wrote it last, and every version the
        # checkpoint refers to is new or the parent's (so its parents hold it).
        parent = self._tips.get(key)
        if parent is not None and not (
            parent.checkpoint_id == parent_id
            and parent.depth < self.max_chain_depth
            and all(
                channel in new_versions or parent.record.versions.get(channel) == version
                for channel, version in versions.items()
            )
        ):
            parent = None
        rows = LangGraphCheckpoint.rows.using(self.using)
        while True:
            stored = self._entries(key, values, new_versions if parent else versions, parent)
            record = Record(
                checkpoint_type,
                checkpoint_data,
                metadata_type,
                metadata_data,
                dict(versions),
                tuple(s.entry for s in stored),
            )
            depth = parent.depth + 1 if parent else 0
            row = {
                "thread_id": thread_id,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint["id"],
                "parent_checkpoint_id": parent_id or "",
                "run_id": run_id,
                "subject": subject_of(serializable),
                "depth": depth,
                "data": pack_record(record, (parent.record, parent.writes) if parent else None),
            }
            # The parent was deleted or changed (stored again, given writes) by another
            # saver meanwhile: store every value.
            version = rows.save_checkpoint(
                tenant, row, parent.row_version if parent else None, pin=pin
            )
            if version is not None or not parent:
                break
            parent = None
        # The namespace's tip and the lists' heads, set here while the saver's connection
        # is held (where the writes of its tasks join it), in the order of the
        # statements: another put on the thread cannot come between a statement and the
        # heads the next splice is taken against. Should the transaction not commit, the
        # next delta is refused by its statement and stored whole.
        if version is None:  # a row that rows are stored against, not overwritten
            self._tips.pop(key)
        else:
            self._tips.put(key, _Tip(checkpoint["id"], replace(record, entries=()), depth, version))
        self._remember(key, stored)
        return _config(thread_id, checkpoint_ns, checkpoint["id"])

    def _remember(self, namespace: _TipKey, stored: list[chains.Stored]) -> None:
        for s in stored:
            key = (*namespace, s.entry.channel)
            head = chains.next_head(s, self._heads.get(key), self.serde.loads_typed)
            if head is None:
                self._heads.pop(key)
            else:
                self._heads.put(key, head)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        started = time.perf_counter()
        tenant = self._resolve_tenant()
        checked = _check_put(config, checkpoint, metadata, new_versions)
        saved = self._call(self._put, checked, checkpoint, new_versions, pin=True)
        emit_sync(EV_CHECKPOINT_SAVED, sender=type(self), **_ids(tenant, saved, started))
        return saved

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        started = time.perf_counter()
        tenant = self._resolve_tenant()
        checked = _check_put(config, checkpoint, metadata, new_versions)
        saved = await self._acall(self._put, checked, checkpoint, new_versions, pin=True)
        await emit(EV_CHECKPOINT_SAVED, sender=type(self), **_ids(tenant, saved, started))
        return saved

    def _put_writes(
        self,
        tenant: str,
        ids: tuple[str, str, str, str],
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
        *,
        pin: str | None,
    ) -> None:
        from tulip_memory.models import LangGraphCheckpoint

        thread_id, checkpoint_ns, checkpoint_id, subject = ids
        rows = [
            (WRITES_IDX_MAP.get(channel, idx), channel, *self.serde.dumps_typed(value))
            for idx, (channel, value) in enumerate(writes)
        ]
        if not rows:
            return
        # Special writes (errors, interrupts...) replace the task's earlier ones.
        special = all(channel in WRITES_IDX_MAP for channel, _ in writes)
        frame = pack_writes(task_id, task_path, special, rows)
        row_id, version = LangGraphCheckpoint.rows.using(self.using).save_writes(
            tenant, thread_id, checkpoint_ns, checkpoint_id, frame, subject=subject, pin=pin
        )
        # Pending writes of the namespace's tip join it (see _put), if the row is still
        # the one this saver wrote; if another saver changed it meanwhile, the tip is
        # forgotten (a child of it is stored whole).
        key = (tenant, thread_id, checkpoint_ns)
        tip = self._tips.get(key)
        if tip is not None and tip.checkpoint_id == checkpoint_id:
            if (row_id, version - 1) == tip.row_version:
                after = (row_id, version)
                self._tips.put(key, replace(tip, writes=tip.writes + frame, row_version=after))
            else:
                self._tips.pop(key)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        ids = _writes_ids(config)
        writes = _checked_writes(writes, task_id, task_path)
        self._call(self._put_writes, ids, writes, task_id, task_path, pin=True)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        ids = _writes_ids(config)
        writes = _checked_writes(writes, task_id, task_path)
        await self._acall(self._put_writes, ids, writes, task_id, task_path, pin=True)

    def _walks(
        self,
        rows: list[dict[str, Any]],
        row_walks: dict[int, list[dict[str, Any]] | None] | None = None,
    ) -> dict[int, list[Record]]:
        from tulip_memory.models.langgraph import walk_records, walks

        memo: dict[int, Record] = {}
        for row in rows:
            record = self._records.get((row["id"], row["stamp"]))
            if record is not None:
                memo[row["id"]] = record
        found = {}
        for row_id, walk in (walks(rows) if row_walks is None else row_walks).items():
            if walk is None:
                row = next(r for r in rows if r["id"] == row_id)
                raise corrupt(
                    row["thread_id"],
                    row["checkpoint_id"],
                    "a checkpoint its values are stored against is missing",
                )
            found[row_id] = walk_records(walk, memo)
        for row in rows:
            if row["id"] in memo:
                self._records.put((row["id"], row["stamp"]), memo[row["id"]])
        return found

    def _tuples(
        self, rows: list[dict[str, Any]], walked: dict[int, list[Record]]
    ) -> dict[int, CheckpointTuple]:
        by_id = {row["id"]: row for row in rows if row["selected"]}
        memos: dict[tuple[str, str, str], dict[tuple[str, str], Any]] = {}
        found = {}
        for row_id, walk in walked.items():
            row, record = by_id[row_id], walk[0]
            thread_id, checkpoint_ns, checkpoint_id = (
                row["thread_id"],
                row["checkpoint_ns"],
                row["checkpoint_id"],
            )
            at = where(thread_id, checkpoint_id)
            chain = chain_rows(walk)
            values = {}
            for channel, version in record.versions.items():
                versions = chain.get(channel, {})
                if str(version) in versions:
                    values[channel] = chains.rebuild(
                        versions,
                        str(version),
                        self.serde.loads_typed,
                        memos.setdefault((thread_id, checkpoint_ns, channel), {}),
                        f"channel {channel!r} of {at}",
                    )
            checkpoint = self.serde.loads_typed((record.checkpoint_type, record.checkpoint))
            checkpoint["channel_values"] = values
            checkpoint["channel_versions"] = dict(record.versions)
            pending = sorted(
                unpack_writes(bytes(row["writes"]), at),
                key=lambda w: writes_sort_key(w.task_path, w.task_id, w.idx),
            )
            parent_id = row["parent_checkpoint_id"]
            found[row_id] = CheckpointTuple(
                config=_config(thread_id, checkpoint_ns, checkpoint_id),
                checkpoint=checkpoint,
                metadata=self.serde.loads_typed((record.metadata_type, record.metadata)),
                parent_config=_config(thread_id, checkpoint_ns, parent_id) if parent_id else None,
                pending_writes=[
                    (w.task_id, w.channel, self.serde.loads_typed((w.type, w.data)))
                    for w in pending
                ],
            )
        return found

    def read_rows(self, tenant: str, row_ids: Sequence[int]) -> dict[int, CheckpointTuple]:
        """The checkpoint tuples of the rows ``row_ids`` of ``tenant``, by row id, in the
        caller's transaction (pinned to ``tenant``: the admin's views).
        """
        from tulip_memory.models import LangGraphCheckpoint

        rows = LangGraphCheckpoint.rows.using(self.using)
        loaded = rows.load_rows(tenant, "AND id = ANY(%s)", [list(row_ids)])
        return self._tuples(loaded, self._walks(loaded))

    def _load(
        self, tenant: str, ids: tuple[str, str, str | None], *, pin: str | None = None
    ) -> tuple[list[dict[str, Any]], dict[int, list[Record]]]:
        from tulip_memory.models import LangGraphCheckpoint

        thread_id, checkpoint_ns, checkpoint_id = ids
        rows, row_walks = LangGraphCheckpoint.rows.using(self.using).load_checkpoint(
            tenant, thread_id, checkpoint_ns, checkpoint_id, pin=pin
        )
        return rows, self._walks(rows, row_walks)

    def _tuple(
        self, rows: list[dict[str, Any]], walked: dict[int, list[Record]]
    ) -> CheckpointTuple | None:
        return next(iter(self._tuples(rows, walked).values()), None)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        started = time.perf_counter()
        ids = _configurable(config)
        tenant = self._resolve_tenant()
        # Values are deserialized once the shared connection is free for other callers.
        found = self._tuple(*self._call(self._load, ids, pin=True))
        emit_sync(
            EV_CHECKPOINT_LOADED, sender=type(self), **_loaded(tenant, config, found, started)
        )
        return found

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        started = time.perf_counter()
        ids = _configurable(config)
        tenant = self._resolve_tenant()
        found = self._tuple(*await self._acall(self._load, ids, pin=True))
        await emit(
            EV_CHECKPOINT_LOADED, sender=type(self), **_loaded(tenant, config, found, started)
        )
        return found

    def _list_rows(
        self, tenant: str, query: _ListQuery
    ) -> tuple[list[dict[str, Any]], dict[int, list[Record]]]:
        from tulip_memory.models import LangGraphCheckpoint

        manager = LangGraphCheckpoint.objects.using(self.using)
        rows = manager.filter(tenant=tenant, **query.lookups)
        filter, limit = query.filter, query.limit
        rows = rows.order_by("-checkpoint_id", "-id")
        if not filter and limit is not None:
            rows = rows[: max(limit, 0)]
        ids = list(rows.values_list("id", flat=True))
        if not ids:
            return [], {}
        loaded = manager.load_rows(tenant, "AND id = ANY(%s)", [ids])
        walked = self._walks(loaded)
        if filter:
            metadata = {
                row_id: self.serde.loads_typed((walk[0].metadata_type, walk[0].metadata))
                for row_id, walk in walked.items()
            }
            ids = [
                row_id
                for row_id in ids
                if all(metadata[row_id].get(key) == value for key, value in filter.items())
            ]
            if limit is not None:
                ids = ids[: max(limit, 0)]
        return loaded, {i: walked[i] for i in ids if i in walked}

    def _listed(
        self, loaded: list[dict[str, Any]], walked: dict[int, list[Record]]
    ) -> list[CheckpointTuple]:
        return list(self._tuples(loaded, walked).values())

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        query = _list_query(config, filter, before, limit)
        # As in get_tuple: values are deserialized once the connection is free again.
        yield from self._listed(*self._call(self._list_rows, query))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        query = _list_query(config, filter, before, limit)
        for found in self._listed(*await self._acall(self._list_rows, query)):
            yield found

    def _forget(self, tenant: str, thread_ids: Sequence[str]) -> None:
        threads = set(thread_ids)
        self._heads.discard_where(lambda key: key[0] == tenant and key[1] in threads)
        self._tips.discard_where(lambda key: key[0] == tenant and key[1] in threads)

    def _delete_threads(self, tenant: str, thread_ids: Sequence[str]) -> int:
        from tulip_memory.models import LangGraphCheckpoint

        return LangGraphCheckpoint.objects.using(self.using).delete_threads(tenant, thread_ids)

    def delete_thread(self, thread_id: str) -> None:
        started = time.perf_counter()
        thread_id = _thread_id(thread_id)
        tenant = self._resolve_tenant()
        deleted = self._call(self._delete_threads, [thread_id])
        self._forget(tenant, [thread_id])
        emit_sync(
            EV_CHECKPOINT_DELETED,
            sender=type(self),
            **_deleted(tenant, thread_id, deleted, started),
        )

    async def adelete_thread(self, thread_id: str) -> None:
        started = time.perf_counter()
        thread_id = _thread_id(thread_id)
        tenant = self._resolve_tenant()
        deleted = await self._acall(self._delete_threads, [thread_id])
        self._forget(tenant, [thread_id])
        await emit(
            EV_CHECKPOINT_DELETED,
            sender=type(self),
            **_deleted(tenant, thread_id, deleted, started),
        )

    def _delete_for_runs(self, tenant: str, run_ids: Sequence[str]) -> None:
        from tulip_memory.models import LangGraphCheckpoint

        LangGraphCheckpoint.objects.using(self.using).delete_runs(tenant, run_ids)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._call(self._delete_for_runs, _run_ids(run_ids))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._acall(self._delete_for_runs, _run_ids(run_ids))

    def _copy_thread(self, tenant: str, source: str, target: str) -> None:
        from tulip_memory.models import LangGraphCheckpoint

        LangGraphCheckpoint.rows.using(self.using).copy_thread(tenant, source, target)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        source = _thread_id(source_thread_id, "source_thread_id")
        target = _thread_id(target_thread_id, "target_thread_id")
        self._call(self._copy_thread, source, target)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        source = _thread_id(source_thread_id, "source_thread_id")
        target = _thread_id(target_thread_id, "target_thread_id")
        await self._acall(self._copy_thread, source, target)

    def _prune(self, tenant: str, thread_ids: Sequence[str], strategy: str) -> dict[str, int]:
        if strategy not in PRUNE_STRATEGIES:
            raise ValueError(f"strategy must be one of {PRUNE_STRATEGIES}, got {strategy!r}")
        threads = list(dict.fromkeys(thread_ids))
        if strategy == "delete":
            return {"checkpoints": self._delete_threads(tenant, threads), "threads": len(threads)}
        return {"checkpoints": self._keep_newest(tenant, threads, 1), "threads": 0}

    def _keep_newest(self, tenant: str, thread_ids: Sequence[str], keep_last: int) -> int:
        from tulip_memory.models import LangGraphCheckpoint

        return LangGraphCheckpoint.objects.using(self.using).keep_newest(
            tenant, thread_ids, keep_last
        )

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        started = time.perf_counter()
        thread_ids = _thread_ids(thread_ids)
        tenant = self._resolve_tenant()
        removed = self._call(self._prune, thread_ids, strategy)
        self._forget(tenant, thread_ids)
        emit_sync(EV_CHECKPOINT_PRUNED, sender=type(self), **_pruned(tenant, removed, started))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        started = time.perf_counter()
        thread_ids = _thread_ids(thread_ids)
        tenant = self._resolve_tenant()
        removed = await self._acall(self._prune, thread_ids, strategy)
        self._forget(tenant, thread_ids)
        await emit(EV_CHECKPOINT_PRUNED, sender=type(self), **_pruned(tenant, removed, started))

    def keep_newest(self, thread_ids: Sequence[str], keep_last: int) -> int:
        """Keep the newest ``keep_last`` checkpoints of every namespace of the threads (and
        every value they need); how many were deleted. The oldest kept loses its parent link.
        """
        started, tenant, threads = self._keep_newest_call(thread_ids, keep_last)
        removed = self._call(self._keep_newest, threads, keep_last)
        self._kept_newest(tenant, threads, removed, started)
        return removed

    async def akeep_newest(self, thread_ids: Sequence[str], keep_last: int) -> int:
        started, tenant, threads = self._keep_newest_call(thread_ids, keep_last)
        removed = await self._acall(self._keep_newest, threads, keep_last)
        self._kept_newest(tenant, threads, removed, started)
        return removed

    def _keep_newest_call(
        self, thread_ids: Sequence[str], keep_last: int
    ) -> tuple[float, str, Sequence[str]]:
        check_int(keep_last, "keep_last", 1)
        return time.perf_counter(), self._resolve_tenant(), _thread_ids(thread_ids)

    def _kept_newest(
        self, tenant: str, threads: Sequence[str], removed: int, started: float
    ) -> None:
        self._forget(tenant, threads)
        counts = {"checkpoints": removed, "threads": 0}
        emit_sync(EV_CHECKPOINT_PRUNED, sender=type(self), **_pruned(tenant, counts, started))

    async def astorage_bytes(self, thread_id: str) -> int:
        return await self._acall(self._storage_bytes, _thread_id(thread_id))

    def storage_bytes(self, thread_id: str) -> int:
        """Compressed bytes of the thread's checkpoints, metadata, values and writes."""
        return self._call(self._storage_bytes, _thread_id(thread_id))

    def _storage_bytes(self, tenant: str, thread_id: str) -> int:
        from tulip_memory.models import LangGraphCheckpoint

        rows = LangGraphCheckpoint.rows.using(self.using)
        return rows.filter(tenant=tenant, thread_id=thread_id).stored_bytes()
