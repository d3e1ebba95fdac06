"""Which tenants a sweep walks: the named ones (validated, in order, once each), or every
tenant the database knows.
"""

from __future__ import annotations

from collections.abc import Sequence

from tulip_memory.tenancy.context import validate_tenants

__all__ = ["sweep_tenants"]


def sweep_tenants(using: str, tenants: Sequence[str] | None) -> list[str]:
    """``tenants`` validated, or every tenant of the alias ``using`` when None."""
    if tenants is None:
        from tulip_memory.models import Tenant

        return Tenant.objects.using(using).names()
    return validate_tenants(tenants)
