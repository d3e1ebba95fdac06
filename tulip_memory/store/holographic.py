"""HolographicStore: durable memory in one SQLite file, with no other infrastructure.

Each item is a row of ``tulip_items`` plus an FTS5 index entry (external-content table kept
in sync by triggers) and, when numpy is importable, an HRR phase vector
(:mod:`tulip_memory.store.hrr`, 2 bytes per dimension). The file runs in WAL mode, so
readers in other processes do not block the writer.

Search fuses two rankings with reciprocal-rank fusion (RRF, k = 60): FTS5's BM25 over the
query's terms (OR-ed, so an item need not contain every word) picks the candidates — the
``max(50, 5 * limit)`` best — and the HRR similarity of each candidate to the query ranks
them a second time; the fused score is ``1 / (60 + bm25_rank) + 1 / (60 + hrr_rank)``.
BM25 rewards rare words; HRR rewards the share of the query the item covers, normalised by
length, so an item holding all the query's words beats one holding the rarest word alone.
``search(..., mode="lexical")`` and ``mode="hrr"`` (an exact HRR scan of the namespace)
expose each ranking alone. Without numpy the store is FTS5-only and warns once per process.
In a namespace of more than ``ROW_BUDGET`` (4000) items the candidate search leaves out the
query's most common terms (BM25 costs microseconds per matching row and a frequent word
matches half of a namespace); HRR still ranks the candidates on every term. This keeps a
search at 100k items in one namespace under 50 ms (see ``bench/store.py``).

Semantic search stores the caller's embedding as float32 and ranks by an exact cosine scan
with numpy. Its width is fixed by the first embedding written to the file (or
``embedding_dim=``) and kept in the file's ``tulip_meta`` table with the HRR ``dim``; a
file written with another ``dim`` is refused.

One connection guarded by a lock serves every thread; each call runs in a worker thread
(``asyncio.to_thread``), so the store is usable from several event loops at once and never
blocks one. Several processes may open the same file (SQLite locking, 5 s busy timeout).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from tulip_memory.store.base import (
    BaseStore,
    BatchItem,
    SemanticSearchResult,
    StoreCapabilities,
    StoreItem,
)
from tulip_memory.store.holographic_sql import (
    COUNT_MATCHES,
    COUNT_NAMESPACE,
    ROW_BUDGET,
    SCHEMA,
    Transaction,
    fts_query,
    metadata_matches,
    ns_prefix_text,
    ns_to_text,
    scope_token,
)
from tulip_memory.store.ranking import cosine_top, rrf_order
from tulip_memory.store.text import tokenize, value_text
from tulip_memory.store.timestamps import WriteClock, from_micros, to_micros
from tulip_memory.store.validation import (
    PreparedPut,
    decode_json,
    prepare_batch,
    prepare_put,
    validate_embedding,
    validate_key,
    validate_limit,
    validate_metadata_filter,
    validate_namespace,
    validate_namespace_prefix,
    validate_namespaces,
    validate_query,
    validate_threshold,
)

__all__ = ["HolographicStore"]

T = TypeVar("T")

DEFAULT_DIM = 512  # = hrr.DEFAULT_DIM, repeated here because hrr cannot import without numpy
SEARCH_MODES = ("fused", "lexical", "hrr")
_ITEM_COLUMNS = "key, value, metadata, created_at, updated_at, version"
_numpy_warning_given = False


def _load_hrr() -> ModuleType | None:
    """The HRR module, or None (once-per-process warning) when numpy is not importable."""
    global _numpy_warning_given  # noqa: PLW0603 - one warning per process, by design
    try:
        from tulip_memory.store import hrr
    except ImportError:
        if not _numpy_warning_given:
            _numpy_warning_given = True
            warnings.warn(
                "HolographicStore: numpy is not installed, so search is FTS5-only (no HRR "
                "vectors) and semantic search is unavailable; install numpy to enable them.",
                RuntimeWarning,
                stacklevel=3,
            )
        return None
    return hrr


class HolographicStore(BaseStore):
    """SQLite + FTS5 + HRR store; ``path=":memory:"`` keeps the database in memory."""

    def __init__(
        self,
        path: str | Path = ":memory:",
        *,
        dim: int = DEFAULT_DIM,
        embedding_dim: int | None = None,
    ) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise ValueError(f"dim must be an int >= 1, got {dim!r}")
        if embedding_dim is not None and (
            isinstance(embedding_dim, bool)
            or not isinstance(embedding_dim, int)
            or embedding_dim < 1
        ):
            raise ValueError(f"embedding_dim must be an int >= 1 or None, got {embedding_dim!r}")
        # Modules, or None without numpy (typed Any: every use is behind that check).
        self._hrr: Any = _load_hrr()
        self._np: Any = None
        if self._hrr is not None:
            import numpy

            self._np = numpy
        self._dim = dim
        self._path = str(path)
        self._lock = threading.Lock()
        self._clock = WriteClock()
        self._conn: sqlite3.Connection | None = sqlite3.connect(
            self._path, check_same_thread=False, isolation_level=None, timeout=5.0
        )
        try:
            self._setup(embedding_dim)
        except BaseException:
            self._conn.close()
            self._conn = None
            raise

    def _setup(self, embedding_dim: int | None) -> None:
        conn = self._connection()
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.executescript(SCHEMA)
        with self._transaction() as cur:
            meta = dict(cur.execute("SELECT name, value FROM tulip_meta").fetchall())
            stored_dim = meta.get("dim")
            if stored_dim is None:
                cur.execute("INSERT INTO tulip_meta VALUES ('dim', ?)", (str(self._dim),))
            elif int(stored_dim) != self._dim:
                raise ValueError(
                    f"{self._path} holds HRR vectors of dim={stored_dim}; open it with that dim "
                    f"(got dim={self._dim})"
                )
            stored_width = meta.get("embedding_dim")
            if stored_width is None and embedding_dim is not None:
                cur.execute(
                    "INSERT INTO tulip_meta VALUES ('embedding_dim', ?)", (str(embedding_dim),)
                )
            elif stored_width is not None and embedding_dim not in (None, int(stored_width)):
                raise ValueError(
                    f"{self._path} holds embeddings of width {stored_width}, "
                    f"not embedding_dim={embedding_dim}"
                )
            self._embedding_dim = int(stored_width) if stored_width else embedding_dim

    def __repr__(self) -> str:
        return f"HolographicStore({self._path!r}, dim={self._dim})"

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def capabilities(self) -> StoreCapabilities:
        return StoreCapabilities(
            search=True,
            semantic_search=self._hrr is not None,
            embedding_dimension=self._embedding_dim,
            list_namespaces=True,
            batch_operations=True,
            transactions=True,
        )

    # --- plumbing ---------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError(f"{self!r} is closed")
        return self._conn

    def _transaction(self) -> Transaction:
        return Transaction(self._connection())

    async def _run(self, func: Callable[[], T]) -> T:
        """Run ``func`` under the store's lock in a worker thread."""

        def locked() -> T:
            with self._lock:
                return func()

        return await asyncio.to_thread(locked)

    async def close(self) -> None:
        def close_connection() -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        await self._run(close_connection)

    # --- writes -----------------------------------------------------------------------

    def _encode(self, prepared: PreparedPut) -> tuple[str, bytes | None]:
        tokens = tokenize(value_text(decode_json(prepared.value_json)))
        hrr_blob = None
        if self._hrr is not None:
            phases = self._hrr.encode_tokens(tokens, self._dim)
            hrr_blob = None if phases is None else self._hrr.to_bytes(phases)
        return " ".join(tokens), hrr_blob

    def _write(
        self,
        cur: sqlite3.Cursor,
        prepared: PreparedPut,
        encoded: tuple[str, bytes | None],
        embedding: bytes | None,
    ) -> None:
        ns = ns_to_text(prepared.namespace)
        content, hrr_blob = encoded
        row = cur.execute(
            "SELECT updated_at, version FROM tulip_items WHERE ns = ? AND key = ?",
            (ns, prepared.key),
        ).fetchone()
        if row is None:
            now = to_micros(self._clock.tick())
            cur.execute(
                "INSERT INTO tulip_items (ns, key, value, metadata, created_at, updated_at, "
                "version, scope, content, hrr, embedding) "
                "VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?)",
                (
                    *(ns, prepared.key, prepared.value_json, prepared.metadata_json, now, now),
                    *(scope_token(ns), content, hrr_blob, embedding),
                ),
            )
        else:
            now = to_micros(self._clock.tick(after=from_micros(row[0])))
            cur.execute(
                "UPDATE tulip_items SET value = ?, metadata = ?, updated_at = ?, version = ?, "
                "content = ?, hrr = ?, embedding = ? WHERE ns = ? AND key = ?",
                (
                    *(prepared.value_json, prepared.metadata_json, now, row[1] + 1),
                    *(content, hrr_blob, embedding, ns, prepared.key),
                ),
            )

    async def put(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Any,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        prepared = prepare_put(namespace, key, value, metadata)
        encoded = self._encode(prepared)

        def work() -> None:
            with self._transaction() as cur:
                self._write(cur, prepared, encoded, None)

        await self._run(work)

    async def put_batch(self, items: list[BatchItem]) -> None:
        """Every item is validated first, then all are written in one transaction."""
        prepared = prepare_batch(items)
        encoded = [self._encode(one) for one in prepared]

        def work() -> None:
            with self._transaction() as cur:
                for one, enc in zip(prepared, encoded, strict=True):
                    self._write(cur, one, enc, None)

        await self._run(work)

    async def put_with_embedding(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Any,
        embedding: list[float],
        metadata: dict[str, Any] | None = None,
    ) -> None:
        if self._np is None:
            await super().put_with_embedding(namespace, key, value, embedding, metadata)
        prepared = prepare_put(namespace, key, value, metadata)
        vector = validate_embedding(embedding, dimension=self._embedding_dim)
        with self._np.errstate(over="ignore"):  # an overflow becomes inf, refused below
            as_float32 = self._np.asarray(vector, dtype="<f4")
        if not self._np.isfinite(as_float32).all() or not as_float32.any():
            raise ValueError("embedding must be finite and not all zeros once stored as float32")
        blob = as_float32.tobytes()
        encoded = self._encode(prepared)

        def work() -> None:
            with self._transaction() as cur:
                if self._embedding_dim is None:
                    width = cur.execute(
                        "SELECT value FROM tulip_meta WHERE name = 'embedding_dim'"
                    ).fetchone()
                    if width is None:
                        cur.execute(
                            "INSERT INTO tulip_meta VALUES ('embedding_dim', ?)",
                            (str(len(vector)),),
                        )
                    self._embedding_dim = int(width[0]) if width else len(vector)
                    validate_embedding(vector, dimension=self._embedding_dim)
                self._write(cur, prepared, encoded, blob)

        await self._run(work)

    async def delete(self, namespace: tuple[str, ...], key: str) -> bool:
        ns = ns_to_text(validate_namespace(namespace))
        validate_key(key)

        def work() -> bool:
            with self._transaction() as cur:
                cur.execute("DELETE FROM tulip_items WHERE ns = ? AND key = ?", (ns, key))
                return cur.rowcount > 0

        return await self._run(work)

    async def clear_namespace(self, namespace: tuple[str, ...]) -> int:
        ns = ns_to_text(validate_namespace(namespace))

        def work() -> int:
            with self._transaction() as cur:
                cur.execute("DELETE FROM tulip_items WHERE ns = ?", (ns,))
                return cur.rowcount

        return await self._run(work)

    # --- reads ------------------------------------------------------------------------

    def _item(self, namespace: tuple[str, ...], row: Sequence[Any]) -> StoreItem:
        key, value, metadata, created_at, updated_at, version = row[:6]
        return StoreItem(
            namespace=namespace,
            key=key,
            value=json.loads(value),
            metadata=json.loads(metadata),
            created_at=from_micros(created_at),
            updated_at=from_micros(updated_at),
            version=version,
        )

    def _fetch_one(self, namespace: tuple[str, ...], key: str, columns: str) -> Any:
        ns = ns_to_text(namespace)
        return (
            self._connection()
            .execute(f"SELECT {columns} FROM tulip_items WHERE ns = ? AND key = ?", (ns, key))
            .fetchone()
        )

    async def get_item(self, namespace: tuple[str, ...], key: str) -> StoreItem | None:
        validate_namespace(namespace)
        validate_key(key)
        row = await self._run(lambda: self._fetch_one(namespace, key, _ITEM_COLUMNS))
        return None if row is None else self._item(namespace, row)

    async def get(self, namespace: tuple[str, ...], key: str) -> Any | None:
        validate_namespace(namespace)
        validate_key(key)
        row = await self._run(lambda: self._fetch_one(namespace, key, "value"))
        return None if row is None else json.loads(row[0])

    async def exists(self, namespace: tuple[str, ...], key: str) -> bool:
        validate_namespace(namespace)
        validate_key(key)
        return await self._run(lambda: self._fetch_one(namespace, key, "1")) is not None

    async def get_embedding(self, namespace: tuple[str, ...], key: str) -> list[float] | None:
        if self._np is None:
            await super().get_embedding(namespace, key)
        validate_namespace(namespace)
        validate_key(key)
        row = await self._run(lambda: self._fetch_one(namespace, key, "embedding"))
        if row is None or row[0] is None:
            return None
        return self._np.frombuffer(row[0], dtype="<f4").astype(float).tolist()

    def _newest(self, ns: str, limit: int, columns: str) -> list[Any]:
        return (
            self._connection()
            .execute(
                f"SELECT {columns} FROM tulip_items WHERE ns = ? "
                "ORDER BY updated_at DESC, key LIMIT ?",
                (ns, limit),
            )
            .fetchall()
        )

    async def list_keys(self, namespace: tuple[str, ...], limit: int = 100) -> list[str]:
        ns = ns_to_text(validate_namespace(namespace))
        validate_limit(limit)
        rows = await self._run(lambda: self._newest(ns, limit, "key"))
        return [row[0] for row in rows]

    async def list_namespaces(
        self,
        prefix: tuple[str, ...] | None = None,
        limit: int = 100,
    ) -> list[tuple[str, ...]]:
        start = validate_namespace_prefix(prefix)
        validate_limit(limit)
        if start:
            exact, head = ns_to_text(start), ns_prefix_text(start)
            sql = "SELECT DISTINCT ns FROM tulip_items WHERE ns = ? OR substr(ns, 1, ?) = ?"
            params: tuple[Any, ...] = (exact, len(head), head)
        else:
            sql, params = "SELECT DISTINCT ns FROM tulip_items", ()
        rows = await self._run(lambda: self._connection().execute(sql, params).fetchall())
        return sorted(tuple(json.loads(row[0])) for row in rows)[:limit]

    # --- search -----------------------------------------------------------------------

    def _search_one(
        self, namespace: tuple[str, ...], terms: list[str], limit: int, mode: str
    ) -> list[StoreItem]:
        ns = ns_to_text(namespace)
        if not terms:
            return [self._item(namespace, row) for row in self._newest(ns, limit, _ITEM_COLUMNS)]
        if self._hrr is None:
            mode = "lexical"
        if mode == "hrr":
            return self._hrr_scan(namespace, ns, terms, limit)
        pool = limit if mode == "lexical" else max(50, 5 * limit)
        candidate_terms = self._candidate_terms(ns, terms)
        rows = (
            self._connection()
            .execute(
                f"SELECT {_ITEM_COLUMNS}, hrr, content FROM ("
                "SELECT rowid AS id, bm25(tulip_items_fts, 0.0, 1.0) AS score FROM tulip_items_fts "
                "WHERE tulip_items_fts MATCH ? ORDER BY score LIMIT ?"
                ") AS hits JOIN tulip_items ON tulip_items.rowid = hits.id "
                "ORDER BY hits.score, updated_at DESC, key",
                (fts_query(ns, candidate_terms), pool),
            )
            .fetchall()
        )
        if mode == "lexical" or not rows:
            return [self._item(namespace, row) for row in rows[:limit]]
        # Reciprocal-rank fusion of the BM25 order (rows) and the HRR order of the same rows.
        similarity = self._similarities(terms, [(row[6], row[7]) for row in rows])
        best = rrf_order(len(rows), similarity)[:limit]
        return [self._item(namespace, rows[i]) for i in best]

    def _candidate_terms(self, ns: str, terms: list[str]) -> list[str]:
        """The query terms whose matches BM25 ranks: all of them unless the namespace is
        large, then the rarest ones whose matches add up to at most ``ROW_BUDGET`` rows
        (at least the rarest term)."""
        conn = self._connection()
        cap = ROW_BUDGET + 1
        if len(terms) == 1 or conn.execute(COUNT_NAMESPACE, (ns, cap)).fetchone()[0] < cap:
            return terms
        counts = {
            term: conn.execute(COUNT_MATCHES, (fts_query(ns, [term]), cap)).fetchone()[0]
            for term in terms
        }
        chosen: list[str] = []
        total = 0
        for term in sorted(terms, key=lambda term: (counts[term], term)):
            if chosen and total + counts[term] > ROW_BUDGET:
                break
            chosen.append(term)
            total += counts[term]
        return chosen

    def _phases(self, blob: bytes | None, content: str) -> Any:
        """Stored phases, or phases encoded now for rows written without numpy."""
        if blob is not None:
            return self._hrr.from_bytes(blob, self._dim)
        phases = self._hrr.encode_tokens(content.split(), self._dim)
        return self._np.zeros(self._dim) if phases is None else phases

    def _similarities(self, terms: list[str], rows: list[tuple[bytes | None, str]]) -> Any:
        query = self._hrr.encode_tokens(terms, self._dim)
        matrix = self._np.stack([self._phases(blob, content) for blob, content in rows])
        return self._hrr.similarities(query, matrix)

    def _hrr_scan(
        self, namespace: tuple[str, ...], ns: str, terms: list[str], limit: int
    ) -> list[StoreItem]:
        """Exact HRR ranking of every item of the namespace (in chunks of 4096 rows)."""
        np = self._np
        query = self._hrr.encode_tokens(terms, self._dim)
        cursor = self._connection().execute(
            "SELECT rowid, hrr, content FROM tulip_items WHERE ns = ?", (ns,)
        )
        ids: list[Any] = []
        scores: list[Any] = []
        while chunk := cursor.fetchmany(4096):
            matrix = np.stack([self._phases(blob, content) for _, blob, content in chunk])
            ids.append(np.fromiter((row[0] for row in chunk), dtype=np.int64, count=len(chunk)))
            scores.append(self._hrr.similarities(query, matrix))
        if not ids:
            return []
        all_ids, all_scores = np.concatenate(ids), np.concatenate(scores)
        top = np.argsort(-all_scores, kind="stable")[:limit]
        wanted = [int(all_ids[i]) for i in top]
        rows = (
            self._connection()
            .execute(
                f"SELECT rowid, {_ITEM_COLUMNS} FROM tulip_items "
                f"WHERE rowid IN ({','.join('?' * len(wanted))})",
                wanted,
            )
            .fetchall()
        )
        by_id = {row[0]: row[1:] for row in rows}
        return [self._item(namespace, by_id[row_id]) for row_id in wanted]

    async def search(
        self,
        namespace: tuple[str, ...],
        query: str | None = None,
        limit: int = 10,
        *,
        mode: str = "fused",
    ) -> list[StoreItem]:
        """Items ranked for ``query``: ``mode`` is ``"fused"`` (RRF of BM25 and HRR, the
        default), ``"lexical"`` (BM25 only) or ``"hrr"`` (exact HRR scan)."""
        validate_namespace(namespace)
        validate_query(query)
        validate_limit(limit)
        if mode not in SEARCH_MODES:
            raise ValueError(f"mode must be one of {SEARCH_MODES}, got {mode!r}")
        terms = sorted(set(tokenize(query or "")))
        return await self._run(lambda: self._search_one(namespace, terms, limit, mode))

    async def search_many(
        self,
        namespaces: Sequence[tuple[str, ...]],
        query: str | None = None,
        limit: int = 10,
    ) -> list[list[StoreItem]]:
        """One result list per namespace, answered under one lock acquisition."""
        checked = validate_namespaces(namespaces)
        validate_query(query)
        validate_limit(limit)
        terms = sorted(set(tokenize(query or "")))
        return await self._run(
            lambda: [self._search_one(ns, terms, limit, "fused") for ns in checked]
        )

    async def search_by_embedding(
        self,
        namespace: tuple[str, ...],
        query_embedding: list[float],
        limit: int = 10,
        threshold: float | None = None,
        metadata_filter: dict[str, Any] | None = None,
    ) -> list[SemanticSearchResult]:
        """Exact cosine scan of the namespace's embeddings; ``score`` is the cosine
        similarity and ``distance`` ``1 - score``."""
        if self._np is None:
            await super().search_by_embedding(namespace, query_embedding, limit)
        ns = ns_to_text(validate_namespace(namespace))
        query = validate_embedding(query_embedding, dimension=self._embedding_dim)
        validate_limit(limit)
        minimum = validate_threshold(threshold)
        wanted = validate_metadata_filter(metadata_filter)

        def work() -> list[SemanticSearchResult]:
            np = self._np
            rows = [
                row
                for row in self._connection().execute(
                    f"SELECT {_ITEM_COLUMNS}, embedding FROM tulip_items "
                    "WHERE ns = ? AND embedding IS NOT NULL",
                    (ns,),
                )
                if metadata_matches(json.loads(row[2]), wanted)
            ]
            if not rows:
                return []
            matrix = np.stack([np.frombuffer(row[6], dtype="<f4") for row in rows])
            return [
                SemanticSearchResult(self._item(namespace, rows[i]), score, 1.0 - score)
                for i, score in cosine_top(matrix, query, limit, minimum)
            ]

        return await self._run(work)
