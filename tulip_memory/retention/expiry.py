"""The expiry sweep of PgMemory: delete, tenant by tenant and in batches, the items whose
ttl has passed (reads already skip them).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from tulip_memory.core.clock import utc_now
from tulip_memory.events import EV_STORE_EXPIRED_SWEPT, elapsed_ms
from tulip_memory.retention.tenants import per_tenant

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
    using: str = "default", tenants: Sequence[str] | None = None, **options: Any
) -> dict[str, int]:
    """:func:`sweep_expired_tenant` with ``options`` (``now``: one for all) for ``tenants``
    (default: every tenant); by tenant."""
    options["now"] = options.get("now") or utc_now()
    return per_tenant(sweep_expired_tenant, using, tenants, **options)
