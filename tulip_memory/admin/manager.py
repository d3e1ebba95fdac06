"""Admin of the manager layer: the Celery extraction queues and jobs, read-only.

Registered on the default site and meant to be subclassed (e.g. to allow retrying a
failed job). Read-only and tenant scoping:
:class:`~tulip_memory.admin.tenancy.ReadOnlyAdminMixin` and
:class:`~tulip_memory.admin.tenancy.TenantScopedAdminMixin`. Memory history is not a
table (it lives in the store) and so has no admin here.
"""

from __future__ import annotations

from django.contrib import admin

from tulip_memory.admin.tenancy import ReadOnlyAdminMixin, TenantScopedAdminMixin
from tulip_memory.models import ExtractionJob, ExtractionQueue

__all__ = ["ExtractionJobAdmin", "ExtractionQueueAdmin"]


@admin.register(ExtractionQueue)
class ExtractionQueueAdmin(ReadOnlyAdminMixin, TenantScopedAdminMixin, admin.ModelAdmin):
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
class ExtractionJobAdmin(ReadOnlyAdminMixin, TenantScopedAdminMixin, admin.ModelAdmin):
    list_display = (
        "id",
        "queue",
        "sequence",
        "state",
        "attempts",
        "worker",
        "llm_calls",
        "prompt_tokens",
        "completion_tokens",
        "created_at",
        "finished_at",
    )
    list_filter = ("state",)
    search_fields = ("queue__namespace", "error")
    ordering = ("-id",)
    list_select_related = ("queue",)
    readonly_fields = (
        "queue", "tenant", "sequence", "state", "attempts", "error", "run_after",
        "worker", "created_at", "started_at", "finished_at",
        "llm_model", "llm_calls", "prompt_tokens", "completion_tokens", "payload",
    )  # fmt: skip
