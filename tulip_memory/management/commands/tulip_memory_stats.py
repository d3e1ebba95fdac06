"""``manage.py tulip_memory_stats``: what each tenant keeps, as a table or JSON, read in one
read-only transaction pinned to each tenant.
"""

from __future__ import annotations

import json
from typing import Any

from django.db.models import BigIntegerField, Count, Func, Q, Sum
from django.db.models.functions import Coalesce

from tulip_memory.management.tenant_command import TenantCommand
from tulip_memory.manager.types import MemoryType


class StoredSize(Func):
    """``pg_column_size(column)``: the bytes a value takes on disk."""

    function = "pg_column_size"
    output_field = BigIntegerField()


def _bytes(column: str) -> Coalesce:
    """The bytes the values of ``column`` take on disk, summed (0 for no row)."""
    return Coalesce(Sum(StoredSize(column)), 0)


def tenant_stats(tenant: str, alias: str) -> dict[str, Any]:
    """The figures of one tenant (see the module docstring)."""
    from tulip_memory.manager.history import HISTORY_LABEL
    from tulip_memory.models import (
        CheckpointRecord,
        DeltaBlock,
        DeltaCheckpointRecord,
        ExtractionJob,
        LangGraphCheckpoint,
        MemoryItem,
    )
    from tulip_memory.models.extraction import JobState
    from tulip_memory.tenancy.context import tenant_atomic

    history = Q(namespace__contains=f"/{HISTORY_LABEL}/")
    with tenant_atomic(tenant, using=alias):
        # The tenant named too: the tables' owner reads every tenant's store items (the
        # search function's policy, tulip_memory.postgres.search_index).
        items = MemoryItem.objects.using(alias).filter(tenant=tenant)
        store = items.aggregate(
            items=Count("pk"),
            history=Count("pk", filter=history),
            **{
                kind.value: Count("pk", filter=Q(namespace__endswith=f"/{kind.value}") & ~history)
                for kind in MemoryType
            },
        )
        sources = dict(
            items.order_by()
            .values_list("embedding_source")
            .annotate(count=Count("pk"))
            .values_list("embedding_source", "count")
        )
        plain = CheckpointRecord.objects.using(alias).aggregate(
            count=Count("pk"), bytes=_bytes("state")
        )
        delta = DeltaCheckpointRecord.objects.using(alias).aggregate(
            count=Count("pk"), bytes=_bytes("data")
        )
        blocks = DeltaBlock.objects.using(alias).aggregate(
            blocks=Count("pk"), block_bytes=_bytes("data")
        )
        # Every row: a checkpoint's (data), or pending writes waiting for theirs (no data).
        graph = (
            LangGraphCheckpoint.rows.using(alias)
            .filter(tenant=tenant)
            .aggregate(
                threads=Count("thread_id", distinct=True),
                count=Count("pk", filter=Q(data__isnull=False)),
                pending_writes=Count("pk", filter=Q(data__isnull=True)),
                bytes=_bytes("data") + _bytes("writes"),
            )
        )
        jobs = dict(
            ExtractionJob.objects.using(alias)
            .order_by()
            .values_list("state")
            .annotate(count=Count("pk"))
            .values_list("state", "count")
        )
    return {
        "store": {"items": store["items"], "history": store["history"]},
        "memories": {kind.value: store[kind.value] for kind in MemoryType},
        "checkpoints": {"plain": plain, "delta": {**delta, **blocks}, "langgraph": graph},
        "jobs": {state.value: jobs.get(state.value, 0) for state in JobState},
        "embedding_sources": {source or "none": count for source, count in sorted(sources.items())},
    }


def _flatten(figures: dict[str, Any], prefix: str = "") -> dict[str, int]:
    flat: dict[str, int] = {}
    for name, value in figures.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{name}."))
        else:
            flat[f"{prefix}{name}"] = value
    return flat


class Command(TenantCommand):
    help = (
        "Per tenant: store items, memories per type, checkpoints (plain/delta/LangGraph) and "
        "their bytes, extraction jobs by state, embedding sources; a table, or --json."
    )
    vendors = ("postgresql",)
    changes_data = False
    arguments = {"--json": {"action": "store_true", "help": "Print JSON instead of a table."}}

    def handle(self, *args: Any, **options: Any) -> None:
        tenants = self.tenants(options)
        alias = options["database"]
        self.connection(alias)
        self.require_known(tenants, alias)
        stats = {tenant: tenant_stats(tenant, alias) for tenant in tenants}
        if options["json"]:
            self.stdout.write(json.dumps({"tenants": stats}, indent=2))
            return
        columns = {tenant: _flatten(figures) for tenant, figures in stats.items()}
        rows: list[str] = []
        for flat in columns.values():
            rows += [name for name in flat if name not in rows]
        width = max(len(row) for row in rows)
        widths = {tenant: max(len(tenant), 8) for tenant in tenants}
        header = " ".join(tenant.rjust(widths[tenant]) for tenant in tenants)
        self.stdout.write(f"{'':{width}}  {header}")
        for row in rows:
            cells = " ".join(str(columns[t].get(row, 0)).rjust(widths[t]) for t in tenants)
            self.stdout.write(f"{row:{width}}  {cells}")
