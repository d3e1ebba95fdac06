"""Which tenants a sweep walks: the named ones (validated, in order, without repeats), or
every tenant the database knows (:meth:`TenantQuerySet.names
<tulip_memory.models.tenants.TenantQuerySet.names>`: the tenant registry, plus on vendors
without row-level security the tenants found in the tenant tables)."""

from __future__ import annotations

from collections.abc import Sequence

from tulip_memory.tenancy import validate_tenant

__all__ = ["sweep_tenants"]


def sweep_tenants(using: str, tenants: Sequence[str] | None) -> list[str]:
    """``tenants`` validated, or every tenant of the alias ``using`` when None."""
    if tenants is None:
        from tulip_memory.models import Tenant

        return Tenant.objects.using(using).names()
    if isinstance(tenants, str):
        raise ValueError("tenants must be a list of tenant names, not one string")
    named: list[str] = []
    for tenant in tenants:
        try:
            valid = validate_tenant(tenant)
        except ValueError as exc:
            raise ValueError(f"tenant {tenant!r} is not valid: {exc}") from None
        if valid not in named:
            named.append(valid)
    return named
