"""HolographicStore: durable memory in one SQLite file (WAL, FTS5, HRR vectors).

Search modes: see :meth:`HolographicStore.search`. Statements live in :mod:`.sql`, BM25
candidates in :mod:`.fts`, vectors in :mod:`.vectors`; docs/store.md is the guide.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tulip_memory.core.clock import Clock, MonotonicWallClock, from_micros, to_micros, utc_now
from tulip_memory.core.hrr import DEFAULT_DIM, validate_dim
from tulip_memory.core.namespaces import Namespace
from tulip_memory.core.numbers import is_int
from tulip_memory.core.text import STOP_WORDS, has_words, off_loop_when_long, tokenize, value_text
from tulip_memory.embeddings.base import embed_texts, embedder_source, query_vector_or_none
from tulip_memory.store.base import (
    TTL,
    BatchWriteStore,
    SemanticSearchResult,
    StoreCapabilities,
    StoreItem,
    Versions,
)
from tulip_memory.store.holographic import sql
from tulip_memory.store.holographic.fts import bm25_candidates
from tulip_memory.store.holographic.sql import (
    Transaction,
    metadata_matches,
    ns_prefix_text,
    ns_to_text,
    scope_token,
)
from tulip_memory.store.holographic.vectors import (
    embedding_blob,
    embedding_from_blob,
    embedding_similarities,
    embedding_top,
    hrr_blob,
    hrr_similarities,
    hrr_top,
)
from tulip_memory.store.instrumentation import swept
from tulip_memory.store.ranking import (
    HRR_WEIGHT,
    MODEL_WEIGHT,
    candidate_pool,
    fuse,
    nearest_and_scored,
)
from tulip_memory.store.validation import (
    PreparedPut,
    decode_json,
    validate_embedder,
    validate_embedder_vector,
    validate_embedding,
    validate_key,
    validate_limit,
    validate_namespace,
    validate_namespace_prefix,
    validate_query,
)

if TYPE_CHECKING:
    from tulip_memory.embeddings import BaseEmbedding

__all__ = ["HolographicStore"]

T = TypeVar("T")

SEARCH_MODES = ("lexical", "hybrid", "fused", "hrr")

# How a file is refused whose record of its vectors differs from the store's.
_REFUSALS = {
    "dim": "{path} holds HRR vectors of dim={stored}; open it with that dim (got dim={given})",
    "embedding_dim": "{path} holds embeddings of width {stored}, not embedding_dim={given}",
    "embedder": "{path} holds vectors of {stored}, not of {given}: open it with that embedder "
    "(or store into a new file)",
}


class HolographicStore(BatchWriteStore):
    """SQLite + FTS5 + HRR store; ``path=":memory:"`` keeps the database in memory."""

    def __init__(
        self,
        path: str | Path = ":memory:",
        *,
        dim: int = DEFAULT_DIM,
        embedding_dim: int | None = None,
        embedder: BaseEmbedding | None = None,
        clock: Clock = utc_now,
    ) -> None:
        validate_dim(dim)
        if not isinstance(path, str | os.PathLike) or not os.fspath(path):
            # str(None) would be a file named "None" in the working directory.
            raise ValueError(f"path must be a file path or ':memory:', got {path!r}")
        if not callable(clock):
            raise TypeError(f"clock must be a callable returning a datetime, got {clock!r}")
        self._now = clock
        if embedding_dim is not None and (not is_int(embedding_dim) or embedding_dim < 1):
            raise ValueError(f"embedding_dim must be an int >= 1 or None, got {embedding_dim!r}")
        self._embedder = validate_embedder(embedder)
        if embedder is not None:
            width = int(embedder.dimension)
            if embedding_dim is not None and embedding_dim != width:
                raise ValueError(
                    f"embedding_dim={embedding_dim} but the embedder's vectors are {width} wide"
                )
            embedding_dim = width
        self._dim = dim
        self._path = os.fspath(path)
        self._lock = threading.Lock()
        # Microseconds: how the file stores a timestamp (exact and sortable in SQLite).
        self._clock = MonotonicWallClock(resolution_ns=1_000)
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
        # The expiry clock of every statement (sql.LIVE), in microseconds.
        conn.create_function("tulip_now", 0, lambda: to_micros(self._now()))
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.executescript(sql.SCHEMA + sql.FTS_SCHEMA)
        if conn.execute(sql.HAS_EXPIRY_COLUMN).fetchone() is None:
            with self._transaction() as cur:  # re-checked: another process may have added it
                if cur.execute(sql.HAS_EXPIRY_COLUMN).fetchone() is None:
                    cur.execute(sql.ADD_EXPIRY_COLUMN)
        conn.execute(sql.EXPIRY_INDEX)
        if sql.FTS_TOKENIZER not in conn.execute(sql.SELECT_FTS_SCHEMA).fetchone()[0]:
            # A file from before stemming: its index is rebuilt from the rows.
            conn.executescript(
                f"BEGIN IMMEDIATE; {sql.DROP_FTS}; {sql.FTS_SCHEMA} {sql.REBUILD_FTS}; COMMIT;"
            )
        # What the file's vectors are: recorded by its first opening, then required. Two
        # models of one width compute vectors of different spaces: the file keeps the name
        # of the one whose vectors it holds.
        source = None if self._embedder is None else embedder_source(self._embedder)
        given = {"dim": self._dim, "embedding_dim": embedding_dim, "embedder": source}
        with self._transaction() as cur:
            meta = dict(cur.execute(sql.SELECT_META).fetchall())
            for name, value in given.items():
                stored = meta.get(name)
                if value is None:
                    continue
                if stored is None:
                    cur.execute(sql.INSERT_META, (name, str(value)))
                elif stored != str(value):
                    refusal = _REFUSALS[name].format(path=self._path, stored=stored, given=value)
                    raise ValueError(refusal)
        width = meta.get("embedding_dim")
        self._embedding_dim = int(width) if width else embedding_dim

    def __repr__(self) -> str:
        return f"HolographicStore({self._path!r}, dim={self._dim})"

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def capabilities(self) -> StoreCapabilities:
        return StoreCapabilities(
            search=True,
            semantic_search=True,
            embedding_dimension=self._embedding_dim,
            ttl=True,
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
        return " ".join(tokens), hrr_blob(tokens, self._dim)

    async def _encode_all(self, prepared: list[PreparedPut]) -> list[tuple[str, bytes | None]]:
        return await off_loop_when_long(
            sum(len(one.value_json) for one in prepared),
            lambda: [self._encode(one) for one in prepared],
        )

    async def _embed(self, prepared: list[PreparedPut]) -> list[bytes | None]:
        if self._embedder is None:
            return [None] * len(prepared)
        texts = [value_text(decode_json(one.value_json)) for one in prepared]
        width = self._embedding_dim
        checked = [
            None if vector is None else validate_embedder_vector(vector, dimension=width)
            for vector in await embed_texts(self._embedder, texts)
        ]
        return [None if values is None else embedding_blob(values) for values in checked]

    def _write(
        self,
        cur: sqlite3.Cursor,
        prepared: PreparedPut,
        encoded: tuple[str, bytes | None],
        embedding: bytes | None,
        ttl: timedelta | None,
    ) -> None:
        ns = ns_to_text(prepared.namespace)
        content, hrr = encoded
        expires_at = None if ttl is None else to_micros(self._now() + ttl)
        row = cur.execute(sql.SELECT_WRITE_STATE, (ns, prepared.key)).fetchone()
        if row is not None and not row[2]:  # expired: the item is gone, written anew
            cur.execute(sql.DELETE_ITEM, (ns, prepared.key)).fetchall()
            row = None
        if row is None:
            now = self._clock.tick()
            cur.execute(
                sql.INSERT_ITEM,
                (
                    *(ns, prepared.key, prepared.value_json, prepared.metadata_json, now, now),
                    *(scope_token(ns), content, hrr, embedding, expires_at),
                ),
            )
        else:
            now = self._clock.tick(after=row[0])
            cur.execute(
                sql.UPDATE_ITEM,
                (
                    *(prepared.value_json, prepared.metadata_json, now, row[1] + 1),
                    *(content, hrr, embedding, expires_at, ns, prepared.key),
                ),
            )

    async def _write_all(
        self, prepared: list[PreparedPut], ttl: timedelta | None, expected: Versions | None = None
    ) -> bool:
        encoded = await self._encode_all(prepared)
        embeddings = await self._embed(prepared)

        def work() -> bool:
            # One BEGIN IMMEDIATE transaction: it excludes every other writer of the file.
            with self._transaction() as cur:
                for (namespace, key), version in (expected or {}).items():
                    row = cur.execute(sql.SELECT_WRITE_STATE, (ns_to_text(namespace), key))
                    state = row.fetchone()
                    if (None if state is None or not state[2] else state[1]) != version:
                        return False
                for one, enc, embedding in zip(prepared, encoded, embeddings, strict=True):
                    self._write(cur, one, enc, embedding, ttl)
            return True

        return await self._run(work)

    async def _put_embedded(self, prepared: PreparedPut, embedding: list[float], ttl: TTL) -> None:
        vector = validate_embedding(embedding, dimension=self._embedding_dim)
        expiry = self._ttl(ttl)
        blob = embedding_blob(vector)
        [encoded] = await self._encode_all([prepared])

        def work() -> None:
            with self._transaction() as cur:
                if self._embedding_dim is None:
                    # The first embedding of the file fixes its width (another process may
                    # have fixed it since this one opened the file).
                    width = cur.execute(sql.SELECT_EMBEDDING_DIM).fetchone()
                    if width is None:
                        cur.execute(sql.INSERT_META, ("embedding_dim", str(len(vector))))
                    self._embedding_dim = int(width[0]) if width else len(vector)
                    validate_embedding(vector, dimension=self._embedding_dim)
                self._write(cur, prepared, encoded, blob, expiry)

        await self._run(work)

    async def delete(self, namespace: tuple[str, ...], key: str) -> bool:
        ns = ns_to_text(validate_namespace(namespace))
        validate_key(key)

        def work() -> bool:
            with self._transaction() as cur:
                return any(live for (live,) in cur.execute(sql.DELETE_ITEM, (ns, key)))

        return await self._run(work)

    async def clear_namespace(self, namespace: tuple[str, ...]) -> int:
        ns = ns_to_text(validate_namespace(namespace))

        def work() -> int:
            with self._transaction() as cur:
                return sum(bool(live) for (live,) in cur.execute(sql.DELETE_NAMESPACE, (ns,)))

        return await self._run(work)

    async def sweep_expired(self) -> int:
        started = time.perf_counter()

        def work() -> int:
            with self._transaction() as cur:
                cur.execute(sql.SWEEP_EXPIRED)
                return cur.rowcount

        return await swept(self, await self._run(work), started)

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

    async def _fetch_one(self, namespace: object, key: object, statement: str) -> Any:
        """The row ``statement`` (one of the ``SELECT_*`` by ns and key) reads, or None."""
        ns = ns_to_text(validate_namespace(namespace))
        checked = validate_key(key)
        return await self._run(
            lambda: self._connection().execute(statement, (ns, checked)).fetchone()
        )

    async def get_item(self, namespace: tuple[str, ...], key: str) -> StoreItem | None:
        row = await self._fetch_one(namespace, key, sql.SELECT_ITEM)
        return None if row is None else self._item(namespace, row)

    async def get(self, namespace: tuple[str, ...], key: str) -> Any | None:
        row = await self._fetch_one(namespace, key, sql.SELECT_VALUE)
        return None if row is None else json.loads(row[0])

    async def exists(self, namespace: tuple[str, ...], key: str) -> bool:
        return await self._fetch_one(namespace, key, sql.SELECT_EXISTS) is not None

    async def get_embedding(self, namespace: tuple[str, ...], key: str) -> list[float] | None:
        row = await self._fetch_one(namespace, key, sql.SELECT_EMBEDDING)
        return None if row is None or row[0] is None else embedding_from_blob(row[0])

    async def list_keys(self, namespace: tuple[str, ...], limit: int = 100) -> list[str]:
        ns = ns_to_text(validate_namespace(namespace))
        limit = validate_limit(limit)
        rows = await self._run(
            lambda: self._connection().execute(sql.NEWEST_KEYS, (ns, limit)).fetchall()
        )
        return [row[0] for row in rows]

    async def list_namespaces(
        self,
        prefix: tuple[str, ...] | None = None,
        limit: int = 100,
    ) -> list[tuple[str, ...]]:
        start = validate_namespace_prefix(prefix)
        limit = validate_limit(limit)
        if start:
            head = ns_prefix_text(start)
            statement = sql.LIST_NAMESPACES_UNDER
            params: tuple[Any, ...] = (ns_to_text(start), len(head), head)
        else:
            statement, params = sql.LIST_NAMESPACES, ()
        rows = await self._run(lambda: self._connection().execute(statement, params).fetchall())
        return sorted(tuple(json.loads(row[0])) for row in rows)[:limit]

    # --- search -----------------------------------------------------------------------

    def _search_one(
        self,
        namespace: tuple[str, ...],
        query: str,
        limit: int,
        mode: str,
        vector: list[float] | None = None,
    ) -> list[StoreItem]:
        conn = self._connection()
        ns = ns_to_text(namespace)
        tokens = sorted(set(tokenize(query)))
        # FTS5 stems (porter) but has no stop list: the query drops the stop words.
        words = [token for token in tokens if token not in STOP_WORDS]
        if mode == "hybrid" and vector is not None:
            rows = self._hybrid(conn, ns, words, vector, limit)
        elif mode == "hrr" and tokens:
            wanted = hrr_top(conn, ns, tokens, self._dim, limit)
            by_id = {
                row[0]: row[1:]
                for row in conn.execute(sql.items_by_rowid(len(wanted)), wanted).fetchall()
            }
            rows = [by_id[row_id] for row_id in wanted]
        elif not words:
            rows = conn.execute(sql.NEWEST_ITEMS, (ns, limit)).fetchall()
        elif mode in ("lexical", "hybrid"):  # hybrid without a query vector: words alone
            rows = bm25_candidates(conn, ns, words, limit)
        else:
            # HRR only re-orders BM25's candidates (it encodes the same words, without IDF).
            candidates = bm25_candidates(conn, ns, words, candidate_pool(limit))
            lexical = {i: row[7] for i, row in enumerate(candidates)}
            similarity = hrr_similarities(words, [row[6] for row in candidates], self._dim)
            scores = fuse(lexical, dict(enumerate(similarity.tolist())), HRR_WEIGHT)
            rows = [candidates[i] for i in sorted(scores, key=lambda i: (-scores[i], i))[:limit]]
        return [self._item(namespace, row) for row in rows]

    def _hybrid(
        self, conn: sqlite3.Connection, ns: str, words: list[str], vector: list[float], limit: int
    ) -> list[Sequence[Any]]:
        """BM25's best and the embedder's nearest, ``candidate_pool(limit)`` of each, fused
        as InMemoryStore fuses them."""
        pool = candidate_pool(limit)
        rows: dict[str, Sequence[Any]] = {}
        lexical: dict[str, float] = {}
        for row in bm25_candidates(conn, ns, words, pool) if words else []:
            rows[row[0]], lexical[row[0]] = row, row[7]
        vectors = conn.execute(sql.NAMESPACE_EMBEDDINGS, (ns,)).fetchall()
        nearest: dict[str, float] = {}
        if vectors:
            keys = [key for _, key, _ in vectors]
            similarity = embedding_similarities([blob for _, _, blob in vectors], vector)
            nearest = nearest_and_scored(keys, similarity, pool, lexical)
            rowids = {key: rowid for rowid, key, _ in vectors}
            wanted = [rowids[key] for key in nearest.keys() - rows.keys()]
            for row in conn.execute(sql.items_by_rowid(len(wanted)), wanted).fetchall():
                rows[row[1]] = row[1:]
        scores = fuse(lexical, nearest, MODEL_WEIGHT)
        newest = sorted(scores, key=lambda key: (-scores[key], -rows[key][4], key))
        return [rows[key] for key in newest[:limit]]

    def _mode(self, mode: str | None) -> str:
        if mode is None:
            return "hybrid" if self._embedder is not None else "lexical"
        if mode not in SEARCH_MODES:
            raise ValueError(f"mode must be one of {SEARCH_MODES}, got {mode!r}")
        if mode == "hybrid" and self._embedder is None:
            raise ValueError('mode="hybrid" needs HolographicStore(..., embedder=...)')
        return mode

    async def _query_vector(self, query: str | None, mode: str) -> list[float] | None:
        if mode != "hybrid" or not query or not has_words(query):
            return None
        embedder = self._embedder
        assert embedder is not None

        async def embed() -> list[float] | None:
            vector = await embedder.embed(query)
            return validate_embedder_vector(vector, dimension=self._embedding_dim)

        return await query_vector_or_none(embed, "HolographicStore")

    async def search(
        self,
        namespace: tuple[str, ...],
        query: str | None = None,
        limit: int = 10,
        *,
        mode: str | None = None,
    ) -> list[StoreItem]:
        """Items ranked for ``query``: ``mode`` is ``"lexical"`` (BM25; the default without
        an embedder), ``"hybrid"`` (BM25 fused with the embedder's cosine; the default with
        one), ``"fused"`` (BM25's candidates re-scored with HRR) or ``"hrr"`` (exact HRR)."""
        [found] = await self._search_all([validate_namespace(namespace)], query, limit, mode)
        return found

    async def _search_many(
        self, namespaces: list[Namespace], query: str | None, limit: int
    ) -> list[list[StoreItem]]:
        return await self._search_all(namespaces, query, limit, None)

    async def _search_all(
        self, namespaces: list[Namespace], query: str | None, limit: int, mode: str | None
    ) -> list[list[StoreItem]]:
        """The search of each of the (validated) ``namespaces``, in one worker thread call."""
        validate_query(query)
        limit = validate_limit(limit)
        mode = self._mode(mode)
        vector = await self._query_vector(query, mode)
        return await self._run(
            lambda: [self._search_one(ns, query or "", limit, mode, vector) for ns in namespaces]
        )

    async def _search_by_embedding(
        self, namespace: Namespace, query: list[float], limit: int, floor: float | None, where: Any
    ) -> list[SemanticSearchResult]:
        """Exact cosine scan; ``distance`` is ``1 - score``."""
        ns = ns_to_text(namespace)

        def work() -> list[SemanticSearchResult]:
            rows = [
                row
                for row in self._connection().execute(sql.EMBEDDED_ITEMS, (ns,))
                if metadata_matches(json.loads(row[2]), where)
            ]
            if not rows:
                return []
            return [
                SemanticSearchResult(self._item(namespace, rows[i]), score, 1.0 - score)
                for i, score in embedding_top([row[6] for row in rows], query, limit, floor)
            ]

        return await self._run(work)
