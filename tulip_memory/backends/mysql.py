"""MySQLCheckpointer: full snapshots in MySQL or MariaDB through the ORM (extra ``mysql``);
tenants kept apart by every query's filter, NaN and Infinity refused.
"""

from __future__ import annotations

from tulip_memory.backends.orm import ORMCheckpointer

__all__ = ["MySQLCheckpointer"]


class MySQLCheckpointer(ORMCheckpointer):
    """Checkpoints on the alias ``using`` (no default: ``"default"`` is usually PostgreSQL)."""

    vendor = "mysql"
    driver = "MySQLdb"
    extra = "mysql"

    def __init__(self, using: str, *, tenant: str | None = None) -> None:
        super().__init__(using, tenant=tenant)
