"""Which tenants a sweep walks: the named ones (validated, in order, once each), or every
tenant the database knows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from tulip_memory.tenancy.context import validate_tenants

__all__ = ["per_tenant", "sweep_tenants"]

Report = TypeVar("Report")


def sweep_tenants(using: str, tenants: Sequence[str] | None) -> list[str]:
    """``tenants`` validated, or every tenant of the alias ``using`` when None."""
    if tenants is None:
        from tulip_memory.models import Tenant

        return Tenant.objects.using(using).names()
    return validate_tenants(tenants)


def per_tenant(
    sweep: Callable[..., Report], using: str, tenants: Sequence[str] | None, **options: Any
) -> dict[str, Report]:
    """``sweep(tenant, using=using, **options)`` for each of :func:`sweep_tenants`."""
    return {
        tenant: sweep(tenant, using=using, **options) for tenant in sweep_tenants(using, tenants)
    }
