"""PgMemory: the store on PostgreSQL + pgvector, one tenant per ``namespace[0]``.

Rows are :class:`~tulip_memory.models.store.MemoryItem`s; every operation runs in
``tenant_atomic`` pinned to its namespace's tenant, so row-level security keeps tenants
apart. Search is one statement (:mod:`tulip_memory.store.pg.search`).
"""

from __future__ import annotations

import json
import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import numpy as np
from asgiref.sync import sync_to_async

from tulip_memory.core.clock import Clock, utc_now
from tulip_memory.core.hrr import DEFAULT_DIM
from tulip_memory.core.lru import LRUCache
from tulip_memory.core.namespaces import Namespace, decode_namespace, encode_namespace
from tulip_memory.core.text import (
    STOP_WORDS,
    off_loop_when_long,
    search_terms,
    tokenize,
    value_text,
)
from tulip_memory.embeddings import BaseEmbedding, resolve_embedder
from tulip_memory.embeddings.base import query_vector_or_none
from tulip_memory.exceptions import ConfigurationError, TenantError
from tulip_memory.postgres.operations import PGVECTOR_ANN_MAX_DIM, text_search_config
from tulip_memory.store.base import (
    TTL,
    BatchWriteStore,
    SemanticSearchResult,
    StoreCapabilities,
    StoreItem,
    Versions,
)
from tulip_memory.store.pg.encoder import DEFAULT_ENCODING_CACHE, EXTERNAL_SOURCE, TextEncoder
from tulip_memory.store.pg.search import INDEXED_SEARCH_MIN_ROWS, search_paths
from tulip_memory.store.ranking import BM25_B, BM25_K1, HRR_WEIGHT, MODEL_WEIGHT
from tulip_memory.store.validation import (
    PreparedPut,
    validate_key,
    validate_key_list,
    validate_limit,
    validate_metadata_filter,
    validate_namespace,
    validate_namespace_prefix,
    validate_query,
    validate_threshold,
)
from tulip_memory.tenancy.context import (
    current_tenant,
    refuse_another_tenant,
    tenant_atomic,
    validate_tenant,
)

__all__ = ["DEFAULT_DIM", "DEFAULT_ENCODING_CACHE", "PGVECTOR_ANN_MAX_DIM", "PgMemory"]

logger = logging.getLogger(__name__)

# UTF-8 bytes of tenant + namespace path + key the unique btree index can hold.
MAX_INDEXED_BYTES = 2600

# At most this many distinct query tokens take part in the lexical match.
MAX_QUERY_TOKENS = 64
# Namespaces whose size a store remembers, to choose how to rank them.
NAMESPACE_SIZES_KEPT = 4096
# A namespace under INDEXED_SEARCH_MIN_ROWS is counted again every this many searches.
RECOUNT_EVERY = 16

T = TypeVar("T")


def lexical_tokens(query: str | None) -> list[str]:
    """The query's distinct tokens, at most ``MAX_QUERY_TOKENS``: words first, in query
    order; stop words only fill what room is left."""
    distinct = list(dict.fromkeys(tokenize(query or "")))
    if len(distinct) > MAX_QUERY_TOKENS:
        distinct.sort(key=lambda token: token in STOP_WORDS)  # stable: query order kept
    return distinct[:MAX_QUERY_TOKENS]


class _VersionMoved(Exception):
    """A compared key's version moved during a compare-and-put: roll the batch back."""


def _after(
    expected: dict[tuple[Namespace, str], int | None], rows_by_tenant: dict[str, list[Any]]
) -> dict[tuple[Namespace, str], int]:
    writes = Counter((row.namespace, row.key) for rows in rows_by_tenant.values() for row in rows)
    versions = {}
    for (ns, key), version in expected.items():
        after = (version or 0) + writes[(encode_namespace(ns), key)]
        if after:
            versions[(ns, key)] = after
    return versions


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


