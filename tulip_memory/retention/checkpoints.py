"""The retention sweep of checkpoints: the newest N per thread, and no idle threads.

Per :mod:`.policy`, for one tenant at a time:

* ``CHECKPOINT_IDLE_DAYS`` — a thread whose newest checkpoint is older than that loses
  all its checkpoints (a delta thread its blocks too);
* ``CHECKPOINT_KEEP_LAST`` — a thread keeps its newest N checkpoints.

Both apply to the full snapshots of the ORM checkpointers (``PostgreSQLCheckpointer``,
``MySQLCheckpointer``: :class:`~tulip_memory.models.CheckpointRecord`, where each row
stands alone), to the ORM delta storage
(:class:`~tulip_memory.models.DeltaCheckpointRecord` and its blocks) and, on PostgreSQL,
to LangGraph's threads (:class:`~tulip_memory.models.LangGraphCheckpoint`, through
:meth:`LangGraphCheckpointQuerySet.keep_newest`, what ``DjangoSaver.keep_newest`` runs: the
newest N of each checkpoint namespace, their pending writes and every blob they need,
splice chains included; an idle thread goes whole). A delta thread is pruned by
:meth:`DeltaCheckpointer.prune <tulip_memory.delta.DeltaCheckpointer.prune>` under the
thread's writer lock: a kept checkpoint whose parent goes is first rewritten
as a full checkpoint (its descendants re-rooted on it), then the dropped records go,
then the blocks no full checkpoint refers to any more — so every kept checkpoint loads
to exactly the state it loaded to before. Threads are found in one transaction pinned
to the tenant; each thread is then pruned in its own.

Idle time is measured against ``now`` (default: the current time) and the checkpoints'
``created_at``. Events: one ``checkpoint.pruned`` per tenant and table that lost any
(``sender`` the model: ``CheckpointRecord``, ``DeltaCheckpointRecord`` or
``LangGraphCheckpoint``; ``thread_id=None``; the checkpoints and whole threads removed),
sent once committed (inside the caller's own transaction: when that commits);
the checkpointer calls it makes on delta threads are :func:`~tulip_memory.events.muted`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from asgiref.sync import async_to_sync

from tulip_memory.clock import utc_now
from tulip_memory.events import EV_CHECKPOINT_PRUNED, elapsed_ms, muted
from tulip_memory.retention.policy import RetentionPolicy, retention_policy
from tulip_memory.retention.tenants import sweep_tenants

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
    from tulip_memory.tenancy import tenant_atomic

    report = CheckpointPruning()
    with tenant_atomic(tenant, using=using):
        rows = CheckpointRecord.objects.using(using).filter(tenant=tenant)
        if policy.checkpoint_idle is not None:
            idle = rows.threads_idle_since(now - policy.checkpoint_idle)
            doomed = rows.filter(thread_id__in=idle)
            report.threads = len(idle)
            report.checkpoints = doomed.count() if dry_run else doomed.delete()[0]
            rows = rows.exclude(thread_id__in=idle)
        keep = policy.checkpoint_keep_last
        if keep is not None:
            for thread_id in rows.threads_with_more_than(keep):
                thread = rows.of_thread(tenant, thread_id)
                extra = list(thread.newest_first().values_list("pk", flat=True)[keep:])
                report.checkpoints += (
                    len(extra) if dry_run else thread.filter(pk__in=extra).delete()[0]
                )
    return report


def _delta_threads(
    tenant: str, using: str, policy: RetentionPolicy, now: datetime
) -> tuple[dict[str, int], dict[str, int]]:
    """``({idle thread: records}, {thread over the limit: records to drop})``."""
    from django.db.models import Count

    from tulip_memory.models import DeltaCheckpointRecord
    from tulip_memory.tenancy import tenant_atomic

    with tenant_atomic(tenant, using=using):
        rows = DeltaCheckpointRecord.objects.using(using).filter(tenant=tenant)
        counts = dict(
            rows.values("thread_id").annotate(n=Count("id")).values_list("thread_id", "n")
        )
        idle: list[str] = []
        if policy.checkpoint_idle is not None:
            idle = rows.threads_idle_since(now - policy.checkpoint_idle)
        over: list[str] = []
        keep = policy.checkpoint_keep_last
        if keep is not None:
            going = set(idle)
            over = [t for t in rows.threads_with_more_than(keep) if t not in going]
    return (
        {thread: counts[thread] for thread in idle},
        {thread: counts[thread] - (keep or 0) for thread in over},
    )


def _langgraph(
    tenant: str, using: str, policy: RetentionPolicy, now: datetime, dry_run: bool
) -> CheckpointPruning:
    """The LangGraph threads of :class:`~tulip_memory.langgraph.DjangoSaver` (PostgreSQL)."""
    from django.db import connections
    from django.db.models import Count

    from tulip_memory.models import LangGraphCheckpoint
    from tulip_memory.tenancy import tenant_atomic

    report = CheckpointPruning()
    if connections[using].vendor != "postgresql":
        return report  # the LangGraph tables are PostgreSQL's
    keep = policy.checkpoint_keep_last
    with tenant_atomic(tenant, using=using):
        rows = LangGraphCheckpoint.objects.using(using).filter(tenant=tenant)
        idle: list[str] = []
        if policy.checkpoint_idle is not None:
            idle = rows.threads_idle_since(now - policy.checkpoint_idle)
        over: list[str] = []
        excess = 0
        if keep is not None:
            going = set(idle)
            over = [t for t in rows.threads_with_more_than(keep) if t not in going]
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
    with tenant_atomic(tenant, using=using):
        rows = LangGraphCheckpoint.objects.using(using)
        if idle:
            rows.delete_threads(tenant, idle)
        if over:
            assert keep is not None
            report.checkpoints -= excess - rows.keep_newest(tenant, over, keep)
    return report


async def _prune_delta(
    tenant: str, using: str, idle: list[str], over: list[str], keep: int | None
) -> int:
    from tulip_memory.delta import DeltaCheckpointer
    from tulip_memory.delta.orm import ORMDeltaStorage

    removed = 0
    checkpointer = DeltaCheckpointer(ORMDeltaStorage(using, tenant=tenant), cache_size=0)
    try:
        for thread_id in idle:
            records = await checkpointer.storage.list_checkpoints(thread_id, limit=None)
            if await checkpointer.delete(thread_id):
                removed += len(records)
        for thread_id in over:
            assert keep is not None
            removed += await checkpointer.prune(thread_id, keep_last=keep)
    finally:
        await checkpointer.aclose()
    return removed


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

    policy = retention_policy() if policy is None else policy
    moment = utc_now() if now is None else now
    started = time.perf_counter()
    report = _full_snapshots(tenant, using, policy, moment, dry_run)
    if not dry_run:
        _report_pruned(CheckpointRecord, tenant, using, report, started)
    started = time.perf_counter()
    idle, over = _delta_threads(tenant, using, policy, moment)
    delta = CheckpointPruning(threads=len(idle))
    if dry_run:
        delta.checkpoints = sum(idle.values()) + sum(over.values())
    else:
        with muted():
            delta.checkpoints = async_to_sync(_prune_delta)(
                tenant, using, list(idle), list(over), policy.checkpoint_keep_last
            )
        _report_pruned(DeltaCheckpointRecord, tenant, using, delta, started)
    started = time.perf_counter()
    langgraph = _langgraph(tenant, using, policy, moment, dry_run)
    if not dry_run:
        _report_pruned(LangGraphCheckpoint, tenant, using, langgraph, started)
    return CheckpointPruning(
        report.checkpoints + delta.checkpoints + langgraph.checkpoints,
        report.threads + delta.threads + langgraph.threads,
    )


def _report_pruned(
    sender: type, tenant: str, using: str, pruning: CheckpointPruning, started: float
) -> None:
    from tulip_memory.tenancy import emit_on_commit

    if pruning.checkpoints:
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


def prune_checkpoints(
    using: str = "default",
    tenants: Sequence[str] | None = None,
    *,
    policy: RetentionPolicy | None = None,
    now: datetime | None = None,
    dry_run: bool = False,
) -> dict[str, CheckpointPruning]:
    """:func:`prune_tenant_checkpoints` for ``tenants`` (default: every tenant)."""

    policy = retention_policy() if policy is None else policy
    moment = utc_now() if now is None else now
    return {
        tenant: prune_tenant_checkpoints(
            tenant, using=using, policy=policy, now=moment, dry_run=dry_run
        )
        for tenant in sweep_tenants(using, tenants)
    }
