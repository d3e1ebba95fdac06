"""System checks of the tenant databases on a Citus coordinator (E070, E071, W072; listed in
docs/scale-out.md), on the aliases of ``TENANT_DATABASES`` a run names that have Citus.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core import checks

from tulip_memory.checks import finding, registered
from tulip_memory.postgres.rls import TENANT_COLUMN, tenant_tables
from tulip_memory.tenancy.cluster import is_citus

__all__ = ["check_citus_databases"]

# Each distributed table's method, column and co-location group.
_DISTRIBUTION = (
    "SELECT logicalrelid::text, partmethod, "
    "column_to_column_name(logicalrelid, partkey), colocationid "
    "FROM pg_catalog.pg_dist_partition"
)
# Old placements of moved or split shards that Citus has yet to drop.
_PENDING_CLEANUP = "SELECT count(*) FROM pg_catalog.pg_dist_cleanup"


@registered(checks.Tags.database)
def check_citus_databases(
    app_configs: Iterable[Any] | None = None, databases: Iterable[str] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """E070, E071 and W072 on the named tenant aliases whose database has Citus."""
    from tulip_memory.checks.tenancy import tenant_connections

    errors: list[checks.CheckMessage] = []
    for alias, connection, problem in tenant_connections(databases):
        if problem is not None or not is_citus(connection):
            continue  # E015 reports an alias that cannot be reached
        with connection.cursor() as cursor:
            cursor.execute(_DISTRIBUTION)
            distribution = {table: rest for table, *rest in cursor.fetchall()}
            cursor.execute("SELECT current_user, current_setting('citus.propagate_set_commands')")
            role, propagation = cursor.fetchone()
            cursor.execute(_PENDING_CLEANUP)
            (pending,) = cursor.fetchone()
        errors += _distribution_errors(alias, distribution)
        if pending:
            errors.append(
                finding(
                    "W072",
                    f"Database alias {alias!r} is a Citus coordinator with {pending} old "
                    "shard copies left by a move or split (pg_dist_cleanup): they keep the "
                    "rows they held, and an erasure does not reach them.",
                    "As the tables' owner, outside a transaction: CALL "
                    "citus_cleanup_orphaned_resources(); (docs/scale-out.md, Erasure after "
                    "a shard move).",
                )
            )
        if propagation != "local":
            errors.append(
                finding(
                    "E071",
                    f"Database alias {alias!r} connects as {role!r} to a Citus coordinator "
                    f"with citus.propagate_set_commands = {propagation!r}: the tenant pin "
                    "(SET LOCAL) never reaches the workers, whose row-level security then "
                    "shows no row and refuses every write.",
                    f"ALTER ROLE {role} SET citus.propagate_set_commands = 'local' "
                    "(manage.py tulip_memory_setup_roles does it on a coordinator), then "
                    "reconnect.",
                )
            )
    return errors


def _distribution_errors(
    alias: str, distribution: dict[str, list[Any]]
) -> list[checks.CheckMessage]:
    tables = tenant_tables()
    wrong = [
        table
        for table in tables
        if distribution.get(table, [None, None])[:2] != ["h", TENANT_COLUMN]
    ]
    groups = {distribution[t][2] for t in tables if t not in wrong}
    if not wrong and len(groups) <= 1:
        return []
    what = (
        f"are not distributed on {TENANT_COLUMN!r}: {wrong}"
        if wrong
        else f"are in {len(groups)} co-location groups, not one"
    )
    return [
        finding(
            "E070",
            f"Database alias {alias!r} is a Citus coordinator whose tenant tables {what}: a "
            "tenant's rows are not all on one node, and statements joining them fail.",
            "manage.py tulip_memory_distribute --database <the owner's alias>",
        )
    ]
