"""Models of the LangGraph checkpoint saver (:class:`tulip_memory.langgraph.DjangoSaver`).

* :class:`LangGraphCheckpoint` — one LangGraph checkpoint (without its channel values)
  with its metadata, both encoded by the saver's serializer, its ``channel_versions``
  as JSON (the load statement joins them with the blobs) and its ``run_id``.
* :class:`LangGraphBlob` — one version of one channel's value. A list that grew from an
  earlier version of the channel is stored as a splice against that version
  (``parent_version``); ``base_version`` names the full value its chain starts from, so
  that a load reads a whole chain by one index lookup.
* :class:`LangGraphWrite` — the pending writes of a checkpoint's tasks.

Every row carries its ``tenant``; on PostgreSQL the tables are under the tenant
row-level security policy (migration ``0007_langgraph``). The tenant leads every index.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Self

from django.db import connections, models
from django.db.models import Count, Exists, F, OuterRef, Subquery, Sum, Value, Window
from django.db.models.functions import Coalesce, Length, RowNumber
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from tulip_memory.identifiers import CHECKPOINT_ID_MAX_LENGTH, THREAD_ID_MAX_LENGTH
from tulip_memory.models.checkpoints import (
    SubjectRowsQuerySet,
    SubjectThreadRow,
    ThreadRow,
    ThreadRowsQuerySet,
)

__all__ = [
    "LangGraphBlob",
    "LangGraphCheckpoint",
    "LangGraphCheckpointQuerySet",
    "LangGraphWrite",
]

# LangGraph's channel names, value versions, task ids and serializer type names.
NAME_MAX_LENGTH = 255
TYPE_MAX_LENGTH = 64


# The columns of the load statement's rows: what each part puts in them.
LOAD_COLUMNS = (
    "part",
    "id",
    "thread_id",
    "checkpoint_ns",
    "a",
    "b",
    "c",
    "type",
    "data",
    "d",
    "data2",
    "n",
)


class LangGraphCheckpointQuerySet(SubjectRowsQuerySet):
    def newest_of_threads(self) -> Self:
        """The newest checkpoint of each thread, annotated with the thread's totals.

        ``checkpoint_total`` counts the thread's checkpoints (every namespace);
        ``stored_bytes`` adds up its checkpoints, metadata, channel values and pending
        writes — what :meth:`~tulip_memory.langgraph.DjangoSaver.storage_bytes` counts.
        """

        def of_thread(model: type[models.Model]) -> Any:
            return model._default_manager.filter(
                tenant=OuterRef("tenant"), thread_id=OuterRef("thread_id")
            ).order_by()

        def total(model: type[models.Model], expression: Any) -> Coalesce:
            rows = of_thread(model).values("thread_id").annotate(n=expression).values("n")
            return Coalesce(Subquery(rows[:1]), Value(0))

        newer = of_thread(LangGraphCheckpoint).filter(checkpoint_id__gt=OuterRef("checkpoint_id"))
        return (
            self.filter(~Exists(newer))
            .annotate(
                checkpoint_total=total(LangGraphCheckpoint, Count("id")),
                stored_bytes=total(
                    LangGraphCheckpoint, Sum(Length("checkpoint") + Length("metadata"))
                )
                + total(LangGraphBlob, Sum(Length("data")))
                + total(LangGraphWrite, Sum(Length("data"))),
            )
            .order_by()
        )

    def load_rows(self, tenant: str, selection: str, params: list[Any]) -> list[dict[str, Any]]:
        """Checkpoints, the blob chains of their channel versions and their pending writes.

        ONE statement (PostgreSQL). ``selection`` is the WHERE/ORDER/LIMIT tail choosing
        the checkpoints (with its ``params``). Rows are dicts of :data:`LOAD_COLUMNS`:

        * part 0, a checkpoint: ``a`` its id, ``b`` its parent's, ``c`` its channel
          versions (JSON text), ``type``/``data`` the checkpoint, ``d``/``data2`` the
          metadata;
        * part 1, a blob: ``a`` its channel, ``b`` its version, ``c`` its parent version,
          ``type``/``data`` its value — every blob sharing the chain root of a version a
          checkpoint refers to, no deeper in the chain than that version (a chain's depth
          grows by one per splice: what lies deeper is on no path to it);
        * part 2, a write: ``a`` its checkpoint id, ``b`` its task id, ``c`` its task path,
          ``d`` its channel, ``n`` its index, ``type``/``data`` its value.
        """
        connection = connections[self.db]
        quote = connection.ops.quote_name
        checkpoints = quote(LangGraphCheckpoint._meta.db_table)
        blobs = quote(LangGraphBlob._meta.db_table)
        writes = quote(LangGraphWrite._meta.db_table)
        # Every lookup is a LATERAL subquery on an index, kept from being flattened into
        # a join by ``OFFSET 0`` (PostgresSaver's correlated subqueries do the same): a
        # join is planned from row estimates, which are worst right after a thread grew.
        sql = (
            f"WITH c AS (SELECT * FROM {checkpoints} WHERE tenant = %s {selection}), "
            "r AS (SELECT c.thread_id, c.checkpoint_ns, e.key AS channel, t.base_version, "
            "max(t.depth) AS depth "
            "FROM c CROSS JOIN LATERAL jsonb_each_text(c.channel_versions) e "
            f"CROSS JOIN LATERAL (SELECT base_version, depth FROM {blobs} WHERE tenant = %s "
            "AND thread_id = c.thread_id AND checkpoint_ns = c.checkpoint_ns "
            "AND channel = e.key AND version = e.value OFFSET 0) t "
            "GROUP BY c.thread_id, c.checkpoint_ns, e.key, t.base_version) "
            "SELECT 0, c.id, c.thread_id, c.checkpoint_ns, c.checkpoint_id, "
            "c.parent_checkpoint_id, c.channel_versions::text, c.checkpoint_type, c.checkpoint, "
            "c.metadata_type, c.metadata, NULL::integer FROM c "
            "UNION ALL SELECT 1, b.id, r.thread_id, r.checkpoint_ns, r.channel, b.version, "
            "b.parent_version, b.type, b.data, NULL, NULL, NULL FROM r CROSS JOIN LATERAL ("
            f"SELECT id, version, parent_version, type, data FROM {blobs} WHERE tenant = %s "
            "AND thread_id = r.thread_id AND checkpoint_ns = r.checkpoint_ns "
            "AND channel = r.channel AND base_version = r.base_version "
            "AND depth <= r.depth OFFSET 0) b "
            "UNION ALL SELECT 2, w.id, c.thread_id, c.checkpoint_ns, c.checkpoint_id, w.task_id, "
            "w.task_path, w.type, w.data, w.channel, NULL, w.idx FROM c CROSS JOIN LATERAL ("
            f"SELECT id, task_id, task_path, type, data, channel, idx FROM {writes} "
            "WHERE tenant = %s AND thread_id = c.thread_id AND checkpoint_ns = c.checkpoint_ns "
            "AND checkpoint_id = c.checkpoint_id OFFSET 0) w"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, [tenant, *params, tenant, tenant, tenant])
            return [dict(zip(LOAD_COLUMNS, row, strict=True)) for row in cursor.fetchall()]

    def delete_threads(self, tenant: str, thread_ids: Iterable[str]) -> int:
        """Delete the threads' checkpoints, pending writes and blobs; how many checkpoints."""
        threads = list(thread_ids)
        deleted = self.filter(tenant=tenant, thread_id__in=threads).delete()[0]
        for model in (LangGraphWrite, LangGraphBlob):
            model.objects.using(self.db).filter(tenant=tenant, thread_id__in=threads).delete()
        return deleted

    def keep_newest(self, tenant: str, thread_ids: Sequence[str], keep_last: int) -> int:
        """Keep the newest ``keep_last`` checkpoints of each namespace of the threads, their
        pending writes and the blobs they need; how many checkpoints were deleted.

        The oldest checkpoint kept in a namespace loses its parent link (it is gone).
        """
        threads = list(thread_ids)
        checkpoints = self.filter(tenant=tenant, thread_id__in=threads)
        ranked = list(
            checkpoints.annotate(
                rank=Window(
                    RowNumber(),
                    partition_by=[F("thread_id"), F("checkpoint_ns")],
                    order_by=F("checkpoint_id").desc(),
                )
            ).values_list("id", "checkpoint_id", "rank")
        )
        doomed = [(row_id, cid) for row_id, cid, rank in ranked if rank > keep_last]
        if not doomed:
            return 0
        checkpoints.filter(id__in=[row_id for row_id, _ in doomed]).delete()
        checkpoints.filter(id__in=[i for i, _, rank in ranked if rank == keep_last]).update(
            parent_checkpoint_id=""
        )
        stored = LangGraphCheckpoint.objects.using(self.db).filter(
            tenant=OuterRef("tenant"),
            thread_id=OuterRef("thread_id"),
            checkpoint_ns=OuterRef("checkpoint_ns"),
            checkpoint_id=OuterRef("checkpoint_id"),
        )
        LangGraphWrite.objects.using(self.db).filter(
            tenant=tenant, thread_id__in=threads, checkpoint_id__in={cid for _, cid in doomed}
        ).exclude(Exists(stored)).delete()
        self.collect_blobs(tenant, set(threads))
        return len(doomed)

    def collect_blobs(self, tenant: str, thread_ids: set[str]) -> None:
        """Delete the blobs no checkpoint of the threads refers to, directly or as the
        version a referred-to splice applies to (its chain)."""
        referenced: set[tuple[str, str, str, str]] = set()
        for thread_id, checkpoint_ns, versions in self.filter(
            tenant=tenant, thread_id__in=thread_ids
        ).values_list("thread_id", "checkpoint_ns", "channel_versions"):
            referenced.update((thread_id, checkpoint_ns, c, str(v)) for c, v in versions.items())
        blobs = LangGraphBlob.objects.using(self.db).filter(tenant=tenant, thread_id__in=thread_ids)
        parents = {}
        for row_id, thread_id, ns, channel, version, parent in blobs.values_list(
            "id", "thread_id", "checkpoint_ns", "channel", "version", "parent_version"
        ):
            parents[(thread_id, ns, channel, version)] = (row_id, parent)
        kept: set[tuple[str, str, str, str]] = set()
        for start in referenced:
            key = start
            while key in parents and key not in kept:
                kept.add(key)
                parent = parents[key][1]
                if not parent:
                    break
                key = (*key[:3], parent)
        doomed = [row_id for key, (row_id, _) in parents.items() if key not in kept]
        if doomed:
            blobs.filter(id__in=doomed).delete()

    def save_checkpoint(
        self,
        tenant: str,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint: dict[str, Any] | None,
        blobs: list[tuple[str, str, str, str, int, str, bytes | None]],
    ) -> set[tuple[str, str]]:
        """Insert the blobs (unless stored) and upsert the checkpoint: ONE statement.

        ``checkpoint`` maps the checkpoint columns after the first three to their values
        (None: only blobs); ``blobs`` are ``(channel, version, parent_version,
        base_version, depth, type, data)``. A splice is inserted only if the version it
        applies to is there, which it locks (``FOR KEY SHARE``) until the transaction
        ends; returns the ``(channel, version)`` of the splices refused that way.
        """
        connection = connections[self.db]
        quote = connection.ops.quote_name
        table = quote(LangGraphCheckpoint._meta.db_table)
        blob_table = quote(LangGraphBlob._meta.db_table)
        upsert, values = "", []
        if checkpoint:
            names = ["tenant", "thread_id", "checkpoint_ns", *checkpoint, "created_at"]
            fields = {f.name: f for f in LangGraphCheckpoint._meta.concrete_fields}
            values = [
                fields[name].get_db_prep_save(value, connection)
                for name, value in zip(
                    names,
                    [tenant, thread_id, checkpoint_ns, *checkpoint.values(), timezone.now()],
                    strict=True,
                )
            ]
            updates = ", ".join(f"{quote(n)} = EXCLUDED.{quote(n)}" for n in checkpoint)
            upsert = (
                f"INSERT INTO {table} ({', '.join(quote(n) for n in names)}) "
                f"VALUES ({', '.join(['%s'] * len(names))}) ON CONFLICT "
                f"(tenant, thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET {updates}"
            )
        if not blobs:
            if upsert:
                with connection.cursor() as cursor:
                    cursor.execute(upsert, values)
            return set()
        rows = ", ".join(["(%s, %s, %s, %s, %s::integer, %s, %s::bytea)"] * len(blobs))
        sql = (
            f"WITH v (channel, version, parent_version, base_version, depth, type, data) "
            f"AS (VALUES {rows}), "
            "ok AS (SELECT * FROM v WHERE v.parent_version = '' OR EXISTS (SELECT 1 FROM "
            f"{blob_table} p WHERE p.tenant = %s AND p.thread_id = %s AND p.checkpoint_ns = %s "
            "AND p.channel = v.channel AND p.version = v.parent_version FOR KEY SHARE)), "
            f"b AS (INSERT INTO {blob_table} (tenant, thread_id, checkpoint_ns, channel, "
            "version, parent_version, base_version, depth, type, data) "
            "SELECT %s, %s, %s, ok.* FROM ok "
            "ON CONFLICT (tenant, thread_id, checkpoint_ns, channel, version) DO NOTHING)"
            f"{', ' if upsert else ' '}"
            f"{f'c AS ({upsert}) ' if upsert else ''}"
            "SELECT channel, version FROM v EXCEPT SELECT channel, version FROM ok"
        )
        scope = [tenant, thread_id, checkpoint_ns]
        with connection.cursor() as cursor:
            cursor.execute(sql, [*(x for blob in blobs for x in blob), *scope, *scope, *values])
            return {(channel, version) for channel, version in cursor.fetchall()}


