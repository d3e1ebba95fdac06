"""Models of the checkpointers: :class:`CheckpointRecord` (one snapshot per row, the ORM
checkpointers), :class:`DeltaCheckpointRecord` and :class:`DeltaBlock` (ORMDeltaStorage).
Every row carries its tenant (row-level security on PostgreSQL); ``-id`` is newest first.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Self

from django.db import connections, models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from tulip_memory.core.identifiers import CHECKPOINT_ID_MAX_LENGTH, THREAD_ID_MAX_LENGTH
from tulip_memory.core.subjects import SUBJECT_MAX_LENGTH
from tulip_memory.tenancy.cluster import is_citus
from tulip_memory.tenancy.context import TENANT_MAX_LENGTH

__all__ = [
    "CheckpointRecord",
    "CheckpointRow",
    "DeltaBlock",
    "DeltaCheckpointRecord",
    "DeltaCheckpointRecordQuerySet",
    "SubjectRowsQuerySet",
    "SubjectThreadRow",
    "ThreadRow",
    "ThreadRowsQuerySet",
]

# The next id of a table's identity sequence (drawn on the Citus coordinator).
NEXT_ID = "SELECT nextval(pg_get_serial_sequence(%s, 'id'))"


class ThreadRowsQuerySet(models.QuerySet):
    """Rows of one tenant's thread, in save order."""

    def of_thread(self, tenant: str, thread_id: str) -> Self:
        return self.filter(tenant=tenant, thread_id=thread_id)

    def newest_first(self) -> Self:
        return self.order_by("-id")

    def threads_idle_since(self, before: datetime) -> list[str]:
        """Threads whose newest row was created before ``before`` (rows with ``created_at``)."""
        return self._threads_where(models.Max("created_at"), per_thread__lt=before)

    def threads_with_more_than(self, count: int) -> list[str]:
        return self._threads_where(models.Count("id"), per_thread__gt=count)

    def _threads_where(self, aggregate: models.Aggregate, **condition: Any) -> list[str]:
        """The threads, sorted, whose ``aggregate`` over their rows meets ``condition``."""
        rows = self.values("thread_id").annotate(per_thread=aggregate).filter(**condition)
        return list(rows.order_by("thread_id").values_list("thread_id", flat=True))


class SubjectRowsQuerySet(ThreadRowsQuerySet):
    """Rows of a table whose rows carry the subject of their thread."""

    def threads_of_subject(self, tenant: str, subject: str) -> list[str]:
        """The threads of ``tenant`` with a row tagged ``subject`` (the ``subject`` index)."""
        rows = self.filter(tenant=tenant, subject=subject).order_by("thread_id")
        return list(rows.values_list("thread_id", flat=True).distinct())


class ThreadRow(models.Model):
    """The columns every row of this layer starts with: its tenant and its thread."""

    tenant = models.CharField(max_length=TENANT_MAX_LENGTH)
    thread_id = models.CharField(max_length=THREAD_ID_MAX_LENGTH)

    class Meta:
        abstract = True


def thread_unique(field: str, name: str) -> models.UniqueConstraint:
    """A :class:`ThreadRow` table's constraint: ``field`` unique within a thread."""
    return models.UniqueConstraint(fields=["tenant", "thread_id", field], name=name)


class SubjectThreadRow(ThreadRow):
    """A checkpoint row and the subject its state names (:mod:`tulip_memory.core.subjects`)."""

    subject = models.CharField(
        max_length=SUBJECT_MAX_LENGTH,
        blank=True,
        default="",
        help_text=_("Who the thread is about (the state's metadata); '' for nobody"),
    )

    class Meta:
        abstract = True


class CheckpointRow(SubjectThreadRow):
    """A checkpoint of a thread, its id unique within the thread."""

    checkpoint_id = models.CharField(max_length=CHECKPOINT_ID_MAX_LENGTH)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.thread_id}/{self.checkpoint_id}"


def checkpoint_keys(
    prefix: str, **indexed: list[str]
) -> tuple[list[models.BaseConstraint], list[models.Index]]:
    """A :class:`CheckpointRow` table's ``Meta.constraints`` and ``Meta.indexes``, named
    ``<prefix>_...``: the id unique per thread, the save order, the subject, and ``indexed``
    (index name -> the columns after the tenant and the thread)."""
    thread = ["tenant", "thread_id"]
    columns = {"order": [*thread, "id"], **{n: [*thread, *c] for n, c in indexed.items()}}
    indexes = [models.Index(fields=c, name=f"{prefix}_{n}_idx") for n, c in columns.items()]
    subject = models.Index(fields=["tenant", "subject"], name=f"{prefix}_subject_idx")
    return [thread_unique("checkpoint_id", f"{prefix}_id_uniq")], [*indexes, subject]


class CheckpointRecord(CheckpointRow):
    """A full snapshot of an agent state (JSON of ``AgentState.to_checkpoint()``)."""

    state = models.JSONField()

    objects = SubjectRowsQuerySet.as_manager()

    class Meta:
        db_table = "tulip_memory_checkpoint"
        verbose_name = _("checkpoint")
        constraints, indexes = checkpoint_keys("tulip_ckpt")


