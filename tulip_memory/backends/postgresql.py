"""PostgreSQLCheckpointer: full snapshots in PostgreSQL through the Django ORM.

The rows carry the tenant and sit under the same row-level security as the store (see
:mod:`tulip_memory.backends.orm`).
"""

from __future__ import annotations

from tulip_memory.backends.orm import ORMCheckpointer

__all__ = ["PostgreSQLCheckpointer"]


class PostgreSQLCheckpointer(ORMCheckpointer):
    """Checkpoints on the Django alias ``using``, which must be PostgreSQL."""

    vendor = "postgresql"
