"""InMemoryStore: the whole store contract in a process-local dict.

For tests and for anything that may lose its memory on exit. It offers ``search``
(case-insensitive term match over the value's text, ranked by the number of distinct query
terms matched, then by recency; no query means newest first), ``search_many``,
``list_namespaces``, ``clear_namespace`` and an all-or-nothing ``put_batch``. It has no
semantic search (``StoreCapabilityError``): use HolographicStore or PgMemory for that.

Each namespace keeps its items in a dict ordered by last write (an update moves the item
to the end), so "newest first" is a reversed walk, and an inverted index token -> keys so a
query only looks at items sharing a term.

Locking: no critical section here awaits anything, so a ``threading.Lock`` excludes
concurrent mutations without binding the store to one event loop (as an ``asyncio.Lock``
would), and also protects it when several threads (each with its own loop) share it.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tulip_memory.clock import MonotonicWallClock
from tulip_memory.namespaces import Namespace
from tulip_memory.store.base import BaseStore, BatchItem, StoreCapabilities, StoreItem
from tulip_memory.store.validation import (
    PreparedPut,
    decode_json,
    prepare_batch,
    prepare_put,
    validate_expected_versions,
    validate_key,
    validate_limit,
    validate_namespace,
    validate_namespace_prefix,
    validate_query,
)
from tulip_memory.text import tokenize, value_text

__all__ = ["InMemoryStore"]


@dataclass
class _Entry:
    value_json: str
    metadata_json: str
    created_at: datetime
    updated_at: datetime
    version: int
    terms: frozenset[str]

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
    postings: dict[str, set[str]] = field(default_factory=dict)
    recency: dict[str, int] = field(default_factory=dict)  # key -> store-wide write number

    def index(self, key: str, terms: frozenset[str]) -> None:
        for term in terms:
            self.postings.setdefault(term, set()).add(key)

    def unindex(self, key: str, terms: frozenset[str]) -> None:
        for term in terms:
            keys = self.postings[term]
            keys.discard(key)
            if not keys:
                del self.postings[term]


class InMemoryStore(BaseStore):
    """Process-local store; values are kept as JSON text and decoded on every read."""

    def __init__(self) -> None:
        self._namespaces: dict[tuple[str, ...], _Namespace] = {}
        self._lock = threading.Lock()
        self._clock = MonotonicWallClock(resolution_ns=1_000)
        self._writes = itertools.count()

    @property
    def capabilities(self) -> StoreCapabilities:
        return StoreCapabilities(search=True, list_namespaces=True, batch_operations=True)

    # --- writes -----------------------------------------------------------------------

    def _write(self, prepared: PreparedPut) -> None:
        namespace = self._namespaces.setdefault(prepared.namespace, _Namespace())
        previous = namespace.entries.pop(prepared.key, None)
        terms = frozenset(tokenize(value_text(decode_json(prepared.value_json))))
        if previous is None:
            now = self._clock.tick_datetime()
            entry = _Entry(prepared.value_json, prepared.metadata_json, now, now, 1, terms)
        else:
            namespace.unindex(prepared.key, previous.terms)
            entry = _Entry(
                prepared.value_json,
                prepared.metadata_json,
                previous.created_at,
                self._clock.tick_datetime(after=previous.updated_at),
                previous.version + 1,
                terms,
            )
        namespace.entries[prepared.key] = entry
        namespace.recency[prepared.key] = next(self._writes)
        namespace.index(prepared.key, terms)

    async def put(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Any,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        prepared = prepare_put(namespace, key, value, metadata)
        with self._lock:
            self._write(prepared)

    async def put_batch(self, items: list[BatchItem]) -> None:
        """All or nothing: every item is validated before the first is written."""
        prepared = prepare_batch(items)
        with self._lock:
            for one in prepared:
                self._write(one)

    async def compare_and_put_batch(
        self,
        items: list[BatchItem],
        expected_versions: Mapping[tuple[Namespace, str], int | None],
    ) -> bool:
        """The versions are compared and the batch written under one lock acquisition."""
        prepared = prepare_batch(items)
        expected = validate_expected_versions(expected_versions)
        with self._lock:
            for (namespace, key), version in expected.items():
                space = self._namespaces.get(namespace)
                entry = None if space is None else space.entries.get(key)
                if (None if entry is None else entry.version) != version:
                    return False
            for one in prepared:
                self._write(one)
        return True

    async def delete(self, namespace: tuple[str, ...], key: str) -> bool:
        validate_namespace(namespace)
        validate_key(key)
        with self._lock:
            space = self._namespaces.get(namespace)
            entry = None if space is None else space.entries.pop(key, None)
            if space is None or entry is None:
                return False
            space.unindex(key, entry.terms)
            del space.recency[key]
            if not space.entries:
                del self._namespaces[namespace]
            return True

    async def clear_namespace(self, namespace: tuple[str, ...]) -> int:
        validate_namespace(namespace)
        with self._lock:
            space = self._namespaces.pop(namespace, None)
        return len(space.entries) if space else 0

    # --- reads ------------------------------------------------------------------------

    def _entry(self, namespace: tuple[str, ...], key: str) -> _Entry | None:
        validate_namespace(namespace)
        validate_key(key)
        space = self._namespaces.get(namespace)
        return space.entries.get(key) if space else None

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
            newest = []
            for key in reversed(space.entries):
                newest.append((key, space.entries[key]))
                if len(newest) == limit:
                    break
            return newest

    async def list_keys(self, namespace: tuple[str, ...], limit: int = 100) -> list[str]:
        validate_namespace(namespace)
        limit = validate_limit(limit)
        return [key for key, _ in self._newest(namespace, limit)]

    async def search(
        self,
        namespace: tuple[str, ...],
        query: str | None = None,
        limit: int = 10,
    ) -> list[StoreItem]:
        validate_namespace(namespace)
        validate_query(query)
        limit = validate_limit(limit)
        terms = set(tokenize(query or ""))
        if not terms:
            return [entry.to_item(namespace, key) for key, entry in self._newest(namespace, limit)]
        with self._lock:
            space = self._namespaces.get(namespace)
            if space is None:
                return []
            matches: Counter[str] = Counter()
            for term in terms:
                matches.update(space.postings.get(term, ()))
            # Group by number of matched terms, then take the newest of each group in turn.
            levels: dict[int, list[str]] = defaultdict(list)
            for key, hits in matches.items():
                levels[hits].append(key)
            best: list[str] = []
            for hits in sorted(levels, reverse=True):
                newest = heapq.nlargest(
                    limit - len(best), levels[hits], key=space.recency.__getitem__
                )
                best.extend(newest)
                if len(best) == limit:
                    break
            return [space.entries[key].to_item(namespace, key) for key in best]

    async def list_namespaces(
        self,
        prefix: tuple[str, ...] | None = None,
        limit: int = 100,
    ) -> list[tuple[str, ...]]:
        start = validate_namespace_prefix(prefix)
        limit = validate_limit(limit)
        with self._lock:
            found = [ns for ns in self._namespaces if ns[: len(start)] == start]
        return sorted(found)[:limit]
