"""The retention sweep of checkpoints, one tenant at a time: ``CHECKPOINT_IDLE_DAYS``
deletes idle threads, ``CHECKPOINT_KEEP_LAST`` keeps each thread's newest N, in every
checkpoint table (delta chains re-based). Sends one ``checkpoint.pruned`` per tenant and
table, once committed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from asgiref.sync import async_to_sync

from tulip_memory.core.clock import utc_now
from tulip_memory.events import EV_CHECKPOINT_PRUNED, elapsed_ms, muted
from tulip_memory.retention.policy import RetentionPolicy, retention_policy
from tulip_memory.retention.tenants import per_tenant

if TYPE_CHECKING:
    from django.db.models import QuerySet

__all__ = ["CheckpointPruning", "prune_checkpoints", "prune_tenant_checkpoints"]


@dataclass
class CheckpointPruning:
    """What the checkpoint sweep removed in one tenant (or would, in a dry run)."""

    checkpoints: int = 0  # checkpoints deleted (full snapshots and delta records)
    threads: int = 0  # idle threads deleted whole


def _full_snapshots(
    tenant: str, using: str, policy: RetentionPolicy, now: datetime, dry_run: bool
) -> CheckpointPruning:
    from tulip_memory.models import CheckpointRecord
    from tulip_memory.tenancy.context import tenant_atomic

    report = CheckpointPruning()
    cutoff = _idle_cutoff(policy, now)
    with tenant_atomic(tenant, using=using):
        rows = CheckpointRecord.objects.using(using).filter(tenant=tenant)
        if cutoff is not None:
            idle = rows.threads_idle_since(cutoff)
            if dry_run:
                report.threads = len(idle)
                report.checkpoints = rows.filter(thread_id__in=idle).count()
                rows = rows.exclude(thread_id__in=idle)
            elif idle:
                # The rows of the idle threads that went are gone; a thread written to
                # since it was found idle keeps every row and meets the rule below.
                report.checkpoints, report.threads = _delete_still_idle(rows, idle, cutoff)
        keep = policy.checkpoint_keep_last
        if keep is not None:
            for thread_id in rows.threads_with_more_than(keep):
                thread = rows.of_thread(tenant, thread_id)
                extra = list(thread.newest_first().values_list("pk", flat=True)[keep:])
                report.checkpoints += (
                    len(extra) if dry_run else thread.filter(pk__in=extra).delete()[0]
                )
    return report


def _idle_cutoff(policy: RetentionPolicy, now: datetime) -> datetime | None:
    """Threads whose newest checkpoint is older than this are idle (None: no idle rule)."""
    return None if policy.checkpoint_idle is None else now - policy.checkpoint_idle


def _delete_still_idle(rows: QuerySet[Any], idle: list[str], cutoff: datetime) -> tuple[int, int]:
    """Delete the rows of the ``idle`` threads still idle (no row created at ``cutoff`` or
    later), in one ``DELETE``; ``(rows, threads)`` gone."""
    from django.db.models import Exists, OuterRef

    newer = rows.filter(thread_id=OuterRef("thread_id"), created_at__gte=cutoff)
    candidates = rows.filter(thread_id__in=idle)
    deleted = candidates.filter(~Exists(newer)).delete()[0]
    left = candidates.filter(created_at__lt=cutoff).order_by().values_list("thread_id", flat=True)
    return deleted, len(set(idle) - set(left.distinct()))


def _delta(
    tenant: str, using: str, policy: RetentionPolicy, now: datetime, dry_run: bool
) -> CheckpointPruning:
    from django.db.models import Count

    from tulip_memory.models import DeltaCheckpointRecord
    from tulip_memory.tenancy.context import tenant_atomic

    with tenant_atomic(tenant, using=using):
        rows = DeltaCheckpointRecord.objects.using(using).filter(tenant=tenant)
        counts = dict(
            rows.values("thread_id").annotate(n=Count("id")).values_list("thread_id", "n")
        )
        idle, over = _idle_and_over(rows, policy, now)
    keep = policy.checkpoint_keep_last
    if dry_run:
        dropped = sum(counts[t] for t in idle) + sum(counts[t] - (keep or 0) for t in over)
        return CheckpointPruning(dropped, len(idle))
    with muted():
        return async_to_sync(_prune_delta)(
            tenant, using, idle, over, keep=keep, cutoff=_idle_cutoff(policy, now)
        )


def _idle_and_over(
    rows: Any, policy: RetentionPolicy, now: datetime
) -> tuple[list[str], list[str]]:
    """The idle threads of ``rows``, and the other threads over ``CHECKPOINT_KEEP_LAST``."""
    cutoff = _idle_cutoff(policy, now)
    idle = [] if cutoff is None else rows.threads_idle_since(cutoff)
    keep = policy.checkpoint_keep_last
    if keep is None:
        return idle, []
    going = set(idle)
    return idle, [t for t in rows.threads_with_more_than(keep) if t not in going]


def _langgraph(
    tenant: str, using: str, policy: RetentionPolicy, now: datetime, dry_run: bool
) -> CheckpointPruning:
    """The LangGraph threads of :class:`~tulip_memory.langgraph.DjangoSaver` (PostgreSQL)."""
    from django.db import connections
    from django.db.models import Count

    from tulip_memory.models import LangGraphCheckpoint
    from tulip_memory.tenancy.context import tenant_atomic

    report = CheckpointPruning()
    if connections[using].vendor != "postgresql":
        return report  # the LangGraph tables are PostgreSQL's
    keep = policy.checkpoint_keep_last
    cutoff = _idle_cutoff(policy, now)
    with tenant_atomic(tenant, using=using):
        rows = LangGraphCheckpoint.objects.using(using).filter(tenant=tenant)
        idle, over = _idle_and_over(rows, policy, now)
        excess = 0
        if keep is not None:
            per_namespace = (
                rows.filter(thread_id__in=over)
                .values("thread_id", "checkpoint_ns")
                .annotate(n=Count("id"))
                .values_list("n", flat=True)
            )
            excess = sum(max(0, n - keep) for n in per_namespace)
        report.threads = len(idle)
        report.checkpoints = (rows.filter(thread_id__in=idle).count() if idle else 0) + excess
    if dry_run or not (idle or over):
        return report
    report = CheckpointPruning()
    with tenant_atomic(tenant, using=using):
        if idle:
            assert cutoff is not None
            report.checkpoints, gone = _delete_idle_langgraph_threads(using, tenant, idle, cutoff)
            report.threads = len(gone)
            # A thread written to since it was found idle stays: the newest N rule applies.
            over += [thread for thread in idle if thread not in gone]
        if over and keep is not None:
            rows = LangGraphCheckpoint.objects.using(using)
            report.checkpoints += rows.keep_newest(tenant, over, keep)
    return report


def _delete_idle_langgraph_threads(
    using: str, tenant: str, idle: list[str], cutoff: datetime
) -> tuple[int, set[str]]:
    """Delete every row of the ``idle`` threads still idle; how many checkpoints and
    threads went. The lock waits for a save under way (it holds its parent ``FOR KEY
    SHARE``), so the re-checking ``DELETE`` sees its row."""
    from django.db import connections

    from tulip_memory.models import LangGraphCheckpoint

    connection = connections[using]
    table = connection.ops.quote_name(LangGraphCheckpoint._meta.db_table)
    still_idle = (
        f"FROM {table} AS t WHERE t.tenant = %s AND t.thread_id = ANY(%s) "
        f"AND NOT EXISTS (SELECT 1 FROM {table} AS n WHERE n.tenant = t.tenant "
        "AND n.thread_id = t.thread_id AND n.created_at >= %s)"
    )
    params: list[Any] = [tenant, list(idle), cutoff]
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM (SELECT 1 {still_idle} FOR UPDATE OF t) AS s", params)
        cursor.execute(f"DELETE {still_idle} RETURNING t.thread_id, t.data IS NOT NULL", params)
        deleted = cursor.fetchall()
    return sum(1 for _, checkpoint in deleted if checkpoint), {thread for thread, _ in deleted}


async def _prune_delta(
    tenant: str,
    using: str,
    idle: list[str],
    over: list[str],
    *,
    keep: int | None,
    cutoff: datetime | None,
) -> CheckpointPruning:
    from tulip_memory.delta import DeltaCheckpointer
    from tulip_memory.delta.orm import ORMDeltaStorage

    pruned = CheckpointPruning()
    checkpointer = DeltaCheckpointer(ORMDeltaStorage(using, tenant=tenant), cache_size=0)
    storage = checkpointer.storage
    try:
        for thread_id in idle:
            assert cutoff is not None
            # Under the thread's writer lock (no save, delete or prune of the thread in
            # between, in any process), the thread is read again: one saved to since it
            # was found idle stays, and the newest N rule applies to it instead.
            async with storage.writer_lock(thread_id):
                records = await storage.list_checkpoints(thread_id, limit=None)
                if not records:
                    continue  # deleted meanwhile
                still_idle = max(meta.created_at for meta in records) < cutoff
                # The checkpointer's caches are off (cache_size=0): the storage's delete is
                # what ``checkpointer.delete`` runs, minus the writer lock held here.
                if still_idle and await storage.delete(thread_id):
                    pruned.threads += 1
                    pruned.checkpoints += len(records)
                    continue
            if keep is not None:
                over.append(thread_id)
        for thread_id in over:
            assert keep is not None
            pruned.checkpoints += await checkpointer.prune(thread_id, keep_last=keep)
    finally:
        await checkpointer.aclose()
    return pruned


def prune_tenant_checkpoints(
    tenant: str,
    *,
    using: str = "default",
    policy: RetentionPolicy | None = None,
    now: datetime | None = None,
    dry_run: bool = False,
) -> CheckpointPruning:
    """Apply the checkpoint retention of ``policy`` (default: the settings') to ``tenant``."""
    from tulip_memory.models import CheckpointRecord, DeltaCheckpointRecord, LangGraphCheckpoint
    from tulip_memory.tenancy.context import emit_on_commit

    policy = retention_policy() if policy is None else policy
    moment = utc_now() if now is None else now
    total = CheckpointPruning()
    for sender, sweep in (
        (CheckpointRecord, _full_snapshots),
        (DeltaCheckpointRecord, _delta),
        (LangGraphCheckpoint, _langgraph),
    ):
        started = time.perf_counter()
        pruning = sweep(tenant, using, policy, moment, dry_run)
        if pruning.checkpoints and not dry_run:
            emit_on_commit(
                using,
                EV_CHECKPOINT_PRUNED,
                sender=sender,
                tenant=tenant,
                thread_id=None,
                checkpoints=pruning.checkpoints,
                threads=pruning.threads,
                duration_ms=elapsed_ms(started),
            )
        total.checkpoints += pruning.checkpoints
        total.threads += pruning.threads
    return total


def prune_checkpoints(
    using: str = "default", tenants: Sequence[str] | None = None, **options: Any
) -> dict[str, CheckpointPruning]:
    """:func:`prune_tenant_checkpoints` with ``options`` (``policy``, ``now``: one for all)
    for ``tenants`` (default: every tenant); by tenant."""
    options["policy"] = options.get("policy") or retention_policy()
    options["now"] = options.get("now") or utc_now()
    return per_tenant(prune_tenant_checkpoints, using, tenants, **options)
