"""Vectors of another encoder in PgMemory's table: finding, counting and re-embedding them.

PgMemory ranks only vectors of its own ``embedding_source``. :class:`Reembedder` is the
``tulip_memory_reembed`` command's work for one tenant: written back on ``(id, version)``,
so a value changed meanwhile keeps its new vector; a stopped run resumes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tulip_memory.conf import settings
from tulip_memory.core.hrr import DEFAULT_DIM
from tulip_memory.core.numbers import check_int
from tulip_memory.core.text import value_text
from tulip_memory.embeddings import get_embedder
from tulip_memory.store.pg.encoder import EXTERNAL_SOURCE, TextEncoder
from tulip_memory.tenancy.context import tenant_atomic

__all__ = [
    "Reembedder",
    "TenantReport",
    "bypasses_row_level_security",
    "column_width",
    "foreign_sources",
    "settings_encoder",
    "stores_hrr_in_pg",
]

TABLE = "tulip_memory_store_item"

# Sources that re-embedding never replaces, besides the configured one.
_KEPT_SOURCES = ("", EXTERNAL_SOURCE)


def stores_hrr_in_pg() -> bool:
    """Whether ``STORE`` is PgMemory (or a subclass): its HRR width is then known."""
    from tulip_memory.store.pg.store import PgMemory

    try:
        store = settings.import_setting("STORE")
    except ImportError:
        return False
    return isinstance(store, type) and issubclass(store, PgMemory)


def settings_encoder() -> TextEncoder:
    """The encoder of ``PgMemory()`` under the current settings (no cache)."""
    dim = settings.STORE_OPTIONS.get("dim", DEFAULT_DIM) if stores_hrr_in_pg() else DEFAULT_DIM
    return TextEncoder(dim=dim, embedder=get_embedder(), cache_size=0)


def column_width(connection: Any) -> int | None:
    """The width of the table's vector column, or ``None`` when it has none (yet)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT a.atttypmod FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
            "WHERE c.relname = %s AND a.attname = 'embedding' AND NOT a.attisdropped "
            "AND pg_table_is_visible(c.oid)",
            [TABLE],
        )
        row = cursor.fetchone()
    return int(row[0]) if row and row[0] > 0 else None


def bypasses_row_level_security(connection: Any) -> bool:
    """Whether ``connection``'s role sees every tenant's rows (SUPERUSER or BYPASSRLS)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user")
        row = cursor.fetchone()
    return bool(row and row[0])


def foreign_sources(connection: Any, source: str, tenant: str | None = None) -> dict[str, int]:
    """Rows visible to ``connection`` (of ``tenant`` when given; the owner sees every
    tenant's) whose vector is not of ``source``, by source, ``external`` ones apart."""
    only = "" if tenant is None else "AND tenant = %s "
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT embedding_source, count(*) FROM {TABLE} "
            f"WHERE embedding_source <> ALL(%s) {only}GROUP BY embedding_source "
            "ORDER BY embedding_source",
            [[source, *_KEPT_SOURCES], *([] if tenant is None else [tenant])],
        )
        return {name: int(count) for name, count in cursor.fetchall()}


@dataclass
class TenantReport:
    """What :meth:`Reembedder.run` did for one tenant (``without_words``: rows left
    without a vector, their text having no word or an all-zero vector)."""

    tenant: str
    reembedded: int = 0
    changed_meanwhile: int = 0
    without_words: int = 0


class Reembedder:
    """Re-embeds one tenant's rows of other sources with ``encoder``."""

    def __init__(
        self,
        encoder: TextEncoder,
        *,
        using: str = "default",
        batch_size: int = 256,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        check_int(batch_size, "batch_size")
        self.encoder = encoder
        self.using = using
        self.batch_size = batch_size
        self._loop = loop

    def _rows(self) -> Any:
        from tulip_memory.models.store import MemoryItem

        return MemoryItem.objects.using(self.using)

    def _stale(self, tenant: str) -> Any:
        # Rows of this source without a vector too: a change of the column's width clears
        # every vector and keeps the sources.
        from django.db.models import Q

        return (
            self._rows()
            .filter(tenant=tenant)
            .exclude(embedding_source__in=_KEPT_SOURCES)
            .filter(~Q(embedding_source=self.encoder.source) | Q(embedding__isnull=True))
        )

    def counts(self, tenant: str) -> tuple[int, int]:
        """``(rows to re-embed, rows already of the configured source)`` of ``tenant``."""
        with tenant_atomic(tenant, using=self.using):
            stale = self._stale(tenant).count()
            current = (
                self._rows()
                .filter(tenant=tenant, embedding_source=self.encoder.source)
                .exclude(embedding__isnull=True)
                .count()
            )
        return stale, current

    def run(self, tenant: str, on_batch: Callable[[TenantReport], None]) -> TenantReport:
        """Re-embed ``tenant``'s stale rows; ``on_batch`` is called after each commit."""
        report = TenantReport(tenant)
        after = 0
        while True:
            with tenant_atomic(tenant, using=self.using):
                batch = list(
                    self._stale(tenant)
                    .filter(id__gt=after)
                    .order_by("id")
                    .values_list("id", "version", "value")[: self.batch_size]
                )
            if not batch:
                return report
            after = batch[-1][0]
            texts = [value_text(value) for _id, _version, value in batch]
            vectors = self._loop.run_until_complete(self.encoder.encode_many(texts))
            with tenant_atomic(tenant, using=self.using):
                for (row_id, version, _value), vector in zip(batch, vectors, strict=True):
                    written = (
                        self._rows()
                        .filter(id=row_id, version=version)
                        .update(
                            embedding=vector,
                            embedding_source=self.encoder.source if vector is not None else "",
                        )
                    )
                    if not written:
                        report.changed_meanwhile += 1
                    elif vector is None:
                        report.without_words += 1
                    else:
                        report.reembedded += 1
            on_batch(report)
