"""Reading memories back from a store: ranking, recency and the merge of the two.

A recall reads every memory type of every namespace in scope ("targets"):

* with a query, ONE ``search_many`` call ranks each target on its own; the rankings are
  merged rank by rank (the best of each target first, then the second best of each...),
  because scores of separate rankings are not comparable;
* ONE more ``search_many`` without a query tops the list up with the most recently
  updated memories, so a store whose search only matches words (InMemoryStore's BM25)
  still injects something when no memory shares a word with the user's message. It runs
  only when the ranking brought back fewer than ``limit`` memories: the top-up comes
  after every ranked memory, so it would not change a full list (with a store that
  ranks every memory with a vector, PgMemory's with a model embedder, a recall is then
  one statement; PgMemory's default HRR vectors rank only the memories sharing a word);
* the two are de-duplicated (by namespace and key) and cut to the limit.

A store that cannot search (``capabilities.search`` false) falls back to recency read
through ``list_keys`` + ``get_item``. Pure Python: importable without Django settings.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tulip_memory.manager.types import Memory

if TYPE_CHECKING:
    from tulip_memory.store.base import BaseStore, StoreItem

__all__ = ["recall"]

logger = logging.getLogger("tulip_memory.manager")

Namespace = tuple[str, ...]


def _interleave(rankings: Sequence[Sequence[StoreItem]]) -> list[StoreItem]:
    merged: list[StoreItem] = []
    for rank in range(max((len(r) for r in rankings), default=0)):
        merged.extend(r[rank] for r in rankings if rank < len(r))
    return merged


def _newest_first(groups: Sequence[Sequence[StoreItem]]) -> list[StoreItem]:
    items = [item for group in groups for item in group]
    items.sort(key=lambda item: item.updated_at, reverse=True)
    return items


async def _recent_without_search(
    store: BaseStore, targets: list[Namespace], limit: int
) -> list[StoreItem]:
    groups: list[list[StoreItem]] = []
    for namespace in targets:
        group = []
        for key in await store.list_keys(namespace, limit=limit):
            item = await store.get_item(namespace, key)
            if item is not None:
                group.append(item)
        groups.append(group)
    return _newest_first(groups)


def _add_memories(
    items: list[StoreItem], limit: int, memories: list[Memory], seen: set[tuple[Namespace, str]]
) -> list[Memory]:
    """``memories`` extended with those of ``items`` not ``seen`` yet, up to ``limit``."""
    for item in items:
        if len(memories) == limit:
            break
        identity = (tuple(item.namespace), item.key)
        if identity in seen:
            continue
        seen.add(identity)
        try:
            memories.append(Memory.from_store_value(item.value))
        except ValueError as exc:
            logger.warning("skipping unreadable memory %r/%r: %s", item.namespace, item.key, exc)
    return memories


async def recall(
    store: BaseStore, targets: list[Namespace], query: str | None, limit: int
) -> list[Memory]:
    """Up to ``limit`` memories of ``targets``: ranked for ``query`` first, then newest."""
    if limit <= 0 or not targets:
        return []
    memories: list[Memory] = []
    seen: set[tuple[Namespace, str]] = set()
    if not store.capabilities.search:
        recent = await _recent_without_search(store, targets, limit)
        return _add_memories(recent, limit, memories, seen)
    if query and query.strip():
        ranked = _interleave(await store.search_many(targets, query=query, limit=limit))
        if len(_add_memories(ranked, limit, memories, seen)) == limit:
            return memories
    recent = _newest_first(await store.search_many(targets, query=None, limit=limit))
    return _add_memories(recent, limit, memories, seen)
