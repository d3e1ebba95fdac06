"""``manage.py tulip_memory_prune_checkpoints``: the retention of checkpoints
(:mod:`tulip_memory.retention.checkpoints`), tenant by tenant.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from tulip_memory.management.sweep_command import SweepCommand, option_period, policy_with
from tulip_memory.retention.checkpoints import prune_tenant_checkpoints


class Command(SweepCommand):
    help = (
        "Keep the newest checkpoints of every thread and delete idle threads, tenant by "
        "tenant (defaults: CHECKPOINT_KEEP_LAST, CHECKPOINT_IDLE_DAYS); delta chains are "
        "re-based so that every kept checkpoint still loads."
    )
    vendors = ("postgresql", "mysql")

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument(
            "--keep-last", type=int, metavar="N", help="Checkpoints kept per thread (>= 1)."
        )
        parser.add_argument(
            "--idle-days",
            type=float,
            metavar="DAYS",
            help="Delete the threads without a new checkpoint for this long (> 0).",
        )

    def prepare(self, options: dict[str, Any]) -> None:
        keep, idle = options["keep_last"], options["idle_days"]
        if keep is not None and keep < 1:
            raise CommandError(
                f"--keep-last must be >= 1, got {keep} (to delete whole threads, use --idle-days)"
            )
        self.policy = policy_with(
            "set TULIP_MEMORY['CHECKPOINT_KEEP_LAST'] or ['CHECKPOINT_IDLE_DAYS'], or pass "
            "--keep-last / --idle-days.",
            checkpoint_keep_last=keep,
            checkpoint_idle=None
            if idle is None
            else option_period("--idle-days", idle, unit="days", strict=True),
        )

    def sweep(self, tenant: str, alias: str, dry_run: bool) -> dict[str, int]:
        report = prune_tenant_checkpoints(tenant, using=alias, policy=self.policy, dry_run=dry_run)
        return {"checkpoint(s)": report.checkpoints, "idle thread(s)": report.threads}
