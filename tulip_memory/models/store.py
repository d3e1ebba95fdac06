"""The items of :class:`~tulip_memory.store.PgMemory`: one row per ``(namespace, key)``.

``tenant`` is ``namespace[0]``, under row-level security; the namespace is stored as one
path whose prefixes are namespace prefixes. The search columns and indexes (migrations
0006, 0014) are not in the model state: the ORM never reads them.
"""

from __future__ import annotations

import functools
import operator
import weakref
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

import numpy as np
from django.db import connections, models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _
from pgvector.django import VectorField

from tulip_memory.core.namespaces import NAMESPACE_SEPARATOR, encode_namespace
from tulip_memory.tenancy.cluster import is_citus
from tulip_memory.tenancy.context import TENANT_MAX_LENGTH

__all__ = [
    "SEARCH_TEXT_MAX_BYTES",
    "EmbeddingField",
    "MemoryItem",
    "MemoryItemQuerySet",
    "UpsertRow",
    "namespace_prefix_condition",
    "search_text_of",
]


class EmbeddingField(VectorField):
    """A pgvector ``vector`` of ``TULIP_MEMORY["VECTOR_DIMENSIONS"]``, read when the column
    is created, never written into migrations (other vendors: an unused text column)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.pop("dimensions", None)
        super().__init__(*args, **kwargs)

    def deconstruct(self) -> tuple[Any, Any, Any, Any]:
        name, _path, args, kwargs = super().deconstruct()
        kwargs.pop("dimensions", None)
        return name, "tulip_memory.models.store.EmbeddingField", args, kwargs

    def db_type(self, connection: Any) -> str:
        if connection.vendor != "postgresql":
            return models.TextField().db_type(connection) or "text"
        from tulip_memory.conf import settings

        return f"vector({int(settings.VECTOR_DIMENSIONS)})"


# psycopg connections on which pgvector's binary adapters are registered.
_VECTOR_READY: weakref.WeakSet[Any] = weakref.WeakSet()


class UpsertRow(NamedTuple):
    """One row for :meth:`MemoryItemQuerySet.upsert` (JSON as text, vector as float32)."""

    tenant: str
    namespace: str
    key: str
    value_json: str
    metadata_json: str
    search_text: str
    embedding: np.ndarray | None
    embedding_source: str
    expires_at: datetime | None = None
    ttl: timedelta | None = None


# A batch of more bytes than this gets a work_mem of its own (see _batch_work_mem).
BATCH_WORK_MEM_FROM = 1 << 20
BATCH_WORK_MEM_MAX_KB = 128 * 1024


def _values_upsert(
    cursor: Any, insert: str, conflict: str, rows: Sequence[UpsertRow], ttls: list[str | None]
) -> tuple[str, list[Any]]:
    """The upsert of ``rows`` as ``INSERT ... VALUES`` (Citus: an ``INSERT ... SELECT`` from
    ``unnest`` would reach the shards by ``COPY``, which row-level security refuses), in
    the global lock order, row n written at the database's clock + n µs."""
    cursor.execute("SELECT clock_timestamp()")
    (start,) = cursor.fetchone()
    ordered = sorted(range(len(rows)), key=lambda n: rows[n][:3])
    values = []
    params: list[Any] = []
    for n in ordered:
        row = rows[n]
        at = start + timedelta(microseconds=n + 1)
        values.append(
            "(%s, %s, %s, %s::jsonb, %s::jsonb, %s, %b::vector, %s, %s, %s, 1, "
            "%s::timestamptz, %s::interval)"
        )
        params += [*row[:6], row.embedding, row.embedding_source, at, at, row.expires_at, ttls[n]]
    return insert + "VALUES " + ", ".join(values) + " " + conflict, params


def _batch_work_mem(rows: Sequence[UpsertRow]) -> str | None:
    # Three times the rows' bytes, so that the unnest and the sort do not spill to disk.
    size = sum(
        len(row.value_json)
        + len(row.metadata_json)
        + len(row.search_text)
        + (0 if row.embedding is None else row.embedding.nbytes)
        for row in rows
    )
    if size < BATCH_WORK_MEM_FROM:
        return None
    return f"{min(BATCH_WORK_MEM_MAX_KB, 3 * size // 1024)}kB"


_MICROSECOND = timedelta(microseconds=1)

# PostgreSQL refuses a tsvector over 1 MB, up to about three times its text's bytes.
SEARCH_TEXT_MAX_BYTES = 256 * 1024


def search_text_of(tokens: Iterable[str]) -> str:
    """The stored search text: the tokens between spaces, so ``' tea '`` matches a token;
    the first tokens only, up to :data:`SEARCH_TEXT_MAX_BYTES`."""
    kept, size = [], 2
    for token in tokens:
        size += len(token.encode()) + 1
        if size > SEARCH_TEXT_MAX_BYTES:
            break
        kept.append(token)
    return " " + " ".join(kept) + " "


