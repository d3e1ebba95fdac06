"""The ORM checkpointer of the PostgreSQL and MySQL backends: one ``CheckpointRecord`` row
per checkpoint, each operation one tenant transaction whose queries filter on the tenant
too (MariaDB has no row-level security). JSON columns take no NaN or Infinity: refused.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

from tulip_memory.backends.base import BlockingCheckpointer, state_from_snapshot
from tulip_memory.core.json_paths import first_at
from tulip_memory.core.subjects import subject_of
from tulip_memory.state import AgentState
from tulip_memory.tenancy.database import TenantDatabase

__all__ = ["ORMCheckpointer"]

T = TypeVar("T")


def _as_tenant(tenant: str, hook: Callable[..., T], *args: Any) -> T:
    from tulip_memory.tenancy.context import tenant_context

    with tenant_context(tenant):
        return hook(*args)


class ORMCheckpointer(TenantDatabase, BlockingCheckpointer):
    """Full snapshots as rows of ``CheckpointRecord`` (JSON), newest = highest id."""

    lock_table = "tulip_memory_checkpoint"

    async def _call_blocking(self, hook: Callable[..., T], *args: Any) -> T:
        return await self._run(_as_tenant, hook, *args)

    async def _save(
        self, state: AgentState, thread_id: str, checkpoint_id: str, *, may_exist: bool
    ) -> None:
        # Two replacing saves at once would both insert (a unique violation, or a MariaDB gap
        # deadlock): they take the thread's writer lock.
        await self._run(
            _as_tenant,
            self._save_sync,
            state,
            thread_id,
            checkpoint_id,
            may_exist,
            lock=thread_id if may_exist else None,
        )

    @staticmethod
    def _tenant() -> str:
        from tulip_memory.tenancy.context import current_tenant

        tenant = current_tenant()
        assert tenant is not None, "the *_sync hooks run inside _as_tenant"
        return tenant

    def _rows(self, thread_id: str) -> Any:
        from tulip_memory.models import CheckpointRecord

        return CheckpointRecord.objects.using(self.using).of_thread(self._tenant(), thread_id)

    def _check_snapshot(self, snapshot: dict[str, Any]) -> None:
        found = first_at(snapshot, "state", lambda v: isinstance(v, float) and not math.isfinite(v))
        if found is not None:
            where, value = found
            raise ValueError(
                f"{where} is {value!r}, which {type(self).__name__} cannot store (the "
                "database's JSON has no NaN or Infinity): replace it, or use "
                "DeltaCheckpointer(ORMDeltaStorage(...)), which stores it"
            )

    def _save_sync(
        self, state: AgentState, thread_id: str, checkpoint_id: str, may_exist: bool
    ) -> None:
        snapshot = state.to_checkpoint()
        self._check_snapshot(snapshot)  # before any statement of the save
        subject = subject_of(state.metadata)
        rows = self._rows(thread_id)
        if may_exist:
            rows.filter(checkpoint_id=checkpoint_id).delete()
        rows.create(
            tenant=self._tenant(),
            thread_id=thread_id,
            checkpoint_id=checkpoint_id,
            state=snapshot,
            subject=subject,
        )

    def _load_sync(self, thread_id: str, checkpoint_id: str | None) -> AgentState | None:
        rows = self._rows(thread_id)
        if checkpoint_id is not None:
            rows = rows.filter(checkpoint_id=checkpoint_id)
        found = rows.newest_first().values_list("checkpoint_id", "state").first()
        return None if found is None else state_from_snapshot(found[1], thread_id, found[0])

    def _list_sync(self, thread_id: str, limit: int) -> list[str]:
        rows = self._rows(thread_id).newest_first()
        return list(rows.values_list("checkpoint_id", flat=True)[:limit])

    def _delete_sync(self, thread_id: str, checkpoint_id: str | None) -> bool:
        rows = self._rows(thread_id)
        if checkpoint_id is not None:
            rows = rows.filter(checkpoint_id=checkpoint_id)
        deleted, _ = rows.delete()
        return deleted > 0
