"""``manage.py tulip_memory_sweep_expired``: delete PgMemory's items whose ttl has passed.

Reads already skip expired items; this reclaims their rows, tenant by tenant, under each
tenant's row-level security (:mod:`tulip_memory.retention.expiry`). For cron users; the
Celery task ``tulip_memory.sweep_expired_items`` does the same on a beat schedule.
``--dry-run`` only counts.
"""

from __future__ import annotations

from tulip_memory.management.sweep_command import SweepCommand
from tulip_memory.retention.expiry import sweep_expired_tenant


class Command(SweepCommand):
    help = (
        "Delete PgMemory's expired items (written with a ttl that has passed), tenant by "
        "tenant. Reads already skip them; this reclaims the rows."
    )
    vendors = ("postgresql",)

    def sweep(self, tenant: str, alias: str, dry_run: bool) -> dict[str, int]:
        return {"expired item(s)": sweep_expired_tenant(tenant, using=alias, dry_run=dry_run)}
