"""PostgreSQLCheckpointer: full snapshots in PostgreSQL through the Django ORM.

The rows carry the tenant and sit under the same row-level security as the store (see
:mod:`tulip_memory.backends.orm`). The state is stored as JSONB, which cannot hold the NUL
character (``\\u0000``): a state containing one anywhere (message text, tool call
arguments, metadata keys or values, its thread id) is refused with ``ValueError`` before
the database is touched. :class:`~tulip_memory.delta.DeltaCheckpointer` over
:class:`~tulip_memory.delta.ORMDeltaStorage` stores such states on PostgreSQL.
"""

from __future__ import annotations

import re
from typing import Any

from tulip_memory.backends.orm import ORMCheckpointer
from tulip_memory.state import AgentState

__all__ = ["PostgreSQLCheckpointer"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _nul_at(value: Any, path: str) -> str | None:
    """Where in ``value`` (a JSON-like snapshot at ``path``) a NUL character is, or None."""
    if isinstance(value, str):
        return path if "\x00" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            step = (
                f"{path}.{key}" if isinstance(key, str) and _NAME.match(key) else f"{path}[{key!r}]"
            )
            if isinstance(key, str) and "\x00" in key:
                return f"{step} (the key)"
            found = _nul_at(item, step)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = _nul_at(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


def _refuse_nul(state: AgentState) -> None:
    """ValueError naming where ``state`` holds a NUL character, which JSONB cannot store."""
    where = _nul_at(state.to_checkpoint(), "state")
    if where is not None:
        raise ValueError(
            f"{where} contains a NUL character (\\x00), which PostgreSQLCheckpointer cannot "
            "store (PostgreSQL's JSONB has no \\u0000): remove it, or use "
            "DeltaCheckpointer(ORMDeltaStorage(...)), which stores it"
        )


class PostgreSQLCheckpointer(ORMCheckpointer):
    """Checkpoints on the Django alias ``using``, which must be PostgreSQL.

    A state holding a NUL character is refused (``ValueError``): see the module docstring.
    """

    vendor = "postgresql"

    async def _save(
        self, state: AgentState, thread_id: str, checkpoint_id: str, *, may_exist: bool
    ) -> None:
        _refuse_nul(state)
        await super()._save(state, thread_id, checkpoint_id, may_exist=may_exist)
