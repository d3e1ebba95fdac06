"""The retention sweep of extraction jobs: empty the payload of done jobs and delete
finished rows after the delays of :mod:`.policy`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tulip_memory.retention.policy import RetentionPolicy, retention_policy
from tulip_memory.retention.tenants import per_tenant

__all__ = ["JobCleanup", "cleanup_jobs", "cleanup_tenant_jobs"]


@dataclass
class JobCleanup:
    """What the jobs sweep did in one tenant (or would do, in a dry run)."""

    purged: int = 0  # payloads emptied
    deleted: int = 0  # rows deleted


def cleanup_tenant_jobs(
    tenant: str,
    *,
    using: str = "default",
    policy: RetentionPolicy | None = None,
    dry_run: bool = False,
) -> JobCleanup:
    """Purge payloads and delete rows of ``tenant``'s finished jobs, per ``policy``
    (default: the settings')."""
    from tulip_memory.models import ExtractionJob, JobState
    from tulip_memory.tenancy.context import tenant_atomic

    policy = retention_policy() if policy is None else policy
    report = JobCleanup()
    with tenant_atomic(tenant, using=using):
        mine = ExtractionJob.objects.using(using).filter(tenant=tenant)
        if policy.job_delete_after is not None:
            old = mine.finished_before(policy.job_delete_after.total_seconds())
            report.deleted = old.count() if dry_run else old.delete()[0]
            mine = mine.exclude(pk__in=old.values("pk"))  # a dry run counts them once
        if policy.job_payload_purge_after is not None:
            done = (
                mine.finished_before(policy.job_payload_purge_after.total_seconds())
                .filter(state=JobState.DONE)
                .with_payload()
            )
            report.purged = done.count() if dry_run else done.update(payload={})
    return report


def cleanup_jobs(
    using: str = "default", tenants: Sequence[str] | None = None, **options: Any
) -> dict[str, JobCleanup]:
    """:func:`cleanup_tenant_jobs` with ``options`` (``policy``: one for all) for
    ``tenants`` (default: every tenant); by tenant."""
    options["policy"] = options.get("policy") or retention_policy()
    return per_tenant(cleanup_tenant_jobs, using, tenants, **options)
