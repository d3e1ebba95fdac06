"""The expiry sweep of PgMemory: delete, tenant by tenant and in batches, the items whose
ttl has passed (reads already skip them).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime

from tulip_memory.core.clock import utc_now
from tulip_memory.events import EV_STORE_EXPIRED_SWEPT, elapsed_ms
from tulip_memory.retention.tenants import sweep_tenants

__all__ = ["sweep_expired_items", "sweep_expired_tenant"]

BATCH_SIZE = 1000


def sweep_expired_tenant(
    tenant: str,
    *,
    using: str = "default",
    now: datetime | None = None,
    dry_run: bool = False,
    batch_size: int = BATCH_SIZE,
) -> int:
    """Delete (or, dry, count) ``tenant``'s items expired at ``now``; how many."""
    from tulip_memory.models import MemoryItem
    from tulip_memory.tenancy.context import emit_on_commit, tenant_atomic

    moment = utc_now() if now is None else now
    started = time.perf_counter()
    items = MemoryItem.objects.using(using)
    deleted = 0
    while True:
        with tenant_atomic(tenant, using=using):
            expired = items.filter(tenant=tenant).expired(moment)
            if dry_run:
                return expired.count()
            batch = list(expired.values_list("pk", flat=True)[:batch_size])
            if batch:
                # The DELETE applies the expiry again: an item written anew since it was
                # selected (an upsert, same primary key) is no longer expired and stays.
                deleted += items.filter(pk__in=batch, tenant=tenant).expired(moment).clear()
        if len(batch) < batch_size:
            break
    if deleted:
        emit_on_commit(
            using,
            EV_STORE_EXPIRED_SWEPT,
            sender=MemoryItem,
            tenant=tenant,
            deleted=deleted,
            duration_ms=elapsed_ms(started),
        )
    return deleted


def sweep_expired_items(
    using: str = "default",
    tenants: Sequence[str] | None = None,
    *,
    now: datetime | None = None,
    dry_run: bool = False,
) -> dict[str, int]:
    """:func:`sweep_expired_tenant` for ``tenants`` (default: every tenant); per tenant."""

    moment = utc_now() if now is None else now
    return {
        tenant: sweep_expired_tenant(tenant, using=using, now=moment, dry_run=dry_run)
        for tenant in sweep_tenants(using, tenants)
    }