class PgMemory(BatchWriteStore):
    """Store on PostgreSQL + pgvector, tenants isolated by row-level security.

    ``using``: a database alias (a role without SUPERUSER or BYPASSRLS). ``embedder``:
    ``None`` for ``TULIP_MEMORY["EMBEDDER"]``, ``"hrr"``, or a ``BaseEmbedding``. ``dim``:
    the HRR width without an embedder; ``encoding_cache``: LRU size (0: off).
    """

    def __init__(
        self,
        using: str = "default",
        *,
        dim: int = DEFAULT_DIM,
        embedder: BaseEmbedding | str | None = None,
        encoding_cache: int = DEFAULT_ENCODING_CACHE,
        clock: Clock = utc_now,
    ) -> None:
        if not callable(clock):
            raise TypeError(f"clock must be a callable returning a datetime, got {clock!r}")
        self.using = using
        self._now = clock
        self.encoder = TextEncoder(
            dim=dim, embedder=resolve_embedder(embedder), cache_size=encoding_cache
        )
        self._check_database()
        self._lexical_warned = False
        # (tenant, namespace path) -> (rows last ranked, searches since they were counted).
        self._namespace_rows: LRUCache[tuple[str, str], tuple[int, int]] = LRUCache(
            NAMESPACE_SIZES_KEPT
        )

    def _check_database(self) -> None:
        from django.db import connections
        from django.utils.connection import ConnectionDoesNotExist

        from tulip_memory.conf import settings

        try:
            connection = connections[self.using]
        except ConnectionDoesNotExist:
            raise ConfigurationError(
                f"PgMemory(using={self.using!r}): settings.DATABASES has no such alias"
            ) from None
        if connection.vendor != "postgresql":
            raise ConfigurationError(
                f"PgMemory needs PostgreSQL with pgvector, but database alias {self.using!r} "
                f"is {connection.vendor}. Point `using` at a PostgreSQL alias (see "
                "docs/pg_store.md), or use InMemoryStore / HolographicStore."
            )
        configured = int(settings.VECTOR_DIMENSIONS)
        width = self.encoder.width
        if configured != width:
            hrr = self.encoder.embedder is None
            origin = (
                f"PgMemory(dim={self.encoder.dim}) stores 2·dim = {width}-wide HRR vectors"
                if hrr
                else f"the embedder is {width} dimensions wide"
            )
            raise ConfigurationError(
                f"TULIP_MEMORY['VECTOR_DIMENSIONS'] is {configured} (the width of the vector "
                f"column), but {origin}. Set VECTOR_DIMENSIONS = {width} before running "
                "the migrations (already migrated: also change the column and re-embed, as "
                "check tulip_memory.E014 says)"
                + (f", or pass dim={configured // 2}." if hrr else ".")
            )

    @property
    def capabilities(self) -> StoreCapabilities:
        return StoreCapabilities(
            search=True,
            semantic_search=True,
            embedding_dimension=self.encoder.width,
            ttl=True,
            list_namespaces=True,
            batch_operations=True,
            transactions=True,
            tenant_isolated=True,
        )

    def bound_tenant(self) -> str | None:
        return current_tenant()

    async def _run(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await sync_to_async(func, thread_sensitive=True)(*args, **kwargs)

    @classmethod
    def _writable(cls, prepared: PreparedPut, *, where: str = "") -> str:
        """The tenant of an item to write. An item too long for the unique index is refused
        as bad input here rather than by PostgreSQL halfway through a write."""
        tenant = cls._tenant_of(prepared.namespace, name=f"{where}namespace")
        size = sum(
            len(part.encode())
            for part in (prepared.namespace[0], encode_namespace(prepared.namespace), prepared.key)
        )
        if size > MAX_INDEXED_BYTES:
            raise ValueError(
                f"{where}namespace and key are too long for PgMemory: tenant, namespace path "
                f"and key take {size} bytes of UTF-8, over {MAX_INDEXED_BYTES} (PostgreSQL's "
                "btree entry limit on the unique (tenant, namespace, key) index)"
            )
        return tenant

    @staticmethod
    def _tenant_of(namespace: Namespace, *, name: str = "namespace") -> str:
        """The tenant of ``namespace``; every call goes through here before its query.
        While a tenant is bound, another tenant's namespace raises :class:`TenantError`:
        row-level security alone would allow it (the transaction is pinned to it)."""
        try:
            tenant = validate_tenant(namespace[0])
        except ValueError as exc:
            raise ValueError(f"{name}[0] is the tenant: {exc}") from None
        refuse_another_tenant(tenant, f"{name}[0] is tenant")
        return tenant

    @classmethod
    def _checked(cls, namespace: object) -> Namespace:
        checked = validate_namespace(namespace)
        cls._tenant_of(checked)
        return checked

    @classmethod
    def _checked_with_key(cls, namespace: object, key: object) -> tuple[Namespace, str]:
        checked, valid_key = validate_namespace(namespace), validate_key(key)
        cls._tenant_of(checked)
        return checked, valid_key

    def _items(self) -> Any:
        from tulip_memory.models.store import MemoryItem

        return MemoryItem.objects.using(self.using)

    def _atomic(self, tenant: str) -> Any:
        return tenant_atomic(tenant, using=self.using)

    def _row(
        self,
        prepared: PreparedPut,
        text: str,
        vector: np.ndarray | None,
        source: str,
        ttl: timedelta | None = None,
    ) -> Any:
        from tulip_memory.models.store import UpsertRow, search_text_of

        return UpsertRow(
            tenant=prepared.namespace[0],
            namespace=encode_namespace(prepared.namespace),
            key=prepared.key,
            value_json=prepared.value_json,
            metadata_json=prepared.metadata_json,
            search_text=search_text_of(tokenize(text)),
            embedding=vector,
            embedding_source=source if vector is not None else "",
            expires_at=None if ttl is None else self._now() + ttl,
            ttl=ttl,
        )

    def _item(self, namespace: Namespace, row: Any) -> StoreItem:
        return StoreItem(
            namespace=namespace,
            key=row.key,
            value=row.value,
            metadata=dict(row.metadata or {}),
            created_at=_aware(row.created_at),
            updated_at=_aware(row.updated_at),
            version=int(row.version),
        )

    def _write_sync(
        self,
        rows_by_tenant: dict[str, list[Any]],
        expected: dict[tuple[Namespace, str], int | None] | None = None,
    ) -> bool:
        from django.db import transaction

        # One outer transaction; tenants in sorted order, so batches cannot deadlock.
        outer = len(rows_by_tenant) > 1 or bool(expected)
        try:
            with transaction.atomic(using=self.using) if outer else nullcontext():
                if expected:
                    self._lock_keys(expected)
                    present = {pair: v for pair, v in expected.items() if v is not None}
                    if self._live_values(expected, "version") != present:
                        return False
                for tenant, rows in sorted(rows_by_tenant.items()):
                    with self._atomic(tenant):
                        self._upsert_rounds(rows)
                # A plain put takes no key lock: one that committed between the check and
                # the upsert moved a version, and the batch then rolls back.
                if expected and (
                    self._live_values(expected, "version") != _after(expected, rows_by_tenant)
                ):
                    raise _VersionMoved
        except _VersionMoved:
            return False
        return True

    def _lock_keys(self, expected: dict[tuple[Namespace, str], int | None]) -> None:
        # Advisory, not row locks: a row lock cannot cover a key not yet created. One
        # global order, so that concurrent batches cannot deadlock.
        from django.db import connections

        identities = sorted({(ns[0], encode_namespace(ns), key) for ns, key in expected})
        with connections[self.using].cursor() as cursor:
            for identity in identities:
                cursor.execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [json.dumps(identity)]
                )

    def _live_values(
        self, keys: Iterable[tuple[Namespace, str]], column: str
    ) -> dict[tuple[Namespace, str], Any]:
        """``column`` of each live item of ``keys``, in a transaction a tenant."""
        by_tenant: dict[str, dict[tuple[str, str], tuple[Namespace, str]]] = defaultdict(dict)
        for namespace, key in keys:
            by_tenant[namespace[0]][(encode_namespace(namespace), key)] = (namespace, key)
        found = {}
        now = self._now()
        for tenant, wanted in sorted(by_tenant.items()):
            with self._atomic(tenant):
                rows = self._items().for_keys(list(wanted.values())).live(now)
                for path, key, value in rows.values_list("namespace", "key", column):
                    found[wanted[(path, key)]] = value
        return found

    def _upsert_rounds(self, rows: list[Any]) -> None:
        # A repeated key is written once per occurrence (its version counts every write):
        # one statement per run of the batch without a repeated key.
        run: list[Any] = []
        seen: set[tuple[str, str]] = set()
        for row in rows:
            identity = (row.namespace, row.key)
            if identity in seen:
                self._items().upsert(run, self._now())
                run, seen = [], set()
            run.append(row)
            seen.add(identity)
        self._items().upsert(run, self._now())

    async def _put(
        self, prepared: PreparedPut, ttl: TTL, embedding: list[float] | None = None
    ) -> None:
        tenant = self._writable(prepared)
        given = None if embedding is None else self.encoder.checked(embedding, name="embedding")
        expiry = self._ttl(ttl)
        text = value_text(json.loads(prepared.value_json))
        if given is None:
            vector, source = await self.encoder.encode(tenant, text), self.encoder.source
        else:
            # With an embedder the vector is taken as its own (text search ranks it); without
            # one it is external: only search_by_embedding ranks it.
            vector = given
            source = self.encoder.source if self.encoder.embedder is not None else EXTERNAL_SOURCE
        row = await off_loop_when_long(
            len(text), lambda: self._row(prepared, text, vector, source, expiry)
        )
        await self._run(self._write_sync, {tenant: [row]})

    async def _write_all(
        self, prepared: list[PreparedPut], ttl: timedelta | None, expected: Versions | None = None
    ) -> bool:
        for index, (namespace, _key) in enumerate(expected or {}):
            self._tenant_of(namespace, name=f"expected_versions key {index} namespace")
        for index, one in enumerate(prepared):
            self._writable(one, where=f"items[{index}] ")
        texts = [value_text(json.loads(one.value_json)) for one in prepared]
        vectors = await self.encoder.encode_many(texts) if prepared else []

        def rows() -> dict[str, list[Any]]:
            by_tenant: dict[str, list[Any]] = defaultdict(list)
            for one, text, vector in zip(prepared, texts, vectors, strict=True):
                by_tenant[one.namespace[0]].append(
                    self._row(one, text, vector, self.encoder.source, ttl)
                )
            return dict(by_tenant)

        rows_by_tenant = await off_loop_when_long(sum(map(len, texts)), rows)
        return await self._run(self._write_sync, rows_by_tenant, expected)

    async def _put_embedded(self, prepared: PreparedPut, embedding: list[float], ttl: TTL) -> None:
        await self._put(prepared, ttl, embedding)

    def _delete_sync(self, namespace: Namespace, key: str | None) -> int:
        # Expired rows go too, but only the live ones count: an expired item was gone.
        with self._atomic(namespace[0]):
            rows = self._items().for_namespace(namespace)
            if key is not None:
                rows = rows.filter(key=key)
            return rows.clear_live(self._now())

    async def delete(self, namespace: tuple[str, ...], key: str) -> bool:
        namespace, key = self._checked_with_key(namespace, key)
        return await self._run(self._delete_sync, namespace, key) > 0

    async def clear_namespace(self, namespace: tuple[str, ...]) -> int:
        namespace = self._checked(namespace)
        return await self._run(self._delete_sync, namespace, None)

    async def _read(self, namespace: Namespace, read: Callable[[Any], T]) -> T:
        """``read`` of the live rows of ``namespace``, in its tenant's transaction."""

        def run() -> T:
            with self._atomic(namespace[0]):
                return read(self._items().for_namespace(namespace).live(self._now()))

        return await self._run(run)

    async def get_item(self, namespace: tuple[str, ...], key: str) -> StoreItem | None:
        namespace, key = self._checked_with_key(namespace, key)
        row = await self._read(namespace, lambda rows: rows.filter(key=key).first())
        return None if row is None else self._item(namespace, row)

    async def get(self, namespace: tuple[str, ...], key: str) -> Any | None:
        item = await self.get_item(namespace, key)
        return None if item is None else item.value

    async def exists(self, namespace: tuple[str, ...], key: str) -> bool:
        namespace, key = self._checked_with_key(namespace, key)
        return await self._read(namespace, lambda rows: rows.filter(key=key).exists())

    async def get_batch(
        self, keys: list[tuple[tuple[str, ...], str]]
    ) -> dict[tuple[tuple[str, ...], str], Any]:
        pairs = validate_key_list(keys)
        for index, (namespace, _key) in enumerate(pairs):
            self._tenant_of(namespace, name=f"keys[{index}] namespace")
        return await self._run(self._live_values, pairs, "value") if pairs else {}

    async def list_keys(self, namespace: tuple[str, ...], limit: int = 100) -> list[str]:
        namespace, limit = self._checked(namespace), validate_limit(limit)
        newest = "-updated_at", "key"
        return await self._read(
            namespace,
            lambda rows: list(rows.order_by(*newest).values_list("key", flat=True)[:limit]),
        )

    def _list_namespaces_sync(self, tenant: str, prefix: Namespace, limit: int) -> list[Namespace]:
        with self._atomic(tenant):
            live = self._items().under_prefix(prefix).live(self._now())
            rows = list(live.namespace_paths()[:limit])
        return [decode_namespace(path) for path, _sort_key in rows]

    async def list_namespaces(
        self, prefix: tuple[str, ...] | None = None, limit: int = 100
    ) -> list[tuple[str, ...]]:
        """Namespaces of one tenant: ``prefix[0]``, else the bound one (neither:
        :class:`~tulip_memory.exceptions.TenantError`; RLS shows one tenant at a time)."""
        prefix, limit = validate_namespace_prefix(prefix), validate_limit(limit)
        tenant = self._tenant_of(prefix, name="prefix") if prefix else current_tenant()
        if tenant is None:
            raise TenantError(
                "list_namespaces() without a prefix lists the namespaces of the tenant "
                "bound by tenant_context(); none is bound. Pass prefix=(tenant, ...)."
            )
        return await self._run(self._list_namespaces_sync, tenant, prefix, limit)

    def _search_sync(
        self, tenant: str, namespaces: list[Namespace], limit: int, **ranking: Any
    ) -> list[Any]:
        paths = [encode_namespace(ns) for ns in namespaces]
        # (rows, searches since they were counted) of each path, when known.
        known = [self._namespace_rows.get((tenant, path)) for path in paths]
        indexed = [k is not None and k[0] >= INDEXED_SEARCH_MIN_ROWS for k in known]
        # A small namespace is recounted to notice it grow; a large one seldom shrinks.
        counted = [
            k is None or (not i and k[1] + 1 >= RECOUNT_EVERY)
            for k, i in zip(known, indexed, strict=True)
        ]
        for path, k, count in zip(paths, known, counted, strict=True):
            if k is not None and not count:
                self._namespace_rows.put((tenant, path), (k[0], k[1] + 1))
        with self._atomic(tenant):
            rows = search_paths(
                self._items(),
                tenant,
                paths,
                limit,
                now=self._now(),
                use_indexes=indexed,
                count_rows=counted,
                known_rows=[None if k is None else k[0] for k in known],
                **ranking,
            )
        for position, seen in rows.namespace_rows.items():
            self._namespace_rows.put((tenant, paths[position]), (seen, 0))
        return rows

    async def _search(self, namespace: Namespace, query: str | None, limit: int) -> list[StoreItem]:
        return (await self._search_many([namespace], query, limit))[0]

    async def ranking_arguments(self, tenant: str, query: str | None) -> dict[str, Any]:
        """The keyword arguments of ``search_paths`` for ``query`` (its vector, terms and
        fusion weights); the admin's search box ranks with them too."""
        tokens = lexical_tokens(query)
        hrr = self.encoder.embedder is None
        # Over MAX_QUERY_TOKENS words (stop words apart), the words past the cap match
        # nothing: the vector, made of the whole query, must find those rows.
        every_word = len(set(tokenize(query or "")) - STOP_WORDS) <= MAX_QUERY_TOKENS
        # A query of stop words lists the newest items with HRR (a bag of those words).
        ranked = bool(tokens) and (not hrr or bool(search_terms(" ".join(tokens))))
        encoded = None
        if ranked and query:
            encoded = await query_vector_or_none(
                lambda: self.encoder.encode(tenant, query), "PgMemory"
            )
            # No vector and no word to rank by: the newest items, as in the other stores.
            ranked = encoded is not None or bool(search_terms(" ".join(tokens)))
        return {
            "vector": encoded,
            "source": self.encoder.source,
            "terms": tokens if ranked else None,
            "config": text_search_config(),
            "weight": HRR_WEIGHT if hrr else MODEL_WEIGHT,
            "bm25": (BM25_K1, BM25_B),
            # An HRR vector is a bag of the words: it only re-ranks the rows they found.
            "vector_candidates": not (hrr and every_word),
        }

    async def _search_many(
        self, namespaces: list[Namespace], query: str | None, limit: int
    ) -> list[list[StoreItem]]:
        """Namespaces of ONE tenant, in one statement with one encoding of the query."""
        query, limit = validate_query(query), validate_limit(limit)
        if not namespaces:
            return []
        tenants = {self._tenant_of(ns, name=f"namespaces[{i}]") for i, ns in enumerate(namespaces)}
        if len(tenants) > 1:
            raise ValueError(
                f"search_many spans the tenants {sorted(tenants)}: every namespace of one call "
                "must share namespace[0], the tenant"
            )
        tenant = tenants.pop()
        ranking = await self.ranking_arguments(tenant, query)
        rows = await self._run(self._search_sync, tenant, namespaces, limit, **ranking)
        out: list[list[StoreItem]] = [[] for _ in namespaces]
        lexical = False
        for row in rows:
            out[row.position].append(self._item(namespaces[row.position], row))
            lexical = lexical or row.lexical
        if lexical and ranking["vector"] is not None and not self._lexical_warned:
            self._lexical_warned = True
            logger.warning(
                "PgMemory: search ranked rows without a %s vector by their words only "
                "(rows with no text or whose vector the embedder gave as all zeros, or "
                "written before this encoder was configured); re-put or re-embed the "
                "latter to rank them by vector.",
                self.encoder.source,
            )
        return out

    async def search_by_embedding(
        self,
        namespace: tuple[str, ...],
        query_embedding: list[float],
        limit: int = 10,
        threshold: float | None = None,
        metadata_filter: dict[str, Any] | None = None,
    ) -> list[SemanticSearchResult]:
        namespace = self._checked(namespace)
        vector = self.encoder.checked(query_embedding, name="query_embedding")
        limit, threshold = validate_limit(limit), validate_threshold(threshold)
        filters = validate_metadata_filter(metadata_filter)
        rows = await self._run(
            self._search_sync,
            namespace[0],
            [namespace],
            limit,
            vector=vector,
            source=None,  # every vector: this encoder's, another's, the caller's
            max_distance=None if threshold is None else 1.0 - threshold,
            metadata=filters,
        )
        return [
            SemanticSearchResult(
                item=self._item(namespace, row), score=1.0 - row.rank, distance=row.rank
            )
            for row in rows
        ]

    async def get_embedding(self, namespace: tuple[str, ...], key: str) -> list[float] | None:
        namespace, key = self._checked_with_key(namespace, key)
        vector = await self._read(
            namespace, lambda rows: rows.filter(key=key).values_list("embedding", flat=True).first()
        )
        return None if vector is None else [float(v) for v in vector]

    async def sweep_expired(self, *, tenants: Sequence[str] | None = None) -> int:
        """Delete the expired items of ``tenants`` (default: the bound tenant, else every
        registered one), a transaction per tenant; how many were deleted."""
        from tulip_memory.retention.expiry import sweep_expired_items

        if tenants is None:
            bound = current_tenant()
            chosen = None if bound is None else [bound]
        elif isinstance(tenants, str):
            raise ValueError("tenants must be a list of tenant names, not one string")
        else:
            chosen = [self._tenant_of((tenant,), name="tenants") for tenant in tenants]
        report = await self._run(
            sweep_expired_items, using=self.using, tenants=chosen, now=self._now()
        )
        return sum(report.values())

    async def close(self) -> None:
        self.encoder.clear()
