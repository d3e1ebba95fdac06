"""Turning a migrated database on a Citus coordinator into a distributed one by tenant.

:func:`distribution_sql` reads the catalog and returns what is still to do, in order, so
that running it again after a failure or on a distributed database does only the rest
(nothing when all is done). Run by ``manage.py tulip_memory_distribute`` as the tables'
owner; the steps are listed in docs/scale-out.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tulip_memory.postgres.rls import POLICY_NAME, TENANT_COLUMN, policy_expression, tenant_tables
from tulip_memory.postgres.search_index import citus_sql as lexical_citus_sql
from tulip_memory.postgres.tenant_registry import FUNCTION as REGISTER_FUNCTION

__all__ = ["DistributionError", "distribution_sql"]

REGISTRY_TABLE = "tulip_memory_tenant"

_DISTRIBUTED = "SELECT logicalrelid::text, partmethod FROM pg_catalog.pg_dist_partition"
_COLOCATION = (
    "SELECT logicalrelid::text, colocationid FROM pg_catalog.pg_dist_partition "
    "WHERE partmethod = 'h'"
)
_REGISTER_TRIGGERS = """
SELECT t.tgname FROM pg_catalog.pg_trigger t JOIN pg_catalog.pg_proc p ON p.oid = t.tgfoid
WHERE t.tgrelid = %s::regclass AND NOT t.tgisinternal AND p.proname = %s
"""
_POLICY = """
SELECT pg_catalog.pg_get_expr(p.polqual, p.polrelid) FROM pg_catalog.pg_policy p
WHERE p.polrelid = %s::regclass AND p.polname = %s
"""
# Primary keys, unique and foreign keys of a table, their columns in order.
_CONSTRAINTS = """
SELECT c.conname, c.contype,
       ARRAY(SELECT a.attname::text FROM unnest(c.conkey) WITH ORDINALITY k(n, i)
             JOIN pg_catalog.pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n
             ORDER BY k.i)
FROM pg_catalog.pg_constraint c
WHERE c.conrelid = %s::regclass AND c.contype IN ('p', 'u', 'f')
ORDER BY c.conname
"""
# Unique indexes that back no constraint (Citus refuses them without the tenant too).
_UNIQUE_INDEXES = """
SELECT i.indexrelid::regclass::text FROM pg_catalog.pg_index i
WHERE i.indrelid = %s::regclass AND i.indisunique
  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint c WHERE c.conindid = i.indexrelid)
  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
                  WHERE a.attrelid = i.indrelid AND a.attname = %s
                    AND a.attnum = ANY(i.indkey))
