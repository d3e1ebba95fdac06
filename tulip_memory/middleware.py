"""HTTP middleware of tulip_memory: :class:`TenantMiddleware` and its default resolver.

:class:`TenantMiddleware` binds each request's tenant (with
:func:`tulip_memory.tenancy.tenant_context`) through the configurable resolver
``TULIP_MEMORY["TENANT_RESOLVER"]`` (default :func:`resolve_tenant_from_header`).
Add ``"tulip_memory.middleware.TenantMiddleware"`` to ``MIDDLEWARE``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction

from tulip_memory.tenancy import tenant_context, validate_tenant

__all__ = ["TenantMiddleware", "resolve_tenant_from_header"]


def resolve_tenant_from_header(request: Any) -> str | None:
    """Default tenant resolver: the ``TULIP_MEMORY["TENANT_HEADER"]`` request header.

    Only trust it behind a gateway that sets it after authenticating the caller; a
    project with its own notion of tenant points ``TENANT_RESOLVER`` at a function of
    the request (for instance of ``request.user``).
    """
    from tulip_memory.conf import settings

    value = request.headers.get(settings.TENANT_HEADER)
    if value is None or not value.strip():
        return None
    return value


class TenantMiddleware:
    """Bind the request's tenant (``TULIP_MEMORY["TENANT_RESOLVER"]``) while it is handled.

    The tenant is also set on ``request.tenant`` (None when the resolver found none:
    tenant tables then show nothing). A resolver's value that is not a valid tenant is
    rejected with 400 Bad Request. Sync and async capable.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def _resolve(self, request: Any) -> str | None:
        from tulip_memory.conf import settings

        resolver = settings.import_setting("TENANT_RESOLVER")
        tenant = resolver(request) if resolver is not None else None
        if tenant is not None:
            validate_tenant(tenant)
        request.tenant = tenant
        return tenant

    def __call__(self, request: Any) -> Any:
        if self.is_async:
            return self.__acall__(request)
        try:
            tenant = self._resolve(request)
        except ValueError as exc:
            return _bad_tenant(exc)
        if tenant is None:
            return self.get_response(request)
        with tenant_context(tenant):
            return self.get_response(request)

    async def __acall__(self, request: Any) -> Any:
        try:
            tenant = self._resolve(request)
        except ValueError as exc:
            return _bad_tenant(exc)
        if tenant is None:
            return await self.get_response(request)
        with tenant_context(tenant):
            return await self.get_response(request)


def _bad_tenant(exc: ValueError) -> Any:
    from django.http import HttpResponseBadRequest

    return HttpResponseBadRequest(f"invalid tenant: {exc}")