def namespace_prefix_condition(prefixes: Iterable[tuple[str, ...]]) -> Q:
    """Rows whose ``tenant`` and ``namespace`` path are, or are under, one of ``prefixes``
    (non-empty namespaces; none matches no row), for a model with the store's columns."""
    conditions = [
        Q(tenant=prefix[0])
        & (Q(namespace=path) | Q(namespace__startswith=path + NAMESPACE_SEPARATOR))
        for prefix, path in ((prefix, encode_namespace(prefix)) for prefix in prefixes)
    ]
    return functools.reduce(operator.or_, conditions) if conditions else Q(pk__in=[])


class MemoryItemQuerySet(models.QuerySet):
    def for_namespace(self, namespace: tuple[str, ...]) -> MemoryItemQuerySet:
        return self.filter(tenant=namespace[0], namespace=encode_namespace(namespace))

    def under_prefix(self, prefix: tuple[str, ...]) -> MemoryItemQuerySet:
        """Items whose namespace is ``prefix`` or starts with it (all for ``()``)."""
        if not prefix:
            return self.all()
        return self.filter(namespace_prefix_condition([prefix]))

    def for_keys(self, pairs: list[tuple[tuple[str, ...], str]]) -> MemoryItemQuerySet:
        condition = Q()
        for namespace, key in pairs:
            condition |= Q(tenant=namespace[0], namespace=encode_namespace(namespace), key=key)
        return self.filter(condition) if pairs else self.none()

    def live(self, now: datetime) -> MemoryItemQuerySet:
        return self.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))

    def refresh_expiry(self, now: datetime) -> int:
        """Set the expiry of the rows written with a ttl to ``now + ttl``; how many."""
        from django.db.models import DateTimeField
        from django.db.models.expressions import RawSQL

        # In UTC without a time zone: timestamp + interval is IMMUTABLE (timestamptz +
        # interval is not), which Citus wants of an UPDATE's expression on a column.
        utc = now.astimezone(UTC).replace(tzinfo=None)
        moved = RawSQL(
            "((%s::timestamp + \"ttl\") AT TIME ZONE 'UTC')", [utc], output_field=DateTimeField()
        )
        return self.filter(ttl__isnull=False).update(expires_at=moved)

    def expired(self, now: datetime) -> MemoryItemQuerySet:
        return self.filter(expires_at__lte=now)

    def clear_live(self, now: datetime) -> int:
        """Delete the rows in ONE statement; how many of them were live at ``now``."""
        select, params = self.values("pk").query.sql_with_params()
        sql = (
            f"DELETE FROM {self.model._meta.db_table} WHERE id IN ({select}) "
            "RETURNING (expires_at IS NULL OR expires_at > %s)"
        )
        with connections[self.db].cursor() as cursor:
            cursor.execute(sql, [*params, now])
            return sum(1 for (live,) in cursor.fetchall() if live)

    def clear(self) -> int:
        """Delete the rows in ONE ``DELETE`` statement (no collector pre-fetch); the count."""
        return self._raw_delete(self.db)

    # --- statements the ORM cannot express -------------------------------------------

    def binary_cursor(self) -> Any:
        """A Django cursor binding parameters server-side, in binary (vectors as float32)."""
        import psycopg
        from pgvector.psycopg import register_vector

        connection = connections[self.db]
        connection.ensure_connection()
        raw = connection.connection
        if raw not in _VECTOR_READY:
            register_vector(raw)
            _VECTOR_READY.add(raw)
        cursor = psycopg.Cursor(raw)
        # (django-stubs type these as taking a CursorWrapper; they wrap a DB-API cursor.)
        if connection.queries_logged:
            return connection.make_debug_cursor(cursor)  # type: ignore[arg-type]
        return connection.make_cursor(cursor)  # type: ignore[arg-type]

    def upsert(self, rows: Sequence[UpsertRow], now: datetime | None = None) -> int:
        """Insert or update ``rows`` (no repeated key) in ONE ``INSERT ... ON CONFLICT``;
        row n is written at ``clock_timestamp() + n µs``, as if written one by one."""
        if not rows:
            return 0
        columns = [list(column) for column in zip(*rows, strict=True)]
        embeddings = columns[6] if any(v is not None for v in columns[6]) else []
        # The expiries as text (NULL: none): a list of only None has no type to bind.
        expiries = [None if at is None else at.isoformat() for at in columns[8]]
        # Whole microseconds: a float's text ("5e-05") is no interval PostgreSQL reads.
        ttls = [
            None if ttl is None else f"{ttl // _MICROSECOND} microseconds" for ttl in columns[9]
        ]
        expired = "(i.expires_at IS NOT NULL AND i.expires_at <= %s::timestamptz)"
        citus = is_citus(connections[self.db])
        # Citus runs the DO UPDATE on a worker and wants only IMMUTABLE functions there: no
        # timestamp arithmetic (a concurrent overwrite may then tie with the row it follows).
        later = "i.updated_at" if citus else "i.updated_at + interval '1 microsecond'"
        columns_sql = (
            f"INSERT INTO {self.model._meta.db_table} AS i (tenant, namespace, key, value, "
            "metadata, search_text, embedding, embedding_source, created_at, updated_at, "
            "version, expires_at, ttl) "
        )
        select = (
            "SELECT r.tenant, r.namespace, r.key, r.value::jsonb, r.metadata::jsonb, "
            "r.search_text, r.embedding, r.source, c.ts + r.ord * interval "
            "'1 microsecond', c.ts + r.ord * interval '1 microsecond', 1, r.expires_at, "
            "r.ttl::interval "
            "FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::text[], "
            "%s::text[], %b::vector[], %s::text[], %s::timestamptz[], %s::text[]) "
            "WITH ORDINALITY AS r(tenant, namespace, key, value, metadata, search_text, "
            "embedding, source, expires_at, ttl, ord) "
            "CROSS JOIN (SELECT clock_timestamp() AS ts) c "
            # Rows are locked in one global order (not the batch's): two concurrent
            # batches over the same keys in different orders would otherwise deadlock.
            # ``ord`` still follows the batch, so timestamps do too.
            "ORDER BY r.tenant, r.namespace, r.key "
        )
        conflict = (
            "ON CONFLICT (tenant, namespace, key) DO UPDATE SET value = EXCLUDED.value, "
            "metadata = EXCLUDED.metadata, search_text = EXCLUDED.search_text, "
            "embedding = EXCLUDED.embedding, embedding_source = EXCLUDED.embedding_source, "
            f"updated_at = GREATEST(EXCLUDED.updated_at, {later}), "
            # An expired row is gone: its key is created anew.
            f"created_at = CASE WHEN {expired} THEN EXCLUDED.created_at ELSE i.created_at END, "
            f"version = CASE WHEN {expired} THEN 1 ELSE i.version + 1 END, "
            "expires_at = EXCLUDED.expires_at, ttl = EXCLUDED.ttl"
        )
        moment = now or datetime.now(UTC)
        with self.binary_cursor() as cursor:
            work_mem = _batch_work_mem(rows)
            if work_mem is not None:
                cursor.execute(
                    "SELECT current_setting('work_mem'), set_config('work_mem', %s, true)",
                    [work_mem],
                )
                previous = cursor.fetchone()[0]
            if citus:
                sql, params = _values_upsert(cursor, columns_sql, conflict, rows, ttls)
            else:
                sql = columns_sql + select + conflict
                params = [*columns[:6], embeddings, columns[7], expiries, ttls]
            cursor.execute(sql, [*params, moment, moment])
            count = cursor.rowcount
            if work_mem is not None:  # back for the rest of the transaction (a caller's)
                cursor.execute("SELECT set_config('work_mem', %s, true)", [previous])
            return count

    def namespace_paths(self) -> models.QuerySet[Any, tuple[str, str]]:
        """Distinct ``(path, sort key)`` pairs in namespace-tuple order: the key's separators
        are U+0001 under the "C" collation, so ``("a", "z")`` sorts before ``("a-b",)``."""
        from django.db.models.functions import Collate, Replace

        sort_key = Collate(
            Replace(
                "namespace",
                models.Value(NAMESPACE_SEPARATOR, output_field=models.TextField()),
                models.Value("\x01", output_field=models.TextField()),
            ),
            "C",
        )
        return (
            self.annotate(sort_key=sort_key)
            .order_by("sort_key")
            .values_list("namespace", "sort_key")
            .distinct()
        )


