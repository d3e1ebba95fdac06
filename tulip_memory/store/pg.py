"""PgMemory: the ORM-backed store on PostgreSQL + pgvector, one tenant per ``namespace[0]``.

Rows live in :class:`tulip_memory.models.store.MemoryItem`, reached through the Django
database alias ``using``. Every operation runs in :func:`~tulip_memory.tenancy.tenant_atomic`
pinned to the tenant of its namespace, so row-level security (migration ``0001_initial``)
is what keeps tenants apart — not the ``WHERE`` clauses, which only narrow.

Vectors: with an ``embedder`` (a ``BaseEmbedding``) values and queries are embedded;
without one they get the HRR ``[cos φ, sin φ]`` encoding of :mod:`tulip_memory.store.hrr`
(2 * ``dim`` wide). The width must equal ``TULIP_MEMORY["VECTOR_DIMENSIONS"]`` (the
column's); a mismatch fails at construction.

Search plan, chosen on purpose: a namespace is found through the ``(tenant, namespace)``
btree and its rows are sorted by exact cosine distance. An HNSW scan under a selective
tenant/namespace filter returns too few or wrong rows; the exact sort returns the true
top-k (bench/pg_store.py measures both the latency and the recall). Rows without a
vector from this store's encoder (no text, or written by another encoder — e.g. before an
embedder was configured) are still found by a lexical token match, with a one-time
warning.

Better than the reference: the tenant pin is transaction-local (``set_config(..., true)``)
through the ORM's transaction; ``put_batch`` is one bulk upsert statement and keeps the
version count right for keys repeated in a batch; ``get_batch`` is one query and
``clear_namespace`` one statement; vectors are sorted exactly instead of trusting a
filtered ANN scan.
"""

from __future__ import annotations

import json
import logging
import threading
import warnings
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from datetime import UTC, datetime
from typing import Any, TypeVar

import numpy as np
from asgiref.sync import sync_to_async

from tulip_memory.exceptions import ConfigurationError
from tulip_memory.rls import PGVECTOR_ANN_MAX_DIM
from tulip_memory.store.base import BaseStore, SemanticSearchResult, StoreCapabilities, StoreItem
from tulip_memory.store.text import tokenize, value_text
from tulip_memory.store.validation import (
    PreparedPut,
    prepare_batch,
    prepare_put,
    validate_embedding,
    validate_key,
    validate_key_list,
    validate_limit,
    validate_metadata_filter,
    validate_namespace,
    validate_namespace_prefix,
    validate_namespaces,
    validate_query,
    validate_threshold,
)
from tulip_memory.tenancy import current_tenant, validate_tenant

__all__ = ["DEFAULT_DIM", "DEFAULT_ENCODING_CACHE", "PGVECTOR_ANN_MAX_DIM", "PgMemory"]

logger = logging.getLogger(__name__)

DEFAULT_DIM = 512
DEFAULT_ENCODING_CACHE = 1024
# At most this many distinct query tokens take part in the lexical match.
_MAX_QUERY_TOKENS = 64

T = TypeVar("T")
Namespace = tuple[str, ...]


def _embedder_name(embedder: Any) -> str:
    name = getattr(embedder, "model_name", None) or getattr(embedder, "model", None)
    if not isinstance(name, str) or not name:
        name = f"{type(embedder).__module__}.{type(embedder).__qualname__}"
    return f"embedder:{name}"[:100]


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


