"""The ORM-backed checkpointer shared by the PostgreSQL and MySQL backends.

One row per checkpoint (:class:`~tulip_memory.models.CheckpointRecord`) on the Django
database alias ``database``. Each operation is one transaction opened by
:func:`tulip_memory.tenancy.tenant_atomic`: the rows carry the tenant (the one passed to
the constructor, else the one bound by :func:`~tulip_memory.tenancy.tenant_context` at
call time) and, on PostgreSQL, the transaction is pinned to it, so row-level security
shows and accepts only that tenant's rows. Queries filter on the tenant as well, so the
isolation holds on MariaDB too (where there is no row-level security).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from asgiref.sync import sync_to_async

from tulip_memory.backends.base import BaseCheckpointer, import_optional
from tulip_memory.exceptions import ConfigurationError
from tulip_memory.state import AgentState

__all__ = ["ORMCheckpointer", "TenantDatabase"]

T = TypeVar("T")


class TenantDatabase:
    """A Django database alias of one vendor, used in tenant-pinned transactions."""

    vendor: ClassVar[str] = ""  # "postgresql", "mysql" (MariaDB too); "" accepts any
    driver: ClassVar[str | None] = None  # module of an optional database driver...
    extra: ClassVar[str] = ""  # ...and the tulip-memory extra that installs it

    def __init__(self, database: str = "default", *, tenant: str | None = None) -> None:
        from django.db import connections

        from tulip_memory.tenancy import validate_tenant

        if not isinstance(database, str) or not database:
            raise ValueError(f"database must be a Django database alias, got {database!r}")
        if database not in connections.settings:
            raise ConfigurationError(
                f"{type(self).__name__}: no database alias {database!r} in settings.DATABASES "
                f"(known: {sorted(connections.settings)})"
            )
        if tenant is not None:
            validate_tenant(tenant)
        if self.driver:
            import_optional(self.driver, self.extra)
        engine = connections.settings[database]["ENGINE"]
        if self.vendor:
            actual = connections[database].vendor
            if actual != self.vendor:
                raise ConfigurationError(
                    f"{type(self).__name__} needs a {self.vendor} database, but alias "
                    f"{database!r} is {actual} ({engine})"
                )
        self.database = database
        self.tenant = tenant

    def __repr__(self) -> str:
        return f"<{type(self).__name__} database={self.database!r}>"

    async def _run(self, func: Callable[..., T], *args: Any) -> T:
        """Run ``func(tenant, *args)`` in a transaction pinned to the tenant, off the loop."""

        def in_transaction() -> T:
            from tulip_memory.tenancy import tenant_atomic

            with tenant_atomic(self.tenant, using=self.database) as tenant:
                return func(tenant, *args)

        return await sync_to_async(in_transaction)()


class ORMCheckpointer(TenantDatabase, BaseCheckpointer):
    """Full snapshots as rows of ``CheckpointRecord`` (JSON), newest = highest id."""

    def _rows(self, tenant: str, thread_id: str) -> Any:
        from tulip_memory.models import CheckpointRecord

        return CheckpointRecord.objects.using(self.database).of_thread(tenant, thread_id)

    def _save_sync(
        self, tenant: str, state: AgentState, thread_id: str, checkpoint_id: str, may_exist: bool
    ) -> None:
        rows = self._rows(tenant, thread_id)
        if may_exist:
            rows.filter(checkpoint_id=checkpoint_id).delete()
        rows.create(
            tenant=tenant,
            thread_id=thread_id,
            checkpoint_id=checkpoint_id,
            state=state.to_checkpoint(),
        )

    def _load_sync(
        self, tenant: str, thread_id: str, checkpoint_id: str | None
    ) -> AgentState | None:
        rows = self._rows(tenant, thread_id)
        if checkpoint_id is not None:
            rows = rows.filter(checkpoint_id=checkpoint_id)
        snapshot = rows.newest_first().values_list("state", flat=True).first()
        return None if snapshot is None else AgentState.from_checkpoint(snapshot)

    def _list_sync(self, tenant: str, thread_id: str, limit: int) -> list[str]:
        rows = self._rows(tenant, thread_id).newest_first()
        return list(rows.values_list("checkpoint_id", flat=True)[:limit])

    def _delete_sync(self, tenant: str, thread_id: str, checkpoint_id: str | None) -> bool:
        rows = self._rows(tenant, thread_id)
        if checkpoint_id is not None:
            rows = rows.filter(checkpoint_id=checkpoint_id)
        deleted, _ = rows.delete()
        return deleted > 0

    async def _save(
        self, state: AgentState, thread_id: str, checkpoint_id: str, *, may_exist: bool
    ) -> None:
        await self._run(self._save_sync, state, thread_id, checkpoint_id, may_exist)

    async def _load(self, thread_id: str, checkpoint_id: str | None) -> AgentState | None:
        return await self._run(self._load_sync, thread_id, checkpoint_id)

    async def _list(self, thread_id: str, limit: int) -> list[str]:
        return await self._run(self._list_sync, thread_id, limit)

    async def _delete(self, thread_id: str, checkpoint_id: str | None) -> bool:
        return await self._run(self._delete_sync, thread_id, checkpoint_id)
