"""MySQLCheckpointer: full snapshots in MySQL or MariaDB through the Django ORM (extra ``mysql``).

MariaDB has no row-level security: tenants are kept apart by the tenant filter of every
query (see :mod:`tulip_memory.backends.orm`). Its JSON column takes no NaN or Infinity: a
state holding one is refused with ``ValueError`` before anything is written.
"""

from __future__ import annotations

from tulip_memory.backends.orm import ORMCheckpointer

__all__ = ["MySQLCheckpointer"]


class MySQLCheckpointer(ORMCheckpointer):
    """Checkpoints on the Django alias ``using``, which must be MySQL or MariaDB.

    ``using`` has no default: a project's ``"default"`` alias is usually its PostgreSQL.
    """

    vendor = "mysql"
    driver = "MySQLdb"
    extra = "mysql"

    def __init__(self, using: str, *, tenant: str | None = None) -> None:
        super().__init__(using, tenant=tenant)