class PgMemory(BaseStore):
    """Store on PostgreSQL + pgvector through the ORM, tenants isolated by row-level security.

    ``using`` names a PostgreSQL database alias (connected as a role without SUPERUSER or
    BYPASSRLS). ``dim`` is the HRR width used without an ``embedder`` (the column is
    ``2 * dim`` wide); ``encoding_cache`` is how many encodings are kept (LRU keyed by
    ``(tenant, text)``; 0 turns it off).
    """

    def __init__(
        self,
        using: str = "default",
        *,
        dim: int = DEFAULT_DIM,
        embedder: Any | None = None,
        encoding_cache: int = DEFAULT_ENCODING_CACHE,
    ) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise ValueError(f"dim must be an int >= 1, got {dim!r}")
        if isinstance(encoding_cache, bool) or not isinstance(encoding_cache, int):
            raise ValueError(f"encoding_cache must be an int, got {encoding_cache!r}")
        if encoding_cache < 0:
            raise ValueError(f"encoding_cache must be >= 0, got {encoding_cache}")
        self.using = using
        self._dim = dim
        self._embedder = embedder
        self._width = self._vector_width(dim, embedder)
        self._source = "hrr" if embedder is None else _embedder_name(embedder)
        self._check_database()
        self._cache_size = encoding_cache
        self._cache: OrderedDict[tuple[str, str], np.ndarray | None] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._lexical_warned = False

    # --- construction checks ----------------------------------------------------------

    @staticmethod
    def _vector_width(dim: int, embedder: Any | None) -> int:
        if embedder is None:
            width = 2 * dim
            if width > PGVECTOR_ANN_MAX_DIM:
                raise ValueError(
                    f"PgMemory(dim={dim}) is not indexable: the HRR encoding stores "
                    f"[cos φ, sin φ], so the vector column would be 2·{dim} = {width} wide, "
                    f"over pgvector's {PGVECTOR_ANN_MAX_DIM}-dimension limit for an HNSW "
                    f"index. Pass dim <= {PGVECTOR_ANN_MAX_DIM // 2} (default {DEFAULT_DIM}), "
                    "or an embedder."
                )
            return width
        width = getattr(embedder, "dimension", None)
        if isinstance(width, bool) or not isinstance(width, int) or width < 1:
            raise ValueError(f"embedder.dimension must be an int >= 1, got {width!r}")
        if width > PGVECTOR_ANN_MAX_DIM:
            warnings.warn(
                f"PgMemory: the embedder is {width} dimensions wide, over pgvector's "
                f"{PGVECTOR_ANN_MAX_DIM}-dimension limit for an HNSW index, so the table has "
                "no ANN index (TULIP_MEMORY['ANN_INDEX'] cannot apply). PgMemory's searches "
                "stay exact (each namespace is sorted by exact distance), but ad-hoc "
                "nearest-neighbour queries over a whole table are sequential scans.",
                RuntimeWarning,
                stacklevel=3,
            )
        return width

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
        if configured != self._width:
            origin = (
                f"PgMemory(dim={self._dim}) stores 2·dim = {self._width}-wide HRR vectors"
                if self._embedder is None
                else f"the embedder is {self._width} dimensions wide"
            )
            raise ConfigurationError(
                f"TULIP_MEMORY['VECTOR_DIMENSIONS'] is {configured} (the width of the vector "
                f"column), but {origin}. Set VECTOR_DIMENSIONS = {self._width} before running "
                "the migrations"
                + (f", or pass dim={configured // 2}." if self._embedder is None else ".")
            )

    @property
    def capabilities(self) -> StoreCapabilities:
        return StoreCapabilities(
            search=True,
            semantic_search=True,
            embedding_dimension=self._width,
            list_namespaces=True,
            batch_operations=True,
            transactions=True,
        )

    # --- helpers ----------------------------------------------------------------------

    async def _run(self, func: Callable[..., T], *args: Any) -> T:
        return await sync_to_async(func, thread_sensitive=True)(*args)

    @staticmethod
    def _tenant_of(namespace: Namespace, *, name: str = "namespace") -> str:
        try:
            return validate_tenant(namespace[0])
        except ValueError as exc:
            raise ValueError(f"{name}[0] is the tenant: {exc}") from None

    def _items(self) -> Any:
        from tulip_memory.models.store import MemoryItem

        return MemoryItem.objects.using(self.using)

    def _atomic(self, tenant: str) -> Any:
        from tulip_memory.tenancy import tenant_atomic

        return tenant_atomic(tenant, using=self.using)

    def _checked_vector(self, values: Sequence[float], *, name: str) -> np.ndarray:
        """A caller's vector, checked number by number (messages name the index)."""
        checked = validate_embedding(values, dimension=self._width, name=name)
        return np.asarray(checked, dtype=np.float32)

    def _encoded_vector(self, values: Any, *, name: str) -> np.ndarray:
        """An encoder's vector (embedder or HRR), checked with numpy: the bulk path.

        float32, as pgvector stores it; read-only, since the encoding cache shares it.
        """
        try:
            array = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{name} is not a sequence of numbers") from None
        if array.ndim != 1 or array.shape[0] != self._width:
            raise ValueError(f"{name} has shape {array.shape}, the store expects ({self._width},)")
        finite = np.isfinite(array)
        if not finite.all():
            index = int(np.argmin(finite))
            raise ValueError(f"{name}[{index}] must be finite, got {array[index]}")
        if not array.any():
            raise ValueError(f"{name} must not be all zeros (cosine similarity is undefined)")
        vector = array.astype(np.float32)
        vector.setflags(write=False)
        return vector

    @staticmethod
    def _literal(vector: np.ndarray) -> str:
        return "[" + ",".join(map(repr, vector.tolist())) + "]"

    def _hrr_vector(self, tokens: Sequence[str]) -> np.ndarray | None:
        from tulip_memory.store import hrr

        phases = hrr.encode_tokens(list(tokens), self._dim)
        if phases is None:
            return None
        return self._encoded_vector(hrr.phases_to_vector(phases), name="HRR vector")

    async def _encode(self, texts: Sequence[str]) -> list[np.ndarray | None]:
        """The vector of each text; None for a text without any word."""
        if self._embedder is None:
            return [self._hrr_vector(tokenize(text)) for text in texts]
        wanted = [i for i, text in enumerate(texts) if tokenize(text)]
        out: list[np.ndarray | None] = [None] * len(texts)
        if wanted:
            vectors = await self._embedder.embed_batch([texts[i] for i in wanted])
            if len(vectors) != len(wanted):
                raise ValueError(
                    f"embedder returned {len(vectors)} vectors for {len(wanted)} texts"
                )
            for i, vector in zip(wanted, vectors, strict=True):
                out[i] = self._encoded_vector(vector, name="embedder output")
        return out

    async def _encode_cached(self, tenant: str, text: str) -> np.ndarray | None:
        """One text's vector through the LRU cache, keyed by (tenant, text)."""
        key = (tenant, text)
        if self._cache_size:
            with self._cache_lock:
                if key in self._cache:
                    self._cache.move_to_end(key)
                    return self._cache[key]
        if self._embedder is None:
            vector = self._hrr_vector(tokenize(text))
        elif not tokenize(text):
            vector = None
        else:
            vector = self._encoded_vector(await self._embedder.embed(text), name="embedder output")
        if self._cache_size:
            with self._cache_lock:
                self._cache[key] = vector
                self._cache.move_to_end(key)
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return vector

    def _row(self, prepared: PreparedPut, text: str, vector: np.ndarray | None, source: str) -> Any:
        from tulip_memory.models.store import UpsertRow, encode_namespace, search_text_of

        return UpsertRow(
            tenant=prepared.namespace[0],
            namespace=encode_namespace(prepared.namespace),
            key=prepared.key,
            value_json=prepared.value_json,
            metadata_json=prepared.metadata_json,
            search_text=search_text_of(tokenize(text)),
            embedding=vector,
            embedding_source=source if vector is not None else "",
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

    # --- writes -----------------------------------------------------------------------

    def _write_sync(self, rows_by_tenant: dict[str, list[Any]]) -> None:
        from django.db import transaction

        # One tenant (the usual case): just its pinned transaction; several: one outer
        # transaction, so that the batch is all or nothing.
        with transaction.atomic(using=self.using) if len(rows_by_tenant) > 1 else nullcontext():
            for tenant, rows in rows_by_tenant.items():
                with self._atomic(tenant):
                    self._upsert_rounds(rows)

    def _upsert_rounds(self, rows: list[Any]) -> None:
        # A key repeated in one batch is written once per occurrence, in order (so that its
        # version counts every write and "newest" follows the batch order): the batch is
        # cut into consecutive runs without a repeated key, one statement each — one in
        # all when no key repeats.
        run: list[Any] = []
        seen: set[tuple[str, str]] = set()
        for row in rows:
            identity = (row.namespace, row.key)
            if identity in seen:
                self._items().upsert(run)
                run, seen = [], set()
            run.append(row)
            seen.add(identity)
        self._items().upsert(run)

    async def put(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Any,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        prepared = prepare_put(namespace, key, value, metadata)
        tenant = self._tenant_of(prepared.namespace)
        text = value_text(json.loads(prepared.value_json))
        vector = await self._encode_cached(tenant, text)
        await self._run(
            self._write_sync, {tenant: [self._row(prepared, text, vector, self._source)]}
        )

    async def put_batch(
        self, items: list[tuple[tuple[str, ...], str, Any, dict[str, Any] | None]]
    ) -> None:
        """All items in one transaction: one bulk upsert statement per tenant."""
        prepared = prepare_batch(items)
        for index, one in enumerate(prepared):
            self._tenant_of(one.namespace, name=f"items[{index}] namespace")
        if not prepared:
            return
        texts = [value_text(json.loads(one.value_json)) for one in prepared]
        vectors = await self._encode(texts)
        rows_by_tenant: dict[str, list[Any]] = defaultdict(list)
        for one, text, vector in zip(prepared, texts, vectors, strict=True):
            rows_by_tenant[one.namespace[0]].append(self._row(one, text, vector, self._source))
        await self._run(self._write_sync, dict(rows_by_tenant))

    async def put_with_embedding(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Any,
        embedding: list[float],
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """``put`` with the caller's vector (``capabilities.embedding_dimension`` wide).

        With an embedder the vector is taken to be that embedder's (text search ranks it);
        without one it is marked external: ``search_by_embedding`` ranks it, a text
        ``search`` finds it by its words.
        """
        prepared = prepare_put(namespace, key, value, metadata)
        tenant = self._tenant_of(prepared.namespace)
        vector = self._checked_vector(embedding, name="embedding")
        source = self._source if self._embedder is not None else "external"
        text = value_text(json.loads(prepared.value_json))
        await self._run(self._write_sync, {tenant: [self._row(prepared, text, vector, source)]})

    def _delete_sync(self, namespace: Namespace, key: str | None) -> int:
        with self._atomic(namespace[0]):
            rows = self._items().for_namespace(namespace)
            if key is not None:
                rows = rows.filter(key=key)
            return rows.clear()

    async def delete(self, namespace: tuple[str, ...], key: str) -> bool:
        namespace, key = validate_namespace(namespace), validate_key(key)
        self._tenant_of(namespace)
        return await self._run(self._delete_sync, namespace, key) > 0

    async def clear_namespace(self, namespace: tuple[str, ...]) -> int:
        """Delete every item of ``namespace`` (not its children) in one statement."""
        namespace = validate_namespace(namespace)
        self._tenant_of(namespace)
        return await self._run(self._delete_sync, namespace, None)

    # --- reads ------------------------------------------------------------------------

    def _get_sync(self, namespace: Namespace, key: str) -> StoreItem | None:
        with self._atomic(namespace[0]):
            row = self._items().for_namespace(namespace).filter(key=key).first()
        return None if row is None else self._item(namespace, row)

    async def get_item(self, namespace: tuple[str, ...], key: str) -> StoreItem | None:
        namespace, key = validate_namespace(namespace), validate_key(key)
        self._tenant_of(namespace)
        return await self._run(self._get_sync, namespace, key)

    async def get(self, namespace: tuple[str, ...], key: str) -> Any | None:
        item = await self.get_item(namespace, key)
        return None if item is None else item.value

    def _exists_sync(self, namespace: Namespace, key: str) -> bool:
        with self._atomic(namespace[0]):
            return self._items().for_namespace(namespace).filter(key=key).exists()

    async def exists(self, namespace: tuple[str, ...], key: str) -> bool:
        namespace, key = validate_namespace(namespace), validate_key(key)
        self._tenant_of(namespace)
        return await self._run(self._exists_sync, namespace, key)

    def _get_batch_sync(
        self, pairs_by_tenant: dict[str, list[tuple[Namespace, str]]]
    ) -> dict[Any, Any]:
        from tulip_memory.models.store import encode_namespace

        found: dict[tuple[Namespace, str], Any] = {}
        for tenant, pairs in pairs_by_tenant.items():
            wanted = {(encode_namespace(ns), key): (ns, key) for ns, key in pairs}
            with self._atomic(tenant):
                rows = self._items().for_keys(pairs).values_list("namespace", "key", "value")
                for path, key, value in rows:
                    found[wanted[(path, key)]] = value
        return found

    async def get_batch(
        self, keys: list[tuple[tuple[str, ...], str]]
    ) -> dict[tuple[tuple[str, ...], str], Any]:
        """One query per tenant (one query for a batch of one tenant)."""
        pairs = validate_key_list(keys)
        by_tenant: dict[str, list[tuple[Namespace, str]]] = defaultdict(list)
        for index, (namespace, key) in enumerate(pairs):
            by_tenant[self._tenant_of(namespace, name=f"keys[{index}] namespace")].append(
                (namespace, key)
            )
        if not pairs:
            return {}
        return await self._run(self._get_batch_sync, dict(by_tenant))

    def _list_keys_sync(self, namespace: Namespace, limit: int) -> list[str]:
        with self._atomic(namespace[0]):
            rows = self._items().for_namespace(namespace).order_by("-updated_at", "key")
            return list(rows.values_list("key", flat=True)[:limit])

    async def list_keys(self, namespace: tuple[str, ...], limit: int = 100) -> list[str]:
        namespace, limit = validate_namespace(namespace), validate_limit(limit)
        self._tenant_of(namespace)
        return await self._run(self._list_keys_sync, namespace, limit)

    def _list_namespaces_sync(self, tenant: str, prefix: Namespace, limit: int) -> list[Namespace]:
        from tulip_memory.models.store import decode_namespace

        with self._atomic(tenant):
            paths = list(self._items().under_prefix(prefix).namespace_paths()[:limit])
        return sorted(decode_namespace(path) for path in paths)

    async def list_namespaces(
        self, prefix: tuple[str, ...] | None = None, limit: int = 100
    ) -> list[tuple[str, ...]]:
        """Namespaces of one tenant: ``prefix[0]``, else the one bound by ``tenant_context``.

        Row-level security shows a transaction one tenant only, so a listing across
        tenants does not exist; without a prefix and a bound tenant this raises
        :class:`~tulip_memory.exceptions.TenantError`.
        """
        prefix, limit = validate_namespace_prefix(prefix), validate_limit(limit)
        if prefix:
            tenant = self._tenant_of(prefix, name="prefix")
        else:
            from tulip_memory.exceptions import TenantError

            bound = current_tenant()
            if bound is None:
                raise TenantError(
                    "list_namespaces() without a prefix lists the namespaces of the tenant "
                    "bound by tenant_context(); none is bound. Pass prefix=(tenant, ...)."
                )
            tenant = bound
        return await self._run(self._list_namespaces_sync, tenant, prefix, limit)

    # --- search -----------------------------------------------------------------------

    def _search_sync(
        self,
        tenant: str,
        namespaces: list[Namespace],
        limit: int,
        vector: str | None,
        tokens: list[str],
    ) -> list[Any]:
        from tulip_memory.models.store import encode_namespace

        with self._atomic(tenant):
            return self._items().search_paths(
                tenant,
                [encode_namespace(ns) for ns in namespaces],
                limit,
                vector=vector,
                source=self._source,
                tokens=tokens,
            )

    async def search(
        self, namespace: tuple[str, ...], query: str | None = None, limit: int = 10
    ) -> list[StoreItem]:
        """Items of ``namespace`` nearest to ``query`` (newest first without a query)."""
        validate_namespace(namespace)
        return (await self.search_many([namespace], query=query, limit=limit))[0]

    async def search_many(
        self,
        namespaces: Sequence[tuple[str, ...]],
        query: str | None = None,
        limit: int = 10,
    ) -> list[list[StoreItem]]:
        """``search`` over several namespaces of ONE tenant: one statement, one encoding."""
        namespaces = validate_namespaces(namespaces)
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
        tokens = sorted(set(tokenize(query or "")))[:_MAX_QUERY_TOKENS]
        encoded = await self._encode_cached(tenant, query) if tokens and query else None
        vector = None if encoded is None else self._literal(encoded)
        rows = await self._run(self._search_sync, tenant, namespaces, limit, vector, tokens)
        out: list[list[StoreItem]] = [[] for _ in namespaces]
        lexical = False
        for row in rows:
            out[row.index].append(self._item(namespaces[row.index], row))
            lexical = lexical or row.lexical
        if lexical and not self._lexical_warned:
            self._lexical_warned = True
            logger.warning(
                "PgMemory: search matched rows without a %s vector by their words only "
                "(rows with no text, or written before this encoder was configured); "
                "re-put them to rank them by vector.",
                self._source,
            )
        return out

    def _search_by_embedding_sync(
        self,
        namespace: Namespace,
        vector: list[float],
        limit: int,
        threshold: float | None,
        metadata_filter: dict[str, Any],
    ) -> list[SemanticSearchResult]:
        from django.db.models.fields.json import KeyTransform

        with self._atomic(namespace[0]):
            rows = self._items().for_namespace(namespace).ranked_by(vector)
            if threshold is not None:
                rows = rows.filter(distance__lte=1.0 - threshold)
            for index, (field, expected) in enumerate(metadata_filter.items()):
                alias = f"_metadata_{index}"
                rows = rows.alias(**{alias: KeyTransform(field, "metadata")}).filter(
                    **{alias: expected}
                )
            found = list(rows.defer("embedding", "search_text")[:limit])
        return [
            SemanticSearchResult(
                item=self._item(namespace, row), score=1.0 - row.distance, distance=row.distance
            )
            for row in found
        ]

    async def search_by_embedding(
        self,
        namespace: tuple[str, ...],
        query_embedding: list[float],
        limit: int = 10,
        threshold: float | None = None,
        metadata_filter: dict[str, Any] | None = None,
    ) -> list[SemanticSearchResult]:
        """Items of ``namespace`` with a vector, by exact cosine similarity (highest first)."""
        namespace = validate_namespace(namespace)
        self._tenant_of(namespace)
        vector = validate_embedding(query_embedding, dimension=self._width, name="query_embedding")
        limit, threshold = validate_limit(limit), validate_threshold(threshold)
        filters = validate_metadata_filter(metadata_filter)
        return await self._run(
            self._search_by_embedding_sync, namespace, vector, limit, threshold, filters
        )

    def _get_embedding_sync(self, namespace: Namespace, key: str) -> list[float] | None:
        with self._atomic(namespace[0]):
            rows = self._items().for_namespace(namespace).filter(key=key)
            vector = rows.values_list("embedding", flat=True).first()
        return None if vector is None else [float(v) for v in vector]

    async def get_embedding(self, namespace: tuple[str, ...], key: str) -> list[float] | None:
        namespace, key = validate_namespace(namespace), validate_key(key)
        self._tenant_of(namespace)
        return await self._run(self._get_embedding_sync, namespace, key)

    async def close(self) -> None:
        """Nothing to release: connections belong to Django (``CONN_MAX_AGE``); idempotent."""
        with self._cache_lock:
            self._cache.clear()
