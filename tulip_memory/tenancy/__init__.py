"""Tenancy: which tenant the current code runs for, and pinning it on a database transaction.

The public names live here (:func:`tenant_context`, :func:`current_tenant`,
:func:`tenant_atomic`, :class:`TenantMiddleware`); :mod:`.context` binds and pins,
:mod:`.database` runs ORM work pinned to a tenant, :mod:`.middleware` binds a request's.
"""

from tulip_memory.tenancy.context import (
    TENANT_MAX_LENGTH,
    current_tenant,
    emit_on_commit,
    tenant_atomic,
    tenant_context,
    validate_tenant,
    validate_tenants,
)
from tulip_memory.tenancy.middleware import TenantMiddleware

__all__ = [
    "TENANT_MAX_LENGTH",
    "TenantMiddleware",
    "current_tenant",
    "emit_on_commit",
    "tenant_atomic",
    "tenant_context",
    "validate_tenant",
    "validate_tenants",
]
