"""Tenancy: which tenant the current code runs for, and pinning it on a database transaction.

:mod:`.context` binds and pins, :mod:`.middleware` binds a request's, :mod:`.database` runs
ORM work pinned to a tenant under the writer locks of :mod:`.locks`, :mod:`.connections`
holds the long-lived connections of the LangGraph integration.
"""

from tulip_memory.tenancy.context import (
    current_tenant,
    tenant_atomic,
    tenant_context,
    validate_tenant,
)
from tulip_memory.tenancy.middleware import TenantMiddleware

__all__ = [
    "TenantMiddleware",
    "current_tenant",
    "tenant_atomic",
    "tenant_context",
    "validate_tenant",
]
