"""PostgreSQLCheckpointer: full snapshots as JSONB rows under row-level security.

JSONB holds no NUL, NaN or Infinity: such a state is refused (ValueError naming where)
before anything is written; DeltaCheckpointer over ORMDeltaStorage stores it.
"""

from __future__ import annotations

from typing import Any

from tulip_memory.backends.orm import ORMCheckpointer
from tulip_memory.core.nul_characters import nul_at

__all__ = ["PostgreSQLCheckpointer"]


class PostgreSQLCheckpointer(ORMCheckpointer):
    """Checkpoints on the Django alias ``using``, which must be PostgreSQL."""

    vendor = "postgresql"

    def _check_snapshot(self, snapshot: dict[str, Any]) -> None:
        super()._check_snapshot(snapshot)
        where = nul_at(snapshot, "state")
        if where is not None:
            raise ValueError(
                f"{where} contains a NUL character (\\x00), which PostgreSQLCheckpointer cannot "
                "store (PostgreSQL's JSONB has no \\u0000): remove it, or use "
                "DeltaCheckpointer(ORMDeltaStorage(...)), which stores it"
            )