class LangGraphCheckpoint(SubjectThreadRow):
    """A LangGraph checkpoint; its channel values are :class:`LangGraphBlob` rows."""

    checkpoint_ns = models.CharField(max_length=THREAD_ID_MAX_LENGTH, blank=True, default="")
    checkpoint_id = models.CharField(max_length=CHECKPOINT_ID_MAX_LENGTH)
    parent_checkpoint_id = models.CharField(
        max_length=CHECKPOINT_ID_MAX_LENGTH, blank=True, default=""
    )
    run_id = models.CharField(max_length=NAME_MAX_LENGTH, blank=True, default="")
    checkpoint_type = models.CharField(max_length=TYPE_MAX_LENGTH)
    checkpoint = models.BinaryField(help_text=_("The checkpoint without its channel values"))
    channel_versions = models.JSONField(default=dict)
    metadata_type = models.CharField(max_length=TYPE_MAX_LENGTH)
    metadata = models.BinaryField()
    created_at = models.DateTimeField(default=timezone.now)

    objects = LangGraphCheckpointQuerySet.as_manager()

    class Meta:
        db_table = "tulip_memory_langgraph_checkpoint"
        verbose_name = _("LangGraph checkpoint")
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "thread_id", "checkpoint_ns", "checkpoint_id"],
                name="tulip_lgckpt_id_uniq",
            )
        ]
        indexes = [
            models.Index(fields=["tenant", "run_id"], name="tulip_lgckpt_run_idx"),
            models.Index(fields=["tenant", "subject"], name="tulip_lgckpt_subject_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.thread_id}/{self.checkpoint_ns}/{self.checkpoint_id}"


class LangGraphBlobQuerySet(ThreadRowsQuerySet):
    """Channel value versions of a tenant's thread."""


class LangGraphBlob(ThreadRow):
    """One version of a channel's value: whole, or a splice of ``parent_version``'s list."""

    checkpoint_ns = models.CharField(max_length=THREAD_ID_MAX_LENGTH, blank=True, default="")
    channel = models.CharField(max_length=NAME_MAX_LENGTH)
    version = models.CharField(max_length=NAME_MAX_LENGTH)
    parent_version = models.CharField(
        max_length=NAME_MAX_LENGTH,
        blank=True,
        default="",
        help_text=_("The version this splice applies to; empty for a whole value"),
    )
    base_version = models.CharField(
        max_length=NAME_MAX_LENGTH, help_text=_("The whole value its chain starts from")
    )
    depth = models.PositiveIntegerField(default=0)
    type = models.CharField(max_length=TYPE_MAX_LENGTH)
    data = models.BinaryField(null=True)

    objects = LangGraphBlobQuerySet.as_manager()

    class Meta:
        db_table = "tulip_memory_langgraph_blob"
        verbose_name = _("LangGraph channel value")
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "thread_id", "checkpoint_ns", "channel", "version"],
                name="tulip_lgblob_version_uniq",
            )
        ]
        indexes = [
            models.Index(
                fields=["tenant", "thread_id", "checkpoint_ns", "channel", "base_version"],
                name="tulip_lgblob_chain_idx",
            )
        ]

    def __str__(self) -> str:
        return f"{self.thread_id}/{self.checkpoint_ns}/{self.channel}@{self.version}"


