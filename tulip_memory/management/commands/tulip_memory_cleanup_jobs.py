"""``manage.py tulip_memory_cleanup_jobs``: the retention of finished extraction jobs
(:mod:`tulip_memory.retention.jobs`), tenant by tenant.
"""

from __future__ import annotations

from tulip_memory.management.sweep_command import SweepCommand
from tulip_memory.retention.jobs import cleanup_tenant_jobs


class Command(SweepCommand):
    help = (
        "Purge the payload of finished extraction jobs and delete old finished jobs, tenant "
        "by tenant (defaults: JOB_PAYLOAD_PURGE_AFTER_HOURS, JOB_DELETE_AFTER_DAYS)."
    )
    vendors = ("postgresql",)
    arguments = {
        "--payload-after-hours": {
            "type": float,
            "metavar": "HOURS",
            "help": "Empty the payload of done jobs finished this long ago (0: all done jobs).",
        },
        "--delete-after-days": {
            "type": float,
            "metavar": "DAYS",
            "help": "Delete done and failed jobs finished this long ago.",
        },
    }
    policy_options = {
        "--payload-after-hours": ("job_payload_purge_after", "hours", False),
        "--delete-after-days": ("job_delete_after", "days", False),
    }
    nothing_to_do = (
        "set TULIP_MEMORY['JOB_PAYLOAD_PURGE_AFTER_HOURS'] or ['JOB_DELETE_AFTER_DAYS'], "
        "or pass --payload-after-hours / --delete-after-days."
    )

    def sweep(self, tenant: str, alias: str, dry_run: bool) -> dict[str, int]:
        report = cleanup_tenant_jobs(tenant, using=alias, policy=self.policy, dry_run=dry_run)
        return {"payload(s)": report.purged, "job row(s)": report.deleted}
