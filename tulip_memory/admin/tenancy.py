"""Admin mixins for tables under tenant row-level security, meant for every layer's admin.

The admin connects as the application role, so it sees a tenant table only inside a
transaction pinned to one tenant; a view over "all tenants" would need a role that
bypasses row-level security, which the app never has — by design. So each view runs
(template rendering included: the changelist is evaluated while rendering) inside
:func:`~tulip_memory.tenancy.tenant_atomic` for the request's tenant:

1. ``?tenant=<name>`` — for superusers only (it is also a changelist filter on the
   ``tenant`` column, so pagination and sorting keep it; detail pages find it in the
   preserved ``_changelist_filters``);
2. else ``request.tenant`` set by :class:`~tulip_memory.middleware.TenantMiddleware`, or the
   tenant bound by :func:`~tulip_memory.tenancy.tenant_context`.

Without a tenant the page is empty and says how to pick one. Override
:meth:`TenantScopedAdminMixin.request_tenant` to choose differently.

Every layer's ModelAdmins combine both mixins (``ReadOnlyAdminMixin,
TenantScopedAdminMixin, admin.ModelAdmin``) and are meant to be subclassed: unregister
one, then register a subclass (e.g. one that allows retrying a failed job).
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.db import router
from django.http import HttpRequest, HttpResponse, QueryDict
from django.utils.translation import gettext_lazy as _

from tulip_memory.tenancy import current_tenant, tenant_atomic, validate_tenant

__all__ = ["ReadOnlyAdminMixin", "TenantScopedAdminMixin"]

TENANT_PARAM = "tenant"

# Shown on a tenant table's pages when the request has no tenant (they are then empty).
NO_TENANT_MESSAGE = _(
    "No tenant is bound to this request, and row-level security shows one "
    "tenant at a time: add ?tenant=<name> to the address (superusers), or send "
    "the tenant header (TULIP_MEMORY['TENANT_HEADER']) through TenantMiddleware."
)


class ReadOnlyAdminMixin:
    """No add, change or delete from the admin (viewing needs the view permission)."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class TenantScopedAdminMixin:
    """Run the changelist and detail views in a transaction pinned to the request's tenant."""

    model: Any

    def request_tenant(self, request: HttpRequest) -> str | None:
        """The tenant this request may see (see the module docstring), or None."""
        user = getattr(request, "user", None)
        if user is not None and user.is_superuser:
            chosen = request.GET.get(TENANT_PARAM) or QueryDict(
                request.GET.get("_changelist_filters", "")
            ).get(TENANT_PARAM)
            if chosen:
                try:
                    return validate_tenant(chosen)
                except ValueError:
                    return None
        return getattr(request, "tenant", None) or current_tenant()

    def _in_tenant(self, request: HttpRequest, view: Any, *args: Any) -> HttpResponse:
        tenant = self.request_tenant(request)
        if tenant is None:
            messages.info(request, NO_TENANT_MESSAGE)
            return view(request, *args)
        with tenant_atomic(tenant, using=router.db_for_read(self.model)):
            response = view(request, *args)
            if hasattr(response, "render"):
                response.render()
            return response

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        return self._in_tenant(request, super().changelist_view, extra_context)  # type: ignore[misc]

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None
    ) -> HttpResponse:
        return self._in_tenant(
            request,
            super().change_view,  # type: ignore[misc]
            object_id,
            form_url,
            extra_context,
        )

    def history_view(
        self, request: HttpRequest, object_id: str, extra_context: Any = None
    ) -> HttpResponse:
        return self._in_tenant(request, super().history_view, object_id, extra_context)  # type: ignore[misc]
