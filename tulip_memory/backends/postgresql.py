"""PostgreSQLCheckpointer: full snapshots in PostgreSQL through the Django ORM.

The rows carry the tenant and sit under the same row-level security as the store (see
:mod:`tulip_memory.backends.orm`). The state is stored as JSONB, which cannot hold the NUL
character (``\\u0000``): a state containing one anywhere (message text, tool call
arguments, metadata keys or values, its thread id) is refused with ``ValueError`` before
anything is written, as is one holding NaN or Infinity (see :mod:`tulip_memory.backends.orm`).
:class:`~tulip_memory.delta.DeltaCheckpointer` over
:class:`~tulip_memory.delta.ORMDeltaStorage` stores such states on PostgreSQL.
"""

from __future__ import annotations

from typing import Any

from tulip_memory.backends.orm import ORMCheckpointer
from tulip_memory.core.nul_characters import nul_at

__all__ = ["PostgreSQLCheckpointer"]


def _refuse_nul(snapshot: dict[str, Any]) -> None:
    """ValueError naming where the state's snapshot holds a NUL character, which JSONB
    cannot store."""
    where = nul_at(snapshot, "state")
    if where is not None:
        raise ValueError(
            f"{where} contains a NUL character (\\x00), which PostgreSQLCheckpointer cannot "
            "store (PostgreSQL's JSONB has no \\u0000): remove it, or use "
            "DeltaCheckpointer(ORMDeltaStorage(...)), which stores it"
        )


class PostgreSQLCheckpointer(ORMCheckpointer):
    """Checkpoints on the Django alias ``using``, which must be PostgreSQL.

    A state holding a NUL character, NaN or Infinity is refused (``ValueError``): see the
    module docstring.
    """

    vendor = "postgresql"

    def _check_snapshot(self, snapshot: dict[str, Any]) -> None:
        super()._check_snapshot(snapshot)
        _refuse_nul(snapshot)
