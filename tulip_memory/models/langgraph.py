"""The LangGraph saver's rows (:class:`tulip_memory.langgraph.DjangoSaver`), one per
checkpoint, ``data`` a :mod:`tulip_memory.chains.rows` record (NULL while only pending writes
arrived). Under row-level security; every statement names one tenant (one shard on Citus).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from typing import Any, Self

from django.db import connections, models
from django.db.models import Count, Exists, F, OuterRef, Q, Subquery, Sum, Value, Window
from django.db.models.functions import Coalesce, Length, RowNumber
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from tulip_memory.chains.options import MAX_DEPTH
from tulip_memory.chains.rows import (
    Record,
    RowVersion,
    pack_record,
    self_contained,
    unpack_walk,
)
from tulip_memory.chains.walk import walk_up, where
from tulip_memory.core.identifiers import CHECKPOINT_ID_MAX_LENGTH, THREAD_ID_MAX_LENGTH
from tulip_memory.exceptions import CheckpointCorruptError
from tulip_memory.models.checkpoints import SubjectRowsQuerySet, SubjectThreadRow

__all__ = ["LangGraphCheckpoint", "LangGraphCheckpointQuerySet", "walk_records", "walks"]

# LangGraph's run ids.
NAME_MAX_LENGTH = 255

TABLE = "tulip_memory_langgraph_checkpoint"
# The fields a walk follows parents by, and those it reads of each row.
WALKED = ("id", "thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id", "depth")
ROW_FIELDS = (*WALKED, "data", "writes")
# The load statement's columns: the fields, ``version`` (as ``stamp``) and ``selected``.
LOAD_COLUMNS = (*ROW_FIELDS, "stamp", "selected")

_Key = tuple[str, str, str]
# A checkpoint row inserted; a delta (depth > 0) only while its parent row is at the
# version it was compressed against, held FOR KEY SHARE until commit. A row of that id is
# written over only when it holds no checkpoint yet (only pending writes, so no row is
# stored against it) or the last parameter says so. Citus: no subquery in ON CONFLICT's
# WHERE, no system column.
SAVE_CHECKPOINT = (
    "INSERT INTO tulip_memory_langgraph_checkpoint AS t (tenant, thread_id, checkpoint_ns, "
    "checkpoint_id, parent_checkpoint_id, run_id, subject, depth, data, writes, created_at) "
    "SELECT %s, %s, %s, %s, %s, %s, %s, %s, %s, ''::bytea, %s WHERE %s = 0 OR EXISTS ("
    "SELECT 1 FROM tulip_memory_langgraph_checkpoint WHERE tenant = %s AND id = %s "
    "AND version = %s FOR KEY SHARE) "
    "ON CONFLICT (tenant, thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET "
    "parent_checkpoint_id = EXCLUDED.parent_checkpoint_id, run_id = EXCLUDED.run_id, "
    "subject = EXCLUDED.subject, depth = EXCLUDED.depth, data = EXCLUDED.data, "
    "created_at = EXCLUDED.created_at, version = t.version + 1 "
    "WHERE t.data IS NULL OR %s RETURNING t.id, t.version"
)
# Pending writes appended to a checkpoint's row (inserted without data when they come
# first; the subject of such a row from the first writes that name one).
SAVE_WRITES = (
    "INSERT INTO tulip_memory_langgraph_checkpoint AS t (tenant, thread_id, checkpoint_ns, "
    "checkpoint_id, parent_checkpoint_id, run_id, subject, depth, writes, created_at) "
    "VALUES (%s, %s, %s, %s, '', '', %s, 0, %s, now()) "
    "ON CONFLICT (tenant, thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET "
    "writes = t.writes || EXCLUDED.writes, subject = CASE WHEN t.data IS NULL "
    "AND t.subject = '' THEN EXCLUDED.subject ELSE t.subject END, version = t.version + 1 "
    "RETURNING t.id, t.version"
)


def walks(rows: Iterable[dict[str, Any]]) -> dict[int, list[dict[str, Any]] | None]:
    """The walk of each selected row of ``load_rows`` (the row, its parents up to depth 0),
    by row id; None for a walk that meets a missing parent or goes round."""
    by_key: dict[_Key, dict[str, Any]] = {}
    selected: dict[int, dict[str, Any]] = {}
    for row in rows:
        by_key.setdefault((row["thread_id"], row["checkpoint_ns"], row["checkpoint_id"]), row)
        if row["selected"]:
            selected[row["id"]] = row

    def parent_key(row: dict[str, Any]) -> _Key | None:
        if row["depth"] == 0:
            return None
        return (row["thread_id"], row["checkpoint_ns"], row["parent_checkpoint_id"])

    found: dict[int, list[dict[str, Any]] | None] = {}
    for row_id, row in selected.items():
        walk, gap = walk_up(row, parent_key, by_key)
        found[row_id] = None if gap is not None else walk
    return found


def _execute(cursor: Any, sql: str, params: Sequence[Any], pin: str | None) -> None:
    """Run ``sql``; with ``pin`` (a tenant), in one round trip after pinning its implicit
    transaction to the tenant."""
    if pin is None:
        cursor.execute(sql, params)
        return
    from tulip_memory.conf import settings

    cursor.execute(
        f"SELECT set_config(%s, %s, true); {sql}", [settings.TENANT_SETTING, pin, *params]
    )
    cursor.nextset()


def _row_bytes() -> Any:
    return Coalesce(Length("data"), 0) + Length("writes")


def walk_records(walk: list[dict[str, Any]], memo: dict[int, Record]) -> list[Record]:
    """The records of a walk of :func:`walks`, unpacked with ``memo`` (by row id)."""
    rows = [(r["id"], bytes(r["data"]), bytes(r["writes"] or b"")) for r in walk]
    return unpack_walk(rows, where(walk[0]["thread_id"], walk[0]["checkpoint_id"]), memo)


class LangGraphCheckpointQuerySet(SubjectRowsQuerySet):
    def newest_of_threads(self) -> Self:
        """The newest checkpoint of each thread, with its ``checkpoint_total`` and
        ``stored_bytes``."""
        of_thread = LangGraphCheckpoint.objects.filter(
            tenant=OuterRef("tenant"), thread_id=OuterRef("thread_id")
        ).order_by()

        def total(expression: Any) -> Coalesce:
            rows = of_thread.values("thread_id").annotate(n=expression).values("n")
            return Coalesce(Subquery(rows[:1]), Value(0))

        newer = of_thread.filter(checkpoint_id__gt=OuterRef("checkpoint_id"))
        return (
            self.filter(~Exists(newer))
            .annotate(
                checkpoint_total=total(Count("id")),
                stored_bytes=total(Sum(_row_bytes())),
            )
            .order_by()
        )

    def records(self) -> dict[int, Record | None]:
        """The records of the rows (of whole threads), by row id; None for one that cannot
        be read."""
        rows = [{**row, "selected": True} for row in self.values(*ROW_FIELDS)]
        memo: dict[int, Record] = {}
        found: dict[int, Record | None] = {}
        for row_id, walk in walks(rows).items():
            found[row_id] = None
            if walk is not None:
                with contextlib.suppress(CheckpointCorruptError):
                    found[row_id] = walk_records(walk, memo)[0]
        return found

    def stored_bytes(self) -> int:
        return self.aggregate(n=Coalesce(Sum(_row_bytes()), 0))["n"]

    def load_rows(
        self,
        tenant: str,
        selection: str,
        params: list[Any],
        *,
        one: bool = False,
        pin: str | None = None,
    ) -> list[dict[str, Any]]:
        """Checkpoints chosen by ``selection`` (a WHERE/ORDER/LIMIT tail) and their parents,
        in ONE statement, as dicts of :data:`LOAD_COLUMNS`. ``one``: one checkpoint."""
        walked = ", ".join(WALKED)
        carried = f"{walked}, data, writes, version AS stamp" if one else walked
        # The parent lookup is a LATERAL subquery kept from being flattened into a join
        # by ``OFFSET 0``: one index lookup per step, whatever the row estimates. ``n``
        # stops a walk that goes round (damaged rows) after the deepest chain there can be.
        sql = (
            f"WITH RECURSIVE w AS (SELECT * FROM (SELECT {carried}, true AS selected, 0 AS n "
            f"FROM {TABLE} WHERE tenant = %s AND data IS NOT NULL {selection}) s "
            f"{'UNION ALL' if one else 'UNION'} SELECT p.*, false, w.n + 1 FROM w "
            f"CROSS JOIN LATERAL (SELECT {carried} FROM {TABLE} WHERE tenant = %s "
            "AND thread_id = w.thread_id AND checkpoint_ns = w.checkpoint_ns "
            "AND checkpoint_id = w.parent_checkpoint_id AND data IS NOT NULL OFFSET 0) p "
            f"WHERE w.depth > 0 AND w.n <= {MAX_DEPTH}) "
        )
        params = [tenant, *params, tenant]
        if one:
            sql += f"SELECT {', '.join(LOAD_COLUMNS)} FROM w"
        else:
            # ``t.tenant``: Citus runs a recursive CTE on one shard only.
            columns = ", ".join(f"t.{name}" for name in (*ROW_FIELDS, "version"))
            sql += f"SELECT {columns}, w.selected FROM w JOIN {TABLE} t "
            sql += "ON t.tenant = %s AND t.id = w.id"
            params.append(tenant)
        with connections[self.db].cursor() as cursor:
            _execute(cursor, sql, params, pin)
            return [dict(zip(LOAD_COLUMNS, row, strict=True)) for row in cursor.fetchall()]

    def load_checkpoint(
        self,
        tenant: str,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str | None,
        *,
        pin: str | None = None,
    ) -> tuple[list[dict[str, Any]], dict[int, list[dict[str, Any]] | None]]:
        """The rows of one checkpoint (the namespace's newest without ``checkpoint_id``) and
        their :func:`walks`: one backward range scan, as a row of depth *d* was written right
        after its *d* parents; a parent out of range is walked to by a second statement."""
        chosen = "" if checkpoint_id is None else "AND checkpoint_id = %s "
        params: list[Any] = [tenant, thread_id, checkpoint_ns]
        params += [] if checkpoint_id is None else [checkpoint_id]
        sql = (
            f"WITH c AS (SELECT checkpoint_id, depth FROM {TABLE} WHERE tenant = %s "
            f"AND thread_id = %s AND checkpoint_ns = %s AND data IS NOT NULL {chosen}"
            "ORDER BY checkpoint_id DESC LIMIT 1) "
            f"SELECT {', '.join(ROW_FIELDS)}, version, "
            "checkpoint_id = (SELECT checkpoint_id FROM c) "
            f"FROM {TABLE} WHERE tenant = %s AND thread_id = %s AND checkpoint_ns = %s "
            "AND checkpoint_id <= (SELECT checkpoint_id FROM c) AND data IS NOT NULL "
            "ORDER BY checkpoint_id DESC LIMIT (SELECT depth + 1 FROM c)"
        )
        with connections[self.db].cursor() as cursor:
            _execute(cursor, sql, [*params, tenant, thread_id, checkpoint_ns], pin)
            rows = [dict(zip(LOAD_COLUMNS, row, strict=True)) for row in cursor.fetchall()]
        found = walks(rows)
        if all(walk is not None for walk in found.values()):
            return rows, found
        selection = "AND thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s"
        chosen_id = next(row["checkpoint_id"] for row in rows if row["selected"])
        rows = self.load_rows(
            tenant, selection, [thread_id, checkpoint_ns, chosen_id], one=True, pin=pin
        )
        return rows, walks(rows)

    def delete_threads(self, tenant: str, thread_ids: Iterable[str]) -> int:
        """Delete the threads' rows; how many checkpoints."""
        rows = LangGraphCheckpoint.rows.using(self.db).filter(
            tenant=tenant, thread_id__in=list(thread_ids)
        )
        checkpoints = rows.filter(data__isnull=False).count()
        rows.delete()
        return checkpoints

    def remove(self, tenant: str, row_ids: Sequence[int]) -> int:
        """Delete the checkpoint rows ``row_ids`` (how many); a row stored against one first
        gets every value it needs. Locked ``FOR UPDATE`` first, so a save holding one ``FOR
        KEY SHARE`` commits before its dependents are read."""
        doomed = list(
            self.filter(tenant=tenant, id__in=list(row_ids))
            .order_by("id")
            .select_for_update()
            .values_list("id", "thread_id", "checkpoint_ns", "checkpoint_id")
        )
        if not doomed:
            return 0
        ids = {row_id for row_id, *_ in doomed}
        keys = {tuple(key) for _, *key in doomed}
        dependents = [
            row_id
            for row_id, *key in self.filter(
                tenant=tenant,
                thread_id__in={key[0] for key in keys},
                parent_checkpoint_id__in={key[2] for key in keys},
                depth__gt=0,
            ).values_list("id", "thread_id", "checkpoint_ns", "parent_checkpoint_id")
            if row_id not in ids and tuple(key) in keys
        ]
        self.make_self_contained(tenant, dependents)
        return self.filter(tenant=tenant, id__in=ids).delete()[0]

    def make_self_contained(self, tenant: str, row_ids: Sequence[int]) -> None:
        """Store in each of the rows every value it refers to (a broken walk is left)."""
        if not row_ids:
            return
        rows = self.load_rows(tenant, "AND id = ANY(%s)", [list(row_ids)])
        memo: dict[int, Record] = {}
        records = {
            row_id: self_contained(walk_records(walk, memo))
            for row_id, walk in walks(rows).items()
            if walk is not None
        }
        for row_id, record in records.items():
            self.filter(tenant=tenant, id=row_id).update(
                data=pack_record(record), depth=0, version=F("version") + 1
            )

    def keep_newest(self, tenant: str, thread_ids: Sequence[str], keep_last: int) -> int:
        """Keep the newest ``keep_last`` checkpoints of each namespace of the threads; how many
        were deleted (:meth:`remove`)."""
        checkpoints = self.filter(tenant=tenant, thread_id__in=list(thread_ids))
        ranked = list(
            checkpoints.annotate(
                rank=Window(
                    RowNumber(),
                    partition_by=[F("thread_id"), F("checkpoint_ns")],
                    order_by=F("checkpoint_id").desc(),
                )
            ).values_list("id", "rank")
        )
        doomed = [row_id for row_id, rank in ranked if rank > keep_last]
        if not doomed:
            return 0
        removed = self.remove(tenant, doomed)
        oldest_kept = [row_id for row_id, rank in ranked if rank == keep_last]
        checkpoints.filter(id__in=oldest_kept).update(
            parent_checkpoint_id="", version=F("version") + 1
        )
        return removed

    def delete_runs(self, tenant: str, run_ids: Sequence[str]) -> int:
        if not run_ids:
            return 0
        doomed = self.filter(tenant=tenant, run_id__in=list(run_ids)).values_list("id", flat=True)
        return self.remove(tenant, list(doomed))

    def copy_thread(self, tenant: str, source: str, target: str) -> None:
        """Copy the rows of thread ``source`` to thread ``target`` (kept where the target
        has the same checkpoint): ONE statement."""
        fields = LangGraphCheckpoint._meta.concrete_fields
        names = ", ".join(str(f.column) for f in fields if f.column not in ("id", "thread_id"))
        sql = (
            f"INSERT INTO {TABLE} (thread_id, {names}) SELECT %s, {names} FROM {TABLE} "
            "WHERE tenant = %s AND thread_id = %s ORDER BY id "
            "ON CONFLICT (tenant, thread_id, checkpoint_ns, checkpoint_id) DO NOTHING"
        )
        with connections[self.db].cursor() as cursor:
            cursor.execute(sql, [target, tenant, source])

    def save_checkpoint(
        self,
        tenant: str,
        row: dict[str, Any],
        parent: RowVersion | None = None,
        *,
        pin: str | None = None,
    ) -> RowVersion | None:
        """Upsert a checkpoint row in ONE statement (:data:`SAVE_CHECKPOINT`); its id and
        version.

        A delta is stored only if its parent row is still at ``parent`` (its id and version;
        locked ``FOR KEY SHARE``); else None, and the caller stores every value. A
        checkpoint stored again (a second transaction) first makes the rows stored against
        it self-contained (as :meth:`remove`).
        """
        version = self._upsert(tenant, row, parent, pin)
        if version is not None:
            return version
        from tulip_memory.tenancy.context import tenant_atomic

        key = {
            "tenant": tenant,
            "thread_id": row["thread_id"],
            "checkpoint_ns": row["checkpoint_ns"],
        }
        with tenant_atomic(tenant, using=self.db):
            # FOR UPDATE: no child takes the row as its parent (FOR KEY SHARE) meanwhile.
            rows = LangGraphCheckpoint.rows.using(self.db)
            there = rows.filter(**key, checkpoint_id=row["checkpoint_id"]).select_for_update()
            if not list(there.values_list("id", flat=True)):
                return None  # not there: the delta's parent is what is missing, or changed
            dependents = rows.filter(
                **key, parent_checkpoint_id=row["checkpoint_id"], depth__gt=0, data__isnull=False
            )
            self.make_self_contained(tenant, list(dependents.values_list("id", flat=True)))
            return self._upsert(tenant, row, parent, None, overwrite=True)

    def _upsert(
        self,
        tenant: str,
        row: dict[str, Any],
        parent: RowVersion | None,
        pin: str | None,
        overwrite: bool = False,
    ) -> RowVersion | None:
        key = [tenant, row["thread_id"], row["checkpoint_ns"], row["checkpoint_id"]]
        values = [row[name] for name in ("parent_checkpoint_id", "run_id", "subject", "depth")]
        params = [*key, *values, row["data"], timezone.now(), row["depth"], tenant]
        with connections[self.db].cursor() as cursor:
            _execute(cursor, SAVE_CHECKPOINT, [*params, *(parent or (None, None)), overwrite], pin)
            stored = cursor.fetchone()
            return None if stored is None else (stored[0], stored[1])

    def save_writes(
        self,
        tenant: str,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        frame: bytes,
        *,
        subject: str = "",
        pin: str | None = None,
    ) -> RowVersion:
        """Append pending writes to a checkpoint's row in ONE statement (:data:`SAVE_WRITES`;
        inserting it, tagged with ``subject``, when writes come first); its id and version
        after (the version before is one less, none when it is 1)."""
        with connections[self.db].cursor() as cursor:
            params = [tenant, thread_id, checkpoint_ns, checkpoint_id, subject, frame]
            _execute(cursor, SAVE_WRITES, params, pin)
            row_id, version = cursor.fetchone()
            return row_id, version


class StoredCheckpoints(models.Manager.from_queryset(LangGraphCheckpointQuerySet)):  # type: ignore[misc]
    def get_queryset(self) -> LangGraphCheckpointQuerySet:
        return super().get_queryset().filter(data__isnull=False)


class LangGraphCheckpoint(SubjectThreadRow):
    """A LangGraph checkpoint with the values it adds and its pending writes."""

    checkpoint_ns = models.CharField(max_length=THREAD_ID_MAX_LENGTH, blank=True, default="")
    checkpoint_id = models.CharField(max_length=CHECKPOINT_ID_MAX_LENGTH)
    parent_checkpoint_id = models.CharField(
        max_length=CHECKPOINT_ID_MAX_LENGTH, blank=True, default=""
    )
    run_id = models.CharField(max_length=NAME_MAX_LENGTH, blank=True, default="")
    depth = models.PositiveSmallIntegerField(
        default=0, help_text=_("How many parents a load reads: 0 when it holds every value")
    )
    data = models.BinaryField(
        null=True,
        help_text=_("The checkpoint, its metadata and the values it adds, compressed"),
    )
    writes = models.BinaryField(default=b"", help_text=_("Its pending writes, compressed"))
    version = models.BigIntegerField(
        db_default=1, help_text=_("How many times the row was written: 1 when inserted")
    )
    created_at = models.DateTimeField(default=timezone.now)

    objects = StoredCheckpoints()
    rows = LangGraphCheckpointQuerySet.as_manager()

    class Meta:
        db_table = TABLE
        verbose_name = _("LangGraph checkpoint")
        base_manager_name = "rows"
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "thread_id", "checkpoint_ns", "checkpoint_id"],
                name="tulip_lgckpt_id_uniq",
            )
        ]
        indexes = [
            models.Index(
                fields=["tenant", "run_id"], name="tulip_lgckpt_run_idx", condition=~Q(run_id="")
            ),
            models.Index(
                fields=["tenant", "subject"],
                name="tulip_lgckpt_subject_idx",
                condition=~Q(subject=""),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.thread_id}/{self.checkpoint_ns}/{self.checkpoint_id}"
