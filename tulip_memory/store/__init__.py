"""The cross-thread store: a versioned JSON key-value store shared by an agent's threads.

Backends: :class:`InMemoryStore`, :class:`HolographicStore` (SQLite) and :class:`PgMemory`
(PostgreSQL, imported lazily: this package imports without Django settings).
"""

from __future__ import annotations

from typing import Any

from tulip_memory.exceptions import StoreCapabilityError
from tulip_memory.store.base import BaseStore, SemanticSearchResult, StoreCapabilities, StoreItem
from tulip_memory.store.context import StoreContext
from tulip_memory.store.holographic.store import HolographicStore
from tulip_memory.store.memory import InMemoryStore
from tulip_memory.store.namespaced import NamespacedStore

__all__ = [
    "PGVECTOR_ANN_MAX_DIM",
    "BaseStore",
    "HolographicStore",
    "InMemoryStore",
    "NamespacedStore",
    "PgMemory",
    "SemanticSearchResult",
    "StoreCapabilities",
    "StoreCapabilityError",
    "StoreContext",
    "StoreItem",
]

_LAZY = {"PgMemory", "PGVECTOR_ANN_MAX_DIM"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from tulip_memory.store.pg import store as pg

        return getattr(pg, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
