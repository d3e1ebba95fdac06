"""Models of erasure: :class:`ErasureReceipt`, the record that a subject was forgotten.

One row per run of :func:`tulip_memory.erasure.forget_subject` (not a dry run): a
non-reversible reference to the subject, counts, when and by whom; no content. Under
row-level security.
"""

from __future__ import annotations

from typing import Self

from django.db import models
from django.utils import timezone
from django.utils.crypto import salted_hmac
from django.utils.translation import gettext_lazy as _

from tulip_memory.tenancy.context import TENANT_MAX_LENGTH

__all__ = ["COUNT_KEYS", "ErasureReceipt", "ErasureReceiptQuerySet", "subject_reference"]

# What a receipt counts, in the order it is shown (a receipt stored before a kind was
# counted lacks its key).
COUNT_KEYS = (
    "memories",
    "memory_versions",
    "extraction_payloads",
    "checkpoints",
    "delta_checkpoints",
    "delta_blocks",
    "langgraph_checkpoints",
    "langgraph_pending_writes",
    "admin_log_entries",
)

# The HMAC's key salt: a reference is only comparable with references of this purpose.
REFERENCE_SALT = "tulip_memory.erasure.subject"


def subject_reference(tenant: str, subject: str) -> str:
    """HMAC-SHA256 (keyed by ``SECRET_KEY``) of the tenant and the subject, as hex: found
    again by whoever knows both, never read back."""
    return salted_hmac(REFERENCE_SALT, f"{tenant}\x00{subject}", algorithm="sha256").hexdigest()


class ErasureReceiptQuerySet(models.QuerySet):
    def of_subject(self, tenant: str, subject: str) -> Self:
        return self.filter(tenant=tenant, subject_ref=subject_reference(tenant, subject))

    def newest_first(self) -> Self:
        return self.order_by("-created_at", "-id")


class ErasureReceipt(models.Model):
    tenant = models.CharField(max_length=TENANT_MAX_LENGTH)
    subject_ref = models.CharField(
        max_length=64, help_text=_("HMAC-SHA256 of the tenant and the subject (SECRET_KEY)")
    )
    counts = models.JSONField(default=dict, help_text=_("Rows removed or blanked, per kind"))
    actor = models.CharField(
        max_length=255, blank=True, default="", help_text=_("Who asked for the erasure")
    )
    created_at = models.DateTimeField(default=timezone.now)

    objects = ErasureReceiptQuerySet.as_manager()

    class Meta:
        db_table = "tulip_memory_erasure_receipt"
        verbose_name = _("erasure receipt")
        indexes = [
            models.Index(fields=["tenant", "subject_ref"], name="tulip_erasure_subject_idx"),
            models.Index(fields=["tenant", "-created_at"], name="tulip_erasure_recent_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.subject_ref[:12]} ({self.created_at:%Y-%m-%d %H:%M})"

    @property
    def total(self) -> int:
        return sum(int(value) for value in self.counts.values())