"""


class DistributionError(Exception):
    """The database cannot be distributed as it is (the message says why)."""


@dataclass(frozen=True)
class _ForeignKey:
    table: str
    column: str
    target: str
    target_column: str

    @property
    def name(self) -> str:
        return f"{self.table}_{self.column}_tenant_fk"[:63]

    def add_sql(self) -> str:
        return (
            f'ALTER TABLE "{self.table}" ADD CONSTRAINT "{self.name}" FOREIGN KEY '
            f'("{TENANT_COLUMN}", "{self.column}") REFERENCES "{self.target}" '
            f'("{TENANT_COLUMN}", "{self.target_column}") DEFERRABLE INITIALLY DEFERRED'
        )


def _foreign_keys(tables: list[str]) -> list[_ForeignKey]:
    """The foreign keys between tenant tables, as the models declare them."""
    from django.apps import apps
    from django.db.models import ForeignKey

    keys = []
    for model in apps.get_app_config("tulip_memory").get_models():
        table = model._meta.db_table
        if table not in tables:
            continue
        for field in model._meta.concrete_fields:
            if not isinstance(field, ForeignKey) or not field.db_constraint:  # type: ignore[attr-defined]
                continue
            target = field.target_field
            target_table = target.model._meta.db_table
            if target_table not in tables:
                raise DistributionError(
                    f"{table}.{field.column} references {target_table}, which has no "
                    f"{TENANT_COLUMN!r} column: it cannot be distributed with it"
                )
            keys.append(_ForeignKey(table, str(field.column), target_table, str(target.column)))
    return keys


def _quote_columns(columns: list[str]) -> str:
    return ", ".join(f'"{c}"' for c in columns)


def _local_table_sql(cursor: Any, table: str, keys: list[_ForeignKey]) -> list[str]:
    """What makes local ``table`` distributable (its foreign keys dropped: they are added
    with the tenant once both tables are distributed)."""
    statements = []
    cursor.execute(_REGISTER_TRIGGERS, [table, REGISTER_FUNCTION])
    statements += [f'DROP TRIGGER "{name}" ON "{table}"' for (name,) in cursor.fetchall()]
    cursor.execute(_POLICY, [table, POLICY_NAME])
    row = cursor.fetchone()
    if row is not None and "SELECT" in row[0].upper():
        expression = policy_expression(subquery=False)
        statements.append(
            f'ALTER POLICY "{POLICY_NAME}" ON "{table}" '
            f"USING ({expression}) WITH CHECK ({expression})"
        )
    cursor.execute(_UNIQUE_INDEXES, [table, TENANT_COLUMN])
    indexes = [name for (name,) in cursor.fetchall()]
    if indexes:
        raise DistributionError(
            f"{table} has unique indexes without the {TENANT_COLUMN!r} column: {indexes}"
        )
    cursor.execute(_CONSTRAINTS, [table])
    wanted = {(k.column,): k for k in keys if k.table == table}
    for name, kind, columns in cursor.fetchall():
        if TENANT_COLUMN in columns:
            continue
        if kind == "f":
            if tuple(columns) not in wanted:
                raise DistributionError(
                    f"{table} has a foreign key {name} on {columns} that no model declares"
                )
            statements.append(f'ALTER TABLE "{table}" DROP CONSTRAINT "{name}"')
            continue
        clause = "PRIMARY KEY" if kind == "p" else f'CONSTRAINT "{name}" UNIQUE'
        statements.append(
            f'ALTER TABLE "{table}" DROP CONSTRAINT "{name}", '
            f"ADD {clause} ({_quote_columns([TENANT_COLUMN, *columns])})"
        )
    return statements


def distribution_sql(cursor: Any) -> list[str]:
    """The statements still needed to distribute tulip_memory's tables, in order (see the
    module docstring); DistributionError when Citus is missing or a table cannot be."""
    cursor.execute("SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus'")
    if cursor.fetchone() is None:
        raise DistributionError(
            "the citus extension is not installed in this database: run this on a Citus "
            "coordinator (CREATE EXTENSION citus, workers added with citus_add_node)"
        )
    tables = tenant_tables()
    cursor.execute(_DISTRIBUTED)
    distributed = dict(cursor.fetchall())
    statements = []
    if REGISTRY_TABLE not in distributed:
        statements.append(f"SELECT create_reference_table('{REGISTRY_TABLE}')")
    keys = _foreign_keys(tables)
    local = [t for t in tables if t not in distributed]
    prepared = [s for table in local for s in _local_table_sql(cursor, table, keys)]
    # Foreign keys go first: the keys they depend on are replaced after them.
    statements += [s for s in prepared if " ADD " not in s and "DROP CONSTRAINT" in s]
    statements += [s for s in prepared if not (" ADD " not in s and "DROP CONSTRAINT" in s)]
    cursor.execute(_COLOCATION)
    groups = dict(cursor.fetchall())
    anchor = next((t for t in tables if t in groups), None)
    statements += [
        f"SELECT update_distributed_table_colocation('{table}', colocate_with => '{anchor}')"
        for table in tables
        if anchor is not None and table in groups and groups[table] != groups[anchor]
    ]
    # A referenced table is distributed before the tables referencing it.
    for table in sorted(local, key=lambda t: any(k.table == t for k in keys)):
        colocate = "none" if anchor is None else anchor
        statements.append(
            f"SELECT create_distributed_table('{table}', '{TENANT_COLUMN}', "
            f"colocate_with => '{colocate}')"
        )
        anchor = anchor or table
    for key in keys:
        cursor.execute(_CONSTRAINTS, [key.table])
        if not any(
            kind == "f" and columns == [TENANT_COLUMN, key.column]
            for _name, kind, columns in cursor.fetchall()
        ):
            statements.append(key.add_sql())
    return statements + lexical_citus_sql(cursor)