class LangGraphWriteQuerySet(ThreadRowsQuerySet):
    """Pending writes of a tenant's thread."""

    def save_writes(
        self,
        tenant: str,
        *,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        task_id: str,
        task_path: str,
        writes: Sequence[tuple[int, str, str, bytes]],
        replace: bool,
    ) -> None:
        """Insert a task's ``writes`` (``(idx, channel, type, data)``): ONE statement.

        A write whose ``idx`` the task already stored is kept as it is, or replaced when
        ``replace`` (LangGraph's special writes: errors, interrupts...).
        """
        connection = connections[self.db]
        quote = connection.ops.quote_name
        columns = ("tenant", "thread_id", "checkpoint_ns", "checkpoint_id", "task_id")
        names = [*columns, "task_path", "idx", "channel", "type", "data"]
        row = "(%s, %s, %s, %s, %s, %s, %s::integer, %s, %s, %s::bytea)"
        on_conflict = "DO NOTHING"
        if replace:
            updates = ("channel", "type", "data", "task_path")
            on_conflict = "DO UPDATE SET " + ", ".join(
                f"{quote(n)} = EXCLUDED.{quote(n)}" for n in updates
            )
        sql = (
            f"INSERT INTO {quote(LangGraphWrite._meta.db_table)} "
            f"({', '.join(quote(n) for n in names)}) VALUES {', '.join([row] * len(writes))} "
            f"ON CONFLICT ({', '.join(quote(n) for n in (*columns, 'idx'))}) {on_conflict}"
        )
        scope = (tenant, thread_id, checkpoint_ns, checkpoint_id, task_id, task_path)
        with connection.cursor() as cursor:
            cursor.execute(sql, [value for write in writes for value in (*scope, *write)])


class LangGraphWrite(ThreadRow):
    """A pending write of a task, stored against the checkpoint it follows."""

    checkpoint_ns = models.CharField(max_length=THREAD_ID_MAX_LENGTH, blank=True, default="")
    checkpoint_id = models.CharField(max_length=CHECKPOINT_ID_MAX_LENGTH)
    task_id = models.CharField(max_length=NAME_MAX_LENGTH)
    task_path = models.CharField(max_length=NAME_MAX_LENGTH, blank=True, default="")
    idx = models.IntegerField()
    channel = models.CharField(max_length=NAME_MAX_LENGTH)
    type = models.CharField(max_length=TYPE_MAX_LENGTH)
    data = models.BinaryField(null=True)

    objects = LangGraphWriteQuerySet.as_manager()

    class Meta:
        db_table = "tulip_memory_langgraph_write"
        verbose_name = _("LangGraph pending write")
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx"],
                name="tulip_lgwrite_uniq",
            )
        ]

    def __str__(self) -> str:
        return f"{self.thread_id}/{self.checkpoint_id}/{self.task_id}[{self.idx}]"
