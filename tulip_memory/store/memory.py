"""InMemoryStore: the whole store contract in a process-local dict (tests, ephemeral use).

Ranks by Okapi BM25 over stemmed terms, fused with the embedder's cosine when given
(docs/store.md, "Ranking"). No ``search_by_embedding``.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

import numpy as np

from tulip_memory.core.clock import Clock, MonotonicWallClock, utc_now
from tulip_memory.core.namespaces import Namespace
from tulip_memory.core.text import has_words, off_loop_when_long, search_terms, value_text
from tulip_memory.embeddings.base import embed_texts, query_vector_or_none
from tulip_memory.store.base import BatchWriteStore, StoreCapabilities, StoreItem, Versions
from tulip_memory.store.instrumentation import swept
from tulip_memory.store.ranking import (
    MODEL_WEIGHT,
    bm25_idf,
    bm25_weight,
    candidate_pool,
    fuse,
    nearest_and_scored,
)
from tulip_memory.store.validation import (
    PreparedPut,
    decode_json,
    validate_embedder,
    validate_embedder_vector,
    validate_key,
    validate_limit,
    validate_namespace,
    validate_namespace_prefix,
)

__all__ = ["InMemoryStore"]


@dataclass
class _Entry:
    value_json: str
    metadata_json: str
    created_at: datetime
    updated_at: datetime
    version: int
    terms: Counter[str]  # term -> frequency
    vector: np.ndarray | None  # unit-length embedding (with an embedder)
    expires_at: datetime | None = None

    def live(self, now: datetime) -> bool:
        return self.expires_at is None or self.expires_at > now

    def to_item(self, namespace: tuple[str, ...], key: str) -> StoreItem:
        return StoreItem(
            namespace=namespace,
            key=key,
            value=decode_json(self.value_json),
            metadata=decode_json(self.metadata_json),
            created_at=self.created_at,
            updated_at=self.updated_at,
            version=self.version,
        )


@dataclass
class _Namespace:
    entries: dict[str, _Entry] = field(default_factory=dict)  # ordered by last write
    postings: dict[str, dict[str, int]] = field(default_factory=dict)  # term -> key -> tf
    total_length: int = 0  # of every entry's terms
    recency: dict[str, int] = field(default_factory=dict)  # key -> store-wide write number

    def index(self, key: str, terms: Counter[str]) -> None:
        for term, tf in terms.items():
            self.postings.setdefault(term, {})[key] = tf
        self.total_length += terms.total()

    def unindex(self, key: str, terms: Counter[str]) -> None:
        for term in terms:
            keys = self.postings[term]
            del keys[key]
            if not keys:
                del self.postings[term]
        self.total_length -= terms.total()

    def bm25(self, terms: set[str], now: datetime) -> dict[str, float]:
        count = len(self.entries)
        average = self.total_length / max(count, 1)
        scores: dict[str, float] = {}
        for term in terms:
            postings = self.postings.get(term)
            if not postings:
                continue
            idf = bm25_idf(count, len(postings))
            for key, tf in postings.items():
                if not self.entries[key].live(now):
                    continue
                length = self.entries[key].terms.total()
                scores[key] = scores.get(key, 0.0) + idf * bm25_weight(tf, length, average)
        return scores

    def nearest(
        self, query: np.ndarray, pool: int, now: datetime, scored: Iterable[str]
    ) -> dict[str, float]:
        """The cosine similarity to the unit ``query`` of the ``pool`` live entries nearest
        to it and of the live entries of ``scored`` that have a vector."""
        keys = [
            key
            for key, entry in self.entries.items()
            if entry.vector is not None and entry.live(now)
        ]
        if not keys:
            return {}
        matrix = np.stack([self.entries[key].vector for key in keys])  # type: ignore[misc]
        return nearest_and_scored(keys, matrix @ query, pool, scored)


T = TypeVar("T")

# What a write computes before taking the lock: the value's term counts, its unit vector.
_Encoded = tuple[Counter[str], np.ndarray | None]


class InMemoryStore(BatchWriteStore):
    """Process-local store; values are kept as JSON text and decoded on every read."""

    def __init__(self, *, embedder: Any | None = None, clock: Clock = utc_now) -> None:
        validate_embedder(embedder)
        if not callable(clock):
            raise TypeError(f"clock must be a callable returning a datetime, got {clock!r}")
        self._embedder = embedder
        # The width of every vector: the embedder's vectors of another are refused.
        self._dimension = None if embedder is None else int(embedder.dimension)
        self._now = clock
        self._namespaces: dict[tuple[str, ...], _Namespace] = {}
        self._lock = threading.Lock()
        self._clock = MonotonicWallClock(resolution_ns=1_000)
        self._writes = itertools.count()

    @property
    def capabilities(self) -> StoreCapabilities:
        return StoreCapabilities(search=True, ttl=True, list_namespaces=True, batch_operations=True)

    async def _locked(self, work: Callable[[], T], size: int) -> T:
        """``work()`` under the lock, in a worker thread when ``size`` is long."""

        def locked() -> T:
            with self._lock:
                return work()

        return await off_loop_when_long(size, locked)

    # --- writes -----------------------------------------------------------------------

    async def _vectors(self, texts: list[str]) -> list[np.ndarray | None]:
        """Unit-length embeddings of ``texts`` (None: no words, all zeros or no embedder),
        computed before the lock is taken; a bad vector raises ``ValueError``."""
        if self._embedder is None:
            return [None] * len(texts)
        embedded = await embed_texts(self._embedder, texts)
        return [None if vector is None else self._unit(vector) for vector in embedded]

    def _unit(self, vector: Any) -> np.ndarray | None:
        values = validate_embedder_vector(vector, dimension=self._dimension)
        if values is None:
            return None
        array = np.asarray(values, dtype=np.float64)
        array /= np.abs(array).max()  # so that the squares of huge or tiny numbers stay finite
        return array / float(np.linalg.norm(array))

    async def _encode(self, prepared: list[PreparedPut]) -> list[_Encoded]:
        texts = [value_text(decode_json(one.value_json)) for one in prepared]
        terms = await _terms_of(texts)
        return list(zip(terms, await self._vectors(texts), strict=True))

    def _write(self, prepared: PreparedPut, encoded: _Encoded, ttl: timedelta | None) -> None:
        namespace = self._namespaces.setdefault(prepared.namespace, _Namespace())
        previous = namespace.entries.pop(prepared.key, None)
        if previous is not None:
            namespace.unindex(prepared.key, previous.terms)
        terms, vector = encoded
        moment = self._now()
        expires_at = None if ttl is None else moment + ttl
        if previous is None or not previous.live(moment):  # an expired item is gone
            created = updated = self._clock.tick_datetime()
            version = 1
        else:
            created, version = previous.created_at, previous.version + 1
            updated = self._clock.tick_datetime(after=previous.updated_at)
        namespace.entries[prepared.key] = _Entry(
            prepared.value_json,
            prepared.metadata_json,
            created,
            updated,
            version,
            terms,
            vector,
            expires_at,
        )
        namespace.recency[prepared.key] = next(self._writes)
        namespace.index(prepared.key, terms)

    async def _write_all(
        self, prepared: list[PreparedPut], ttl: timedelta | None, expected: Versions | None = None
    ) -> bool:
        encoded = await self._encode(prepared)

        def write() -> bool:
            if expected:
                now = self._now()
                for (namespace, key), version in expected.items():
                    entry = self._live_entry(namespace, key, now)
                    if (None if entry is None else entry.version) != version:
                        return False
            for one, enc in zip(prepared, encoded, strict=True):
                self._write(one, enc, ttl)
            return True

        return await self._locked(write, sum(len(one.value_json) for one in prepared))

    async def delete(self, namespace: tuple[str, ...], key: str) -> bool:
        validate_namespace(namespace)
        validate_key(key)
        with self._lock:
            entry = self._remove(namespace, key)
            return entry is not None and entry.live(self._now())

    def _remove(self, namespace: tuple[str, ...], key: str) -> _Entry | None:
        space = self._namespaces.get(namespace)
        entry = None if space is None else space.entries.pop(key, None)
        if space is None or entry is None:
            return None
        space.unindex(key, entry.terms)
        del space.recency[key]
        if not space.entries:
            del self._namespaces[namespace]
        return entry

    async def clear_namespace(self, namespace: tuple[str, ...]) -> int:
        validate_namespace(namespace)
        with self._lock:
            space = self._namespaces.pop(namespace, None)
        now = self._now()
        return sum(entry.live(now) for entry in space.entries.values()) if space else 0

    async def sweep_expired(self) -> int:
        started = time.perf_counter()
        with self._lock:
            now = self._now()
            expired = [
                (namespace, key)
                for namespace, space in self._namespaces.items()
                for key, entry in space.entries.items()
                if not entry.live(now)
            ]
            for namespace, key in expired:
                self._remove(namespace, key)
        return await swept(self, len(expired), started)

    # --- reads ------------------------------------------------------------------------

    def _live_entry(self, namespace: tuple[str, ...], key: str, now: datetime) -> _Entry | None:
        space = self._namespaces.get(namespace)
        entry = space.entries.get(key) if space else None
        return entry if entry is not None and entry.live(now) else None

    def _entry(self, namespace: tuple[str, ...], key: str) -> _Entry | None:
        validate_namespace(namespace)
        validate_key(key)
        # Under the lock: a write takes the key out of its namespace and puts it back
        # (at the end: the newest), and a reader in another thread must not see the gap.
        with self._lock:
            return self._live_entry(namespace, key, self._now())

    async def get(self, namespace: tuple[str, ...], key: str) -> Any | None:
        entry = self._entry(namespace, key)
        return None if entry is None else decode_json(entry.value_json)

    async def get_item(self, namespace: tuple[str, ...], key: str) -> StoreItem | None:
        entry = self._entry(namespace, key)
        return None if entry is None else entry.to_item(namespace, key)

    async def exists(self, namespace: tuple[str, ...], key: str) -> bool:
        return self._entry(namespace, key) is not None

    def _newest(self, namespace: tuple[str, ...], limit: int) -> list[tuple[str, _Entry]]:
        with self._lock:
            space = self._namespaces.get(namespace)
            if space is None:
                return []
            now = self._now()
            live = ((key, e) for key, e in reversed(space.entries.items()) if e.live(now))
            return list(itertools.islice(live, limit))

    async def list_keys(self, namespace: tuple[str, ...], limit: int = 100) -> list[str]:
        validate_namespace(namespace)
        limit = validate_limit(limit)
        return [key for key, _ in self._newest(namespace, limit)]

    async def _search(self, namespace: Namespace, query: str | None, limit: int) -> list[StoreItem]:
        [query_terms] = await _terms_of([query or ""])
        terms = set(query_terms)
        vector = None
        embedder = self._embedder
        if embedder is not None and query and has_words(query):

            async def embed() -> np.ndarray | None:
                return self._unit(await embedder.embed(query))

            vector = await query_vector_or_none(embed, "InMemoryStore")
        if not terms and vector is None:
            return [entry.to_item(namespace, key) for key, entry in self._newest(namespace, limit)]

        def rank() -> list[StoreItem]:
            space = self._namespaces.get(namespace)
            if space is None:
                return []
            now = self._now()
            lexical = space.bm25(terms, now)
            if vector is not None:
                nearest = space.nearest(vector, candidate_pool(limit), now, lexical)
                scores = fuse(lexical, nearest, MODEL_WEIGHT)
            else:
                scores = lexical
            # Best score first, ties newest first.
            best = sorted(scores, key=lambda key: (-scores[key], -space.recency[key]))[:limit]
            return [space.entries[key].to_item(namespace, key) for key in best]

        return await self._locked(rank, len(query or ""))

    async def list_namespaces(
        self,
        prefix: tuple[str, ...] | None = None,
        limit: int = 100,
    ) -> list[tuple[str, ...]]:
        start = validate_namespace_prefix(prefix)
        limit = validate_limit(limit)
        with self._lock:
            now = self._now()
            found = [
                ns
                for ns, space in self._namespaces.items()
                if ns[: len(start)] == start and any(e.live(now) for e in space.entries.values())
            ]
        return sorted(found)[:limit]


async def _terms_of(texts: list[str]) -> list[Counter[str]]:
    return await off_loop_when_long(
        sum(map(len, texts)), lambda: [Counter(search_terms(text)) for text in texts]
    )
