"""HTTP middleware of tulip_memory (public path): :class:`TenantMiddleware` binds each
request's tenant; it lives in :mod:`tulip_memory.tenancy.middleware`."""

from tulip_memory.tenancy.middleware import (
    TENANT_SESSION_KEY,
    TenantMiddleware,
    resolve_tenant_from_header,
    resolve_tenant_from_membership,
)

__all__ = [
    "TENANT_SESSION_KEY",
    "TenantMiddleware",
    "resolve_tenant_from_header",
    "resolve_tenant_from_membership",
]
