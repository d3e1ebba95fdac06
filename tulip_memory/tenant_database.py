"""A Django database alias used in transactions pinned to one tenant.

:class:`TenantDatabase` is what the ORM-backed checkpointers
(:mod:`tulip_memory.backends.orm`) and the ORM delta storage
(:mod:`tulip_memory.delta.orm`) share: the alias ``using`` (its vendor checked when
built), the tenant (fixed by the constructor, else the one bound by
:func:`~tulip_memory.tenancy.tenant_context` at call time) and :meth:`TenantDatabase._run`,
which runs blocking ORM work off the event loop in one transaction opened by
:func:`~tulip_memory.tenancy.tenant_atomic`. On PostgreSQL that transaction is pinned to
the tenant, so row-level security shows and accepts only that tenant's rows. A call made
while another tenant is bound raises :class:`~tulip_memory.exceptions.TenantError`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from asgiref.sync import sync_to_async

from tulip_memory.exceptions import ConfigurationError, TenantError
from tulip_memory.optional_dependencies import import_optional

__all__ = ["TenantDatabase"]

T = TypeVar("T")


class TenantDatabase:
    """A Django database alias of one vendor, used in tenant-pinned transactions."""

    vendor: ClassVar[str] = ""  # "postgresql", "mysql" (MariaDB too); "" accepts any
    driver: ClassVar[str | None] = None  # module of an optional database driver...
    extra: ClassVar[str] = ""  # ...and the tulip-memory extra that installs it

    def __init__(self, using: str = "default", *, tenant: str | None = None) -> None:
        from django.db import connections

        from tulip_memory.tenancy import validate_tenant

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

    async def _run(self, func: Callable[..., T], *args: Any) -> T:
        """Run ``func(tenant, *args)`` in a transaction pinned to the tenant, off the loop.

        A fixed tenant that differs from the one bound by ``tenant_context`` raises
        :class:`~tulip_memory.exceptions.TenantError`: the code bound to one tenant would
        otherwise read or write another's rows through an object built for it.
        """
        from tulip_memory.tenancy import current_tenant

        bound = current_tenant()
        if self.tenant is not None and bound is not None and bound != self.tenant:
            raise TenantError(
                f"{type(self).__name__} is fixed to tenant {self.tenant!r} but tenant "
                f"{bound!r} is bound"
            )

        def in_transaction() -> T:
            from tulip_memory.tenancy import tenant_atomic

            with tenant_atomic(self.tenant, using=self.using) as tenant:
                return func(tenant, *args)

        return await sync_to_async(in_transaction)()
