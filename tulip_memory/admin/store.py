"""Admin of the store layer: PgMemory's items ("memories"), read-only, one tenant at a time.

Registered on the default site and meant to be subclassed (unregister, then register your
subclass). Tenant scoping: :class:`~tulip_memory.admin.tenancy.TenantScopedAdminMixin`.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from tulip_memory.admin.tenancy import ReadOnlyAdminMixin, TenantScopedAdminMixin
from tulip_memory.models.store import MemoryItem

__all__ = ["MemoryItemAdmin"]


@admin.register(MemoryItem)
class MemoryItemAdmin(ReadOnlyAdminMixin, TenantScopedAdminMixin, admin.ModelAdmin):
    """Browse one tenant's memories: namespace, key, value, metadata, version, vector source."""

    list_display = ("namespace", "key", "short_value", "version", "embedding_source", "updated_at")
    list_filter = ("embedding_source",)
    search_fields = ("namespace", "key", "search_text")
    ordering = ("namespace", "-updated_at", "key")
    date_hierarchy = "updated_at"
    list_per_page = 50
    fields = (
        "tenant",
        "namespace",
        "key",
        "pretty_value",
        "pretty_metadata",
        "embedding_source",
        "version",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields

    def get_queryset(self, request: Any) -> Any:
        # The vector is wide and not shown: leave it in the database.
        return super().get_queryset(request).defer("embedding")

    @admin.display(description=_("value"))
    def short_value(self, item: MemoryItem) -> str:
        text = json.dumps(item.value, ensure_ascii=False)
        return text if len(text) <= 80 else text[:79] + "…"

    @admin.display(description=_("value"))
    def pretty_value(self, item: MemoryItem) -> str:
        return format_html("<pre>{}</pre>", json.dumps(item.value, ensure_ascii=False, indent=2))

    @admin.display(description=_("metadata"))
    def pretty_metadata(self, item: MemoryItem) -> str:
        return format_html("<pre>{}</pre>", json.dumps(item.metadata, ensure_ascii=False, indent=2))
