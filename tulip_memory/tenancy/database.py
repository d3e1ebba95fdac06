"""A Django database alias used in transactions pinned to one tenant.

:class:`TenantDatabase` is shared by the ORM checkpointers and the ORM delta storage: the
alias ``using`` (its vendor checked when built), the tenant (fixed by the constructor, else
the bound one at call time) and :meth:`~TenantDatabase._run`, which runs ORM work in one
:func:`~tulip_memory.tenancy.context.tenant_atomic` transaction, off the event loop.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from asgiref.sync import sync_to_async

from tulip_memory.core.optional_dependencies import import_optional
from tulip_memory.exceptions import ConfigurationError, TenantError
from tulip_memory.tenancy.locks import WriterLocks

__all__ = ["TenantDatabase"]

T = TypeVar("T")


class TenantDatabase(WriterLocks):
    """A Django database alias of one vendor, used in tenant-pinned transactions."""

    vendor: ClassVar[str] = ""  # "postgresql", "mysql" (MariaDB too); "" accepts any
    driver: ClassVar[str | None] = None  # module of an optional database driver...
    extra: ClassVar[str] = ""  # ...and the tulip-memory extra that installs it

    def __init__(self, using: str = "default", *, tenant: str | None = None) -> None:
        from django.db import connections

        from tulip_memory.tenancy.context import validate_tenant

        if not isinstance(using, str) or not using:
            raise ValueError(f"using must be a Django database alias, got {using!r}")
        if using not in connections.settings:
            raise ConfigurationError(
                f"{type(self).__name__}: no database alias {using!r} in settings.DATABASES "
                f"(known: {sorted(connections.settings)})"
            )
        if tenant is not None:
            validate_tenant(tenant)
        if self.driver:
            import_optional(self.driver, self.extra)
        engine = connections.settings[using]["ENGINE"]
        if self.vendor:
            actual = connections[using].vendor
            if actual != self.vendor:
                raise ConfigurationError(
                    f"{type(self).__name__} needs a {self.vendor} database, but alias "
                    f"{using!r} is {actual} ({engine})"
                )
        self.using = using
        self.tenant = tenant

    def __repr__(self) -> str:
        return f"<{type(self).__name__} using={self.using!r}>"

    def event_tenant(self) -> str | None:
        """The tenant events name: the fixed one, else the bound one (``None``: neither)."""
        from tulip_memory.tenancy.context import current_tenant

        return self.tenant if self.tenant is not None else current_tenant()

    def _resolve_tenant(self) -> str:
        from tulip_memory.tenancy.context import current_tenant, refuse_another_tenant

        if self.tenant is not None:
            refuse_another_tenant(self.tenant, f"{type(self).__name__} is fixed to tenant")
            return self.tenant
        bound = current_tenant()
        if bound is None:
            raise TenantError(
                "no tenant: pass one to the constructor, or bind one with tenant_context() "
                "or TenantMiddleware"
            )
        return bound

    async def _run(self, func: Callable[..., T], *args: Any, lock: str | None = None) -> T:
        """Run ``func(tenant, *args)`` in a transaction pinned to the tenant, off the loop;
        with ``lock`` (a thread id), under the thread's writer lock (:meth:`_writer_lock`),
        taken before the transaction starts and released after it ends."""
        tenant = self._resolve_tenant()
        return await sync_to_async(self._in_transaction)(tenant, func, args, lock)

    def _in_transaction(
        self, tenant: str, func: Callable[..., T], args: tuple[Any, ...], lock: str | None
    ) -> T:
        from tulip_memory.tenancy.context import tenant_atomic

        writer = contextlib.nullcontext() if lock is None else self._writer_lock(tenant, lock)
        with writer, tenant_atomic(tenant, using=self.using):
            return func(tenant, *args)
