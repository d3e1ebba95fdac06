"""NamespacedStore: a view of a store fixed to one namespace.

``NamespacedStore(store, ("users", "u1"))`` forwards every call with that namespace
(validated once); ``scoped("memories")`` narrows it further.
"""

from __future__ import annotations

from typing import Any

from tulip_memory.store.base import (
    TTL,
    BaseStore,
    SemanticSearchResult,
    StoreItem,
    ttl_argument,
)
from tulip_memory.store.validation import validate_namespace

__all__ = ["NamespacedStore"]


class NamespacedStore:
    """Forwards to ``store`` with a fixed ``namespace``."""

    def __init__(self, store: BaseStore, namespace: tuple[str, ...]) -> None:
        if not isinstance(store, BaseStore):
            raise ValueError(f"store must be a BaseStore, got {type(store).__name__}")
        self._store = store
        self._namespace = validate_namespace(namespace)

    def __repr__(self) -> str:
        return f"NamespacedStore({type(self._store).__name__}, {self._namespace!r})"

    @property
    def store(self) -> BaseStore:
        return self._store

    @property
    def namespace(self) -> tuple[str, ...]:
        return self._namespace

    def scoped(self, *suffix: str) -> NamespacedStore:
        """A view of ``namespace + suffix`` on the same store."""
        return NamespacedStore(self._store, (*self._namespace, *suffix))

    async def put(
        self, key: str, value: Any, metadata: dict[str, Any] | None = None, *, ttl: TTL = None
    ) -> None:
        await self._store.put(self._namespace, key, value, metadata, **ttl_argument(ttl))

    async def get(self, key: str) -> Any | None:
        return await self._store.get(self._namespace, key)

    async def get_item(self, key: str) -> StoreItem | None:
        return await self._store.get_item(self._namespace, key)

    async def exists(self, key: str) -> bool:
        return await self._store.exists(self._namespace, key)

    async def delete(self, key: str) -> bool:
        return await self._store.delete(self._namespace, key)

    async def list_keys(self, limit: int = 100) -> list[str]:
        return await self._store.list_keys(self._namespace, limit)

    async def search(self, query: str | None = None, limit: int = 10) -> list[StoreItem]:
        return await self._store.search(self._namespace, query, limit)

    async def clear(self) -> int:
        """Delete every item of this namespace; returns how many."""
        return await self._store.clear_namespace(self._namespace)

    async def put_with_embedding(
        self,
        key: str,
        value: Any,
        embedding: list[float],
        metadata: dict[str, Any] | None = None,
        *,
        ttl: TTL = None,
    ) -> None:
        await self._store.put_with_embedding(
            self._namespace, key, value, embedding, metadata, **ttl_argument(ttl)
        )

    async def search_by_embedding(
        self,
        query_embedding: list[float],
        limit: int = 10,
        threshold: float | None = None,
        metadata_filter: dict[str, Any] | None = None,
    ) -> list[SemanticSearchResult]:
        return await self._store.search_by_embedding(
            self._namespace, query_embedding, limit, threshold, metadata_filter
        )

    async def get_embedding(self, key: str) -> list[float] | None:
        return await self._store.get_embedding(self._namespace, key)
