"""Reading memories back from a store: one ``search_many`` ranking each namespace in scope,
merged rank by rank (scores of separate rankings are not comparable), topped up by recency.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tulip_memory.manager.types import Memory

if TYPE_CHECKING:
    from tulip_memory.store.base import BaseStore, StoreItem

__all__ = ["interleave", "recall"]

logger = logging.getLogger("tulip_memory.manager")

Namespace = tuple[str, ...]


def interleave(rankings: Sequence[Sequence[StoreItem]]) -> list[StoreItem]:
    """The items of ``rankings`` rank by rank: scores of separate rankings do not compare."""
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
        ranked = interleave(await store.search_many(targets, query=query, limit=limit))
        if len(_add_memories(ranked, limit, memories, seen)) == limit:
            return memories
    recent = _newest_first(await store.search_many(targets, query=None, limit=limit))
    return _add_memories(recent, limit, memories, seen)
