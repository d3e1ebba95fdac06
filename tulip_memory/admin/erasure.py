"""Admin of erasure receipts: what was forgotten in the admin tenant, when and by whom.
Read-only, searchable by the subject's keyed hash; a receipt holds no content.
"""

from __future__ import annotations

from django.contrib import admin
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from tulip_memory.admin.tenancy import ReadOnlyTenantAdmin, column
from tulip_memory.models.erasure import COUNT_KEYS, ErasureReceipt

__all__ = ["ErasureReceiptAdmin"]


@admin.register(ErasureReceipt)
class ErasureReceiptAdmin(ReadOnlyTenantAdmin):
    list_display = ("created_at", "subject_reference", "actor", "removed")
    list_filter = ("created_at",)
    search_fields = ("=subject_ref", "actor")
    ordering = ("-created_at", "-id")
    fields = readonly_fields = ("created_at", "subject_ref", "actor", "count_table")

    @admin.display(description=_("subject (reference)"), ordering="subject_ref")
    def subject_reference(self, receipt: ErasureReceipt) -> str:
        return receipt.subject_ref[:16] + "…"

    removed = column("total", _("rows removed or blanked"), sortable=False)

    @admin.display(description=_("counts"))
    def count_table(self, receipt: ErasureReceipt) -> SafeString:
        keys = [key for key in COUNT_KEYS if key in receipt.counts]
        keys += sorted(set(receipt.counts) - set(keys))
        rows = format_html_join(
            "", "<tr><th>{}</th><td>{}</td></tr>", ((k, receipt.counts[k]) for k in keys)
        )
        return format_html("<table>{}</table>", rows)