class MemoryItem(models.Model):
    tenant = models.CharField(max_length=TENANT_MAX_LENGTH, help_text=_("namespace[0]"))
    namespace = models.TextField(help_text=_("The namespace as a '/'-joined path"))
    key = models.TextField()
    value = models.JSONField()
    metadata = models.JSONField(default=dict)
    search_text = models.TextField(default="", help_text=_("Text matched by lexical search"))
    embedding = EmbeddingField(null=True, blank=True)
    embedding_source = models.CharField(
        max_length=100,
        default="",
        blank=True,
        help_text=_(
            "What computed the embedding: 'hrr', 'embedder:<name>', 'external'; '' for none"
        ),
    )
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    version = models.PositiveBigIntegerField(default=1)
    expires_at = models.DateTimeField(
        null=True, blank=True, help_text=_("When the item expires (empty: never)")
    )
    ttl = models.DurationField(
        null=True,
        blank=True,
        help_text=_("The ttl of the last write (a read that refreshes it sets the expiry anew)"),
    )

    objects = MemoryItemQuerySet.as_manager()

    class Meta:
        db_table = "tulip_memory_store_item"
        verbose_name = _("memory")
        verbose_name_plural = _("memories")
        # Forgetting a memory (and its history) from the admin; the admin is read-only otherwise.
        permissions = [("forget_memoryitem", _("Can forget a memory and its history"))]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "namespace", "key"], name="tulip_store_item_uniq"
            ),
            models.CheckConstraint(
                condition=~Q(tenant=""), name="tulip_store_item_tenant_not_empty"
            ),
        ]
        indexes = [
            models.Index(
                fields=["tenant", "namespace", "-updated_at"], name="tulip_store_item_recent"
            ),
            models.Index(
                fields=["tenant", "expires_at"],
                condition=Q(expires_at__isnull=False),
                name="tulip_store_item_expiry",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.namespace} / {self.key}"
