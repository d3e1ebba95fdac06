"""``manage.py tulip_memory_cleanup_jobs``: the retention of finished extraction jobs
(:mod:`tulip_memory.retention.jobs`), tenant by tenant.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from tulip_memory.management.sweep_command import SweepCommand, option_period, policy_with
from tulip_memory.retention.jobs import cleanup_tenant_jobs


class Command(SweepCommand):
    help = (
        "Purge the payload of finished extraction jobs and delete old finished jobs, tenant "
        "by tenant (defaults: JOB_PAYLOAD_PURGE_AFTER_HOURS, JOB_DELETE_AFTER_DAYS)."
    )
    vendors = ("postgresql",)

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument(
            "--payload-after-hours",
            type=float,
            metavar="HOURS",
            help="Empty the payload of done jobs finished this long ago (0: all done jobs).",
        )
        parser.add_argument(
            "--delete-after-days",
            type=float,
            metavar="DAYS",
            help="Delete done and failed jobs finished this long ago.",
        )

    def prepare(self, options: dict[str, Any]) -> None:
        hours, days = options["payload_after_hours"], options["delete_after_days"]
        self.policy = policy_with(
            "set TULIP_MEMORY['JOB_PAYLOAD_PURGE_AFTER_HOURS'] or ['JOB_DELETE_AFTER_DAYS'], "
            "or pass --payload-after-hours / --delete-after-days.",
            job_payload_purge_after=None
            if hours is None
            else option_period("--payload-after-hours", hours, unit="hours", strict=False),
            job_delete_after=None
            if days is None
            else option_period("--delete-after-days", days, unit="days", strict=False),
        )

    def sweep(self, tenant: str, alias: str, dry_run: bool) -> dict[str, int]:
        report = cleanup_tenant_jobs(tenant, using=alias, policy=self.policy, dry_run=dry_run)
        return {"payload(s)": report.purged, "job row(s)": report.deleted}
