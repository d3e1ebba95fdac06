"""``manage.py tulip_memory_sweep_expired``: delete PgMemory's expired items
(:mod:`tulip_memory.retention.expiry`), for projects without Celery beat.
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
