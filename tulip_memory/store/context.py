"""StoreContext: the store as an agent's node sees it, with user, session and global helpers.

Namespaces it uses: ``("users", user_id)`` (``for_user``), ``("users", user_id,
"memories")`` (``remember``/``forget``/``search_memories``), ``("sessions", session_id)``
(``for_session``) and ``("global",)`` (``get_global``/``set_global``). Reads without a user
return nothing; writes without a user raise ``ValueError``.
"""

from __future__ import annotations

from typing import Any

from tulip_memory.store.base import BaseStore, SemanticSearchResult, StoreItem
from tulip_memory.store.namespaced import NamespacedStore

__all__ = ["StoreContext"]

GLOBAL_NAMESPACE = ("global",)


class StoreContext:
    """A store plus the current ``user_id`` and ``session_id``."""

    def __init__(
        self,
        store: BaseStore,
        user_id: str | None = None,
        session_id: str | None = None,
    ) -> None:
        if not isinstance(store, BaseStore):
            raise ValueError(f"store must be a BaseStore, got {type(store).__name__}")
        self._store = store
        self._user_id = user_id
        self._session_id = session_id

    @property
    def store(self) -> BaseStore:
        return self._store

    @property
    def user_id(self) -> str | None:
        return self._user_id

    @property
    def session_id(self) -> str | None:
        return self._session_id

    def _memories(self) -> tuple[str, ...] | None:
        return ("users", self._user_id, "memories") if self._user_id else None

    def _require_memories(self) -> tuple[str, ...]:
        namespace = self._memories()
        if namespace is None:
            raise ValueError("no user_id set in this StoreContext")
        return namespace

    def for_user(self, user_id: str | None = None) -> NamespacedStore:
        """The ``("users", user_id)`` view (the context's user by default)."""
        uid = user_id or self._user_id
        if not uid:
            raise ValueError("user_id must be given or set in the StoreContext")
        return NamespacedStore(self._store, ("users", uid))

    def for_session(self, session_id: str | None = None) -> NamespacedStore:
        """The ``("sessions", session_id)`` view (the context's session by default)."""
        sid = session_id or self._session_id
        if not sid:
            raise ValueError("session_id must be given or set in the StoreContext")
        return NamespacedStore(self._store, ("sessions", sid))

    def for_global(self) -> NamespacedStore:
        """The ``("global",)`` view."""
        return NamespacedStore(self._store, GLOBAL_NAMESPACE)

    async def get_user_memory(self, key: str) -> Any | None:
        namespace = self._memories()
        return None if namespace is None else await self._store.get(namespace, key)

    async def remember(self, key: str, value: Any, metadata: dict[str, Any] | None = None) -> None:
        await self._store.put(self._require_memories(), key, value, metadata)

    async def forget(self, key: str) -> bool:
        namespace = self._memories()
        return False if namespace is None else await self._store.delete(namespace, key)

    async def search_memories(self, query: str, limit: int = 10) -> list[StoreItem]:
        namespace = self._memories()
        return [] if namespace is None else await self._store.search(namespace, query, limit)

    async def remember_with_embedding(
        self,
        key: str,
        value: Any,
        embedding: list[float],
        metadata: dict[str, Any] | None = None,
    ) -> None:
        await self._store.put_with_embedding(
            self._require_memories(), key, value, embedding, metadata
        )

    async def search_memories_semantic(
        self,
        query_embedding: list[float],
        limit: int = 10,
        threshold: float | None = None,
    ) -> list[SemanticSearchResult]:
        namespace = self._memories()
        if namespace is None:
            return []
        return await self._store.search_by_embedding(namespace, query_embedding, limit, threshold)

    async def get_global(self, key: str) -> Any | None:
        return await self._store.get(GLOBAL_NAMESPACE, key)

    async def set_global(
        self, key: str, value: Any, metadata: dict[str, Any] | None = None
    ) -> None:
        await self._store.put(GLOBAL_NAMESPACE, key, value, metadata)
