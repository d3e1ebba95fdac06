"""Admin of the manager layer: the Celery extraction queues and jobs, read-only.

The tables are under tenant row-level security, so each view runs inside
:func:`~tulip_memory.tenancy.tenant_atomic` for the request's tenant (bound by
:class:`~tulip_memory.tenancy.TenantMiddleware`); without one the lists are empty. The
ModelAdmins are meant to be subclassed (e.g. to allow retrying a failed job); memory
history is not a table (it lives in the store) and so has no admin here.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse

from tulip_memory.models import ExtractionJob, ExtractionQueue
from tulip_memory.tenancy import current_tenant, tenant_atomic

__all__ = ["ExtractionJobAdmin", "ExtractionQueueAdmin", "ReadOnlyTenantAdmin"]


class ReadOnlyTenantAdmin(admin.ModelAdmin):
    """No add, change or delete; every view pinned to the request's tenant."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def _in_tenant(
        self, view: Any, request: HttpRequest, *args: Any, **kwargs: Any
    ) -> HttpResponse:
        tenant = current_tenant()
        if tenant is None:
            return view(request, *args, **kwargs)
        with tenant_atomic(tenant, using=self.model.objects.db):
            response = view(request, *args, **kwargs)
            if hasattr(response, "render"):
                response.render()  # evaluate the querysets while the tenant is pinned
            return response

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        return self._in_tenant(super().changelist_view, request, extra_context)

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None
    ) -> HttpResponse:
        return self._in_tenant(super().change_view, request, object_id, form_url, extra_context)


@admin.register(ExtractionQueue)
class ExtractionQueueAdmin(ReadOnlyTenantAdmin):
    list_display = ("namespace", "tenant", "last_sequence", "lease_owner", "lease_expires_at")
    search_fields = ("namespace",)
    readonly_fields = (
        "tenant",
        "namespace",
        "last_sequence",
        "lease_owner",
        "lease_expires_at",
        "recheck_at",
    )


@admin.register(ExtractionJob)
class ExtractionJobAdmin(ReadOnlyTenantAdmin):
    list_display = (
        "id",
        "queue",
        "sequence",
        "state",
        "attempts",
        "worker",
        "created_at",
        "finished_at",
    )
    list_filter = ("state",)
    search_fields = ("queue__namespace", "error")
    ordering = ("-id",)
    list_select_related = ("queue",)
    readonly_fields = (
        "queue", "tenant", "sequence", "state", "attempts", "error", "run_after",
        "worker", "created_at", "started_at", "finished_at", "payload",
    )  # fmt: skip
