"""Admin of the checkpoints layer: read-only views of checkpoints and delta chains.

Registered on the default site and meant to be subclassed (unregister, then register
your subclass). Read-only and tenant scoping:
:class:`~tulip_memory.admin.tenancy.ReadOnlyAdminMixin` and
:class:`~tulip_memory.admin.tenancy.TenantScopedAdminMixin`.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import admin
from django.db import models
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from tulip_memory.admin.tenancy import ReadOnlyAdminMixin, TenantScopedAdminMixin
from tulip_memory.models import CheckpointRecord, DeltaBlock, DeltaCheckpointRecord

__all__ = ["CheckpointRecordAdmin", "DeltaBlockAdmin", "DeltaCheckpointRecordAdmin"]


@admin.register(CheckpointRecord)
class CheckpointRecordAdmin(ReadOnlyAdminMixin, TenantScopedAdminMixin, admin.ModelAdmin):
    list_display = ("checkpoint_id", "thread_id", "message_count", "created_at")
    search_fields = ("thread_id", "checkpoint_id")
    date_hierarchy = "created_at"
    ordering = ("-id",)

    @admin.display(description=_("messages"))
    def message_count(self, obj: CheckpointRecord) -> int:
        return len(obj.state.get("messages", ())) if isinstance(obj.state, dict) else 0


def _changelist_link(model: type[models.Model], label: str, **filters: str) -> str:
    url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
    return format_html('<a href="{}?{}">{}</a>', url, urlencode(filters), label)


@admin.register(DeltaCheckpointRecord)
class DeltaCheckpointRecordAdmin(ReadOnlyAdminMixin, TenantScopedAdminMixin, admin.ModelAdmin):
    """Delta checkpoints as chains: kind, depth, parent and chain root links, sizes."""

    list_display = (
        "checkpoint_id",
        "thread_id",
        "kind",
        "chain_depth",
        "parent_link",
        "base_link",
        "size_bytes",
        "compressed_size_bytes",
        "block_count",
        "created_at",
    )
    list_filter = ("is_full",)
    search_fields = ("thread_id", "checkpoint_id", "parent_id", "base_id")
    ordering = ("-id",)
    exclude = ("data",)
    readonly_fields = ("chain",)

    @admin.display(description=_("kind"), ordering="is_full")
    def kind(self, obj: DeltaCheckpointRecord) -> str:
        return gettext("full") if obj.is_full else gettext("delta")

    @admin.display(description=_("parent"))
    def parent_link(self, obj: DeltaCheckpointRecord) -> str:
        if not obj.parent_id:
            return "-"
        return _changelist_link(
            DeltaCheckpointRecord,
            obj.parent_id,
            thread_id=obj.thread_id,
            checkpoint_id=obj.parent_id,
        )

    @admin.display(description=_("chain root"))
    def base_link(self, obj: DeltaCheckpointRecord) -> str:
        return _changelist_link(
            DeltaCheckpointRecord, obj.base_id, thread_id=obj.thread_id, base_id=obj.base_id
        )

    @admin.display(description=_("blocks"))
    def block_count(self, obj: DeltaCheckpointRecord) -> int:
        return len(obj.blocks or ())

    @admin.display(description=_("chain (root first)"))
    def chain(self, obj: DeltaCheckpointRecord) -> str:
        """The records from the chain's full checkpoint to this one."""
        rows = {
            row.checkpoint_id: row
            for row in DeltaCheckpointRecord.objects.using(obj._state.db)
            .of_thread(obj.tenant, obj.thread_id)
            .filter(base_id=obj.base_id)
            .only("checkpoint_id", "parent_id", "is_full", "chain_depth", "compressed_size_bytes")
        }
        chain = [obj]
        while not chain[-1].is_full and chain[-1].parent_id in rows and len(chain) <= len(rows):
            chain.append(rows[chain[-1].parent_id])
        return format_html(
            "<ol>{}</ol>",
            format_html_join(
                "",
                gettext("<li>{} — {}, depth {}, {} bytes</li>"),
                (
                    (
                        r.checkpoint_id,
                        gettext("full") if r.is_full else gettext("delta"),
                        r.chain_depth,
                        r.compressed_size_bytes,
                    )
                    for r in reversed(chain)
                ),
            ),
        )


@admin.register(DeltaBlock)
class DeltaBlockAdmin(ReadOnlyAdminMixin, TenantScopedAdminMixin, admin.ModelAdmin):
    list_display = ("digest", "thread_id", "size_bytes", "created_at")
    search_fields = ("thread_id", "digest")
    ordering = ("-id",)
    exclude = ("data",)
