"""``manage.py tulip_memory_distribute``: distribute a migrated database on a Citus
coordinator by tenant (tulip_memory.postgres.distribution; docs/scale-out.md), idempotently.
Run it as the tables' owner (``--database owner``), again after each ``migrate``.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError
from django.db import DatabaseError

from tulip_memory.management.tenant_command import TenantCommand
from tulip_memory.postgres.distribution import DistributionError, distribution_sql


class Command(TenantCommand):
    help = (
        "Distribute tulip_memory's tenant tables by tenant on a Citus coordinator (the "
        "tenant registry a reference table), idempotently, as the tables' owner; "
        "--dry-run prints the SQL."
    )
    vendors = ("postgresql",)
    takes_tenants = False
    requires_system_checks: list[str] = []

    def handle(self, *args: Any, **options: Any) -> None:
        alias = options["database"]
        connection = self.connection(alias)
        with self.reaching(alias), connection.cursor() as cursor:
            try:
                statements = distribution_sql(cursor)
            except DistributionError as exc:
                raise CommandError(f"--database {alias!r}: {exc}; nothing was changed") from None
            if options["dry_run"]:
                for statement in statements:
                    self.stdout.write(f"{statement};")
                return
            # One statement at a time: Citus distributes a table in a transaction of its
            # own; what ran stays done, and a second run does the rest.
            for done, statement in enumerate(statements):
                try:
                    cursor.execute(statement)
                except DatabaseError as exc:
                    raise CommandError(
                        f"{statement} failed: {exc}; the {done} statements before it are "
                        "done, run this command again once the cause is fixed"
                    ) from None
        self.stdout.write(
            self.style.SUCCESS(
                f"Database {alias!r}: tenant tables distributed by tenant "
                f"({len(statements)} statements run)"
                if statements
                else f"Database {alias!r}: already distributed, nothing to do"
            )
        )
