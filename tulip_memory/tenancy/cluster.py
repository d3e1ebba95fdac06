"""Citus: whether a database is a Citus cluster's, and registering a tenant there, which
:func:`~tulip_memory.tenancy.context.tenant_atomic` does as it pins it, since a trigger
cannot from a shard (docs/scale-out.md).
"""

from __future__ import annotations

from typing import Any

__all__ = ["is_citus", "register_tenant"]

IS_CITUS = "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus')"
# The registry is a reference table: a read is local to the coordinator, a write reaches
# every node, so a registered tenant is only read.
REGISTERED = "SELECT 1 FROM tulip_memory_tenant WHERE name = %s"
REGISTER = (
    "INSERT INTO tulip_memory_tenant (name, registered_at) VALUES (%s, now()) "
    "ON CONFLICT (name) DO NOTHING"
)

# Whether a database has Citus, by server and name (asked once per process).
_citus: dict[tuple[Any, ...], bool] = {}


def is_citus(connection: Any) -> bool:
    """Whether the database of ``connection`` (a Django PostgreSQL connection) has Citus."""
    config = connection.settings_dict
    key = tuple(config.get(k) for k in ("HOST", "PORT", "NAME"))
    known = _citus.get(key)
    if known is None:
        with connection.cursor() as cursor:
            cursor.execute(IS_CITUS)
            known = _citus[key] = bool(cursor.fetchone()[0])
    return known


def register_tenant(connection: Any, tenant: str) -> None:
    """Add ``tenant`` to the registry in the open transaction of ``connection`` unless it is
    there (a write only the first time: the registry is a reference table, written on every
    node)."""
    with connection.cursor() as cursor:
        cursor.execute(REGISTERED, [tenant])
        if cursor.fetchone() is None:
            cursor.execute(REGISTER, [tenant])
