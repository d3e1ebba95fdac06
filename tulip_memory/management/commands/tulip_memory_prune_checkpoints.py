"""``manage.py tulip_memory_prune_checkpoints``: the retention of checkpoints
(:mod:`tulip_memory.retention.checkpoints`), tenant by tenant.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError

from tulip_memory.management.sweep_command import SweepCommand
from tulip_memory.retention.checkpoints import prune_tenant_checkpoints


class Command(SweepCommand):
    help = (
        "Keep the newest checkpoints of every thread and delete idle threads, tenant by "
        "tenant (defaults: CHECKPOINT_KEEP_LAST, CHECKPOINT_IDLE_DAYS); delta chains are "
        "re-based so that every kept checkpoint still loads."
    )
    vendors = ("postgresql", "mysql")
    arguments = {
        "--keep-last": {"type": int, "metavar": "N", "help": "Checkpoints kept per thread (>= 1)."},
        "--idle-days": {
            "type": float,
            "metavar": "DAYS",
            "help": "Delete the threads without a new checkpoint for this long (> 0).",
        },
    }
    policy_options = {
        "--keep-last": ("checkpoint_keep_last", None, True),
        "--idle-days": ("checkpoint_idle", "days", True),
    }
    nothing_to_do = (
        "set TULIP_MEMORY['CHECKPOINT_KEEP_LAST'] or ['CHECKPOINT_IDLE_DAYS'], or pass "
        "--keep-last / --idle-days."
    )

    def prepare(self, options: dict[str, Any]) -> None:
        keep = options["keep_last"]
        if keep is not None and keep < 1:
            raise CommandError(
                f"--keep-last must be >= 1, got {keep} (to delete whole threads, use --idle-days)"
            )
        super().prepare(options)

    def sweep(self, tenant: str, alias: str, dry_run: bool) -> dict[str, int]:
        report = prune_tenant_checkpoints(tenant, using=alias, policy=self.policy, dry_run=dry_run)
        return {"checkpoint(s)": report.checkpoints, "idle thread(s)": report.threads}