class DeltaCheckpointRecordQuerySet(SubjectRowsQuerySet):
    def chain_group(
        self, tenant: str, thread_id: str, checkpoint_id: str | None
    ) -> DeltaCheckpointRecordQuerySet:
        """Rows sharing the chain root (``base_id``) of a checkpoint (the newest when None),
        in one query: its whole chain and any sibling branch grown from the same root."""
        rows = self.of_thread(tenant, thread_id)
        anchor = (
            rows.newest_first()
            if checkpoint_id is None
            else rows.filter(checkpoint_id=checkpoint_id)
        )
        return rows.filter(base_id=models.Subquery(anchor.values("base_id")[:1])).newest_first()

    def load_rows(
        self, tenant: str, thread_id: str, checkpoint_id: str | None, fields: tuple[str, ...]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """:meth:`chain_group`'s rows (``fields``, newest first) and the blocks of its root
        (dicts of ``digest``, ``data``, ``size_bytes``), in ONE statement (PostgreSQL)."""
        connection = connections[self.db]
        quote = connection.ops.quote_name
        records = quote(self.model._meta.db_table)
        blocks = quote(DeltaBlock._meta.db_table)
        # A block's columns, in the place of the record's fields they are selected as.
        in_blocks = {"checkpoint_id": "digest", "data": "data", "size_bytes": "size_bytes"}
        record_columns = ", ".join(f"g.{quote(name)}" for name in fields)
        block_columns = ", ".join(f"b.{in_blocks[n]}" if n in in_blocks else "NULL" for n in fields)
        anchor = "" if checkpoint_id is None else "AND checkpoint_id = %s "
        sql = (
            f"WITH g AS (SELECT * FROM {records} WHERE tenant = %s AND thread_id = %s "
            f"AND base_id = (SELECT base_id FROM {records} WHERE tenant = %s "
            f"AND thread_id = %s {anchor}ORDER BY id DESC LIMIT 1)) "
            f"SELECT 0 AS part, g.id AS position, {record_columns} FROM g "
            f"UNION ALL SELECT 1, 0, {block_columns} FROM {blocks} AS b "
            "WHERE b.tenant = %s AND b.thread_id = %s AND b.digest IN ("
            "SELECT jsonb_array_elements(g.blocks) ->> 0 FROM g WHERE g.checkpoint_id = g.base_id) "
            "ORDER BY part, position DESC"
        )
        params = [tenant, thread_id, tenant, thread_id]
        if checkpoint_id is not None:
            params.append(checkpoint_id)
        params += [tenant, thread_id]
        model_fields = [self.model._meta.get_field(name) for name in fields]
        found: list[dict[str, Any]] = []
        stored: list[dict[str, Any]] = []
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            for part, _position, *values in cursor.fetchall():
                row = dict(zip(fields, values, strict=True))
                if part == 1:
                    stored.append({block: row[name] for name, block in in_blocks.items()})
                    continue
                for field in model_fields:
                    if hasattr(field, "from_db_value"):
                        row[field.name] = field.from_db_value(row[field.name], None, connection)
                found.append(row)
        return found, stored

    def append_if_newest(
        self,
        tenant: str,
        thread_id: str,
        checkpoint_id: str,
        fields: dict[str, Any],
        *,
        after: tuple[str, datetime, str],
    ) -> bool:
        """Insert a new record only if the thread's newest row is still ``after``
        (``(checkpoint_id, created_at, base_id)``), in ONE statement (on Citus after one
        drawing its id); False when nothing was inserted (another newest row, or the id
        exists)."""
        connection = connections[self.db]
        meta = self.model._meta
        quote = connection.ops.quote_name
        values: dict[str, Any] = {}
        if is_citus(connection):
            # An INSERT ... SELECT takes its id from the shard's node, not from the
            # coordinator's sequence whose order makes a row the newest.
            with connection.cursor() as cursor:
                cursor.execute(NEXT_ID, [meta.db_table])
                values["id"] = cursor.fetchone()[0]
        values |= {"tenant": tenant, "thread_id": thread_id, "checkpoint_id": checkpoint_id}
        values.update(fields)
        table = quote(meta.db_table)
        columns = {field.name: field for field in meta.concrete_fields}
        params = [
            columns[name].get_db_prep_save(value, connection) for name, value in values.items()
        ]
        sql = (
            f"INSERT INTO {table} ({', '.join(quote(name) for name in values)}) "
            f"SELECT {', '.join(['%s'] * len(values))} WHERE EXISTS ("
            f"SELECT 1 FROM (SELECT checkpoint_id, created_at, base_id FROM {table} "
            "WHERE tenant = %s AND thread_id = %s ORDER BY id DESC LIMIT 1) AS newest "
            "WHERE newest.checkpoint_id = %s AND newest.created_at = %s "
            "AND newest.base_id = %s) "
            "ON CONFLICT (tenant, thread_id, checkpoint_id) DO NOTHING"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, [*params, tenant, thread_id, *after])
            return cursor.rowcount == 1


class DeltaCheckpointRecord(CheckpointRow):
    """A checkpoint of a DeltaCheckpointer: a full checkpoint (block references and the
    state's other fields) or a delta against ``parent_id``; ``base_id`` is the full
    checkpoint its chain starts from (itself for a full one)."""

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

    objects = DeltaCheckpointRecordQuerySet.as_manager()

    class Meta:
        db_table = "tulip_memory_delta_checkpoint"
        verbose_name = _("delta checkpoint")
        constraints, indexes = checkpoint_keys("tulip_dckpt", base=["base_id"])


class DeltaBlock(ThreadRow):
    """A run of messages stored once and named by its content's digest."""

    digest = models.CharField(max_length=64)
    data = models.BinaryField()
    size_bytes = models.PositiveBigIntegerField(help_text=_("Encoded size before compression"))
    created_at = models.DateTimeField(default=timezone.now)

    objects = ThreadRowsQuerySet.as_manager()

    class Meta:
        db_table = "tulip_memory_delta_block"
        verbose_name = _("delta block")
        constraints = [thread_unique("digest", "tulip_dblock_digest_uniq")]

    def __str__(self) -> str:
        return f"{self.thread_id}/{self.digest[:12]}"
