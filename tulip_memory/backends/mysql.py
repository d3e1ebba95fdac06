"""MySQLCheckpointer: full snapshots in MySQL or MariaDB through the Django ORM (extra ``mysql``).

MariaDB has no row-level security: tenants are kept apart by the tenant filter of every
query (see :mod:`tulip_memory.backends.orm`).
"""

from __future__ import annotations

from tulip_memory.backends.orm import ORMCheckpointer

__all__ = ["MySQLCheckpointer"]


class MySQLCheckpointer(ORMCheckpointer):
    """Checkpoints on the Django alias ``using``, which must be MySQL or MariaDB."""

    vendor = "mysql"
    driver = "MySQLdb"
    extra = "mysql"
