"""Models of the checkpoints layer.

* :class:`CheckpointRecord` — one full snapshot per row: what
  :class:`~tulip_memory.backends.PostgreSQLCheckpointer` and
  :class:`~tulip_memory.backends.MySQLCheckpointer` store.
* :class:`DeltaCheckpointRecord` and :class:`DeltaBlock` — the rows of
  :class:`~tulip_memory.delta.ORMDeltaStorage`: checkpoints of a
  :class:`~tulip_memory.delta.DeltaCheckpointer` (full or delta, with their parent and
  chain root) and the content-addressed message blocks that full checkpoints refer to.

Every row carries its ``tenant``; on PostgreSQL the tables are under the tenant
row-level security policy (migration ``0002_checkpoints``), so queries run inside
:func:`tulip_memory.tenancy.tenant_atomic`. The tenant leads every composite index.
Save order is the auto-increment ``id``: "newest first" is ``-id``.
"""

from __future__ import annotations

from typing import Self

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from tulip_memory.identifiers import CHECKPOINT_ID_MAX_LENGTH, THREAD_ID_MAX_LENGTH
from tulip_memory.tenancy import TENANT_MAX_LENGTH

__all__ = [
    "CheckpointRecord",
    "CheckpointRecordQuerySet",
    "DeltaBlock",
    "DeltaBlockQuerySet",
    "DeltaCheckpointRecord",
    "DeltaCheckpointRecordQuerySet",
    "ThreadRow",
    "ThreadRowsQuerySet",
]


class ThreadRowsQuerySet(models.QuerySet):
    """Rows of one tenant's thread, in save order."""

    def of_thread(self, tenant: str, thread_id: str) -> Self:
        return self.filter(tenant=tenant, thread_id=thread_id)

    def newest_first(self) -> Self:
        return self.order_by("-id")


class ThreadRow(models.Model):
    """The columns every row of this layer starts with: its tenant and its thread."""

    tenant = models.CharField(max_length=TENANT_MAX_LENGTH)
    thread_id = models.CharField(max_length=THREAD_ID_MAX_LENGTH)

    class Meta:
        abstract = True


class CheckpointRecordQuerySet(ThreadRowsQuerySet):
    """Full snapshots of a thread."""


class CheckpointRecord(ThreadRow):
    """A full snapshot of an agent state (JSON of ``AgentState.to_checkpoint()``)."""

    checkpoint_id = models.CharField(max_length=CHECKPOINT_ID_MAX_LENGTH)
    state = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now)

    objects = CheckpointRecordQuerySet.as_manager()

    class Meta:
        db_table = "tulip_memory_checkpoint"
        verbose_name = _("checkpoint")
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "thread_id", "checkpoint_id"], name="tulip_ckpt_id_uniq"
            )
        ]
        indexes = [models.Index(fields=["tenant", "thread_id", "id"], name="tulip_ckpt_order_idx")]

    def __str__(self) -> str:
        return f"{self.thread_id}/{self.checkpoint_id}"


class DeltaCheckpointRecordQuerySet(ThreadRowsQuerySet):
    def chain_group(
        self, tenant: str, thread_id: str, checkpoint_id: str | None
    ) -> DeltaCheckpointRecordQuerySet:
        """Rows sharing the chain root (``base_id``) of a checkpoint (the newest when None).

        One query: the root is found by a scalar subquery. The rows contain the
        checkpoint's whole chain (and any sibling branch grown from the same root).
        """
        rows = self.of_thread(tenant, thread_id)
        anchor = (
            rows.newest_first()
            if checkpoint_id is None
            else rows.filter(checkpoint_id=checkpoint_id)
        )
        return rows.filter(base_id=models.Subquery(anchor.values("base_id")[:1])).newest_first()


class DeltaCheckpointRecord(ThreadRow):
    """A checkpoint of a DeltaCheckpointer: a full checkpoint (block references and the
    state's other fields) or a delta against ``parent_id``; ``base_id`` is the full
    checkpoint its chain starts from (itself for a full one)."""

    checkpoint_id = models.CharField(max_length=CHECKPOINT_ID_MAX_LENGTH)
    parent_id = models.CharField(max_length=CHECKPOINT_ID_MAX_LENGTH, blank=True, default="")
    base_id = models.CharField(max_length=CHECKPOINT_ID_MAX_LENGTH)
    is_full = models.BooleanField()
    chain_depth = models.PositiveIntegerField()
    blocks = models.JSONField(
        default=list, help_text=_("[[digest, message count], ...] of a full checkpoint")
    )
    size_bytes = models.PositiveBigIntegerField(help_text=_("Encoded size before compression"))
    compressed_size_bytes = models.PositiveBigIntegerField(help_text=_("Stored size of data"))
    data = models.BinaryField()
    created_at = models.DateTimeField(default=timezone.now)

    objects = DeltaCheckpointRecordQuerySet.as_manager()

    class Meta:
        db_table = "tulip_memory_delta_checkpoint"
        verbose_name = _("delta checkpoint")
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "thread_id", "checkpoint_id"], name="tulip_dckpt_id_uniq"
            )
        ]
        indexes = [
            models.Index(fields=["tenant", "thread_id", "id"], name="tulip_dckpt_order_idx"),
            models.Index(fields=["tenant", "thread_id", "base_id"], name="tulip_dckpt_base_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.thread_id}/{self.checkpoint_id}"


class DeltaBlockQuerySet(ThreadRowsQuerySet):
    """Message blocks of a thread."""


class DeltaBlock(ThreadRow):
    """A run of messages stored once and named by its content's digest."""

    digest = models.CharField(max_length=64)
    data = models.BinaryField()
    size_bytes = models.PositiveBigIntegerField(help_text=_("Encoded size before compression"))
    created_at = models.DateTimeField(default=timezone.now)

    objects = DeltaBlockQuerySet.as_manager()

    class Meta:
        db_table = "tulip_memory_delta_block"
        verbose_name = _("delta block")
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "thread_id", "digest"], name="tulip_dblock_digest_uniq"
            )
        ]

    def __str__(self) -> str:
        return f"{self.thread_id}/{self.digest[:12]}"
