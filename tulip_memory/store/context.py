"""StoreContext: the store as an agent's node sees it, with user, session and global helpers.

Namespaces: ``(*T, "users", user_id[, "memories"])``, ``(*T, "sessions", session_id)``
and ``(*T, "global")``, ``T`` being ``(tenant,)`` when there is one. Reads without a user
return nothing; writes without one raise ``ValueError``. A tenant-isolated store requires
a tenant (given or bound), else ``TenantError``.
"""

from __future__ import annotations

from typing import Any

from tulip_memory.core.identifiers import validate_identifier
from tulip_memory.exceptions import TenantError
from tulip_memory.store.base import BaseStore, SemanticSearchResult, StoreItem
from tulip_memory.store.namespaced import NamespacedStore, in_namespace

__all__ = ["StoreContext"]


class StoreContext:
    """A store plus the current tenant, ``user_id`` and ``session_id``."""

    def __init__(
        self,
        store: BaseStore,
        user_id: str | None = None,
        session_id: str | None = None,
        *,
        tenant: str | None = None,
    ) -> None:
        if not isinstance(store, BaseStore):
            raise ValueError(f"store must be a BaseStore, got {type(store).__name__}")
        if tenant is None:
            tenant = store.bound_tenant()
        if tenant is not None:
            validate_identifier(tenant, "tenant", allow_blank=False)
        elif store.capabilities.tenant_isolated:
            raise TenantError(
                f"{type(store).__name__} keeps tenants apart and no tenant is bound: pass "
                "StoreContext(..., tenant=...) or bind one with tenant_context()"
            )
        self._store = store
        self._tenant = tenant
        self._prefix: tuple[str, ...] = () if tenant is None else (tenant,)
        self._user_id = user_id
        self._session_id = session_id

    @property
    def tenant(self) -> str | None:
        return self._tenant

    @property
    def store(self) -> BaseStore:
        return self._store

    @property
    def user_id(self) -> str | None:
        return self._user_id

    @property
    def session_id(self) -> str | None:
        return self._session_id

    def _global(self) -> tuple[str, ...]:
        return (*self._prefix, "global")

    def _memories(self) -> tuple[str, ...] | None:
        return (*self._prefix, "users", self._user_id, "memories") if self._user_id else None

    def _require_memories(self) -> tuple[str, ...]:
        namespace = self._memories()
        if namespace is None:
            raise ValueError("no user_id set in this StoreContext")
        return namespace

    def for_user(self, user_id: str | None = None) -> NamespacedStore:
        """The ``(*T, "users", user_id)`` view (the context's user by default)."""
        uid = user_id or self._user_id
        if not uid:
            raise ValueError("user_id must be given or set in the StoreContext")
        return NamespacedStore(self._store, (*self._prefix, "users", uid))

    def for_session(self, session_id: str | None = None) -> NamespacedStore:
        """The ``(*T, "sessions", session_id)`` view (the context's session by default)."""
        sid = session_id or self._session_id
        if not sid:
            raise ValueError("session_id must be given or set in the StoreContext")
        return NamespacedStore(self._store, (*self._prefix, "sessions", sid))

    def for_global(self) -> NamespacedStore:
        """The ``(*T, "global")`` view: shared by the tenant's users, not across tenants."""
        return NamespacedStore(self._store, self._global())

    async def get_user_memory(self, key: str) -> Any | None:
        namespace = self._memories()
        return None if namespace is None else await self._store.get(namespace, key)

    remember = in_namespace(BaseStore.put, _require_memories)
    remember_with_embedding = in_namespace(BaseStore.put_with_embedding, _require_memories)
    get_global = in_namespace(BaseStore.get, _global)
    set_global = in_namespace(BaseStore.put, _global)

    async def forget(self, key: str) -> bool:
        namespace = self._memories()
        return False if namespace is None else await self._store.delete(namespace, key)

    async def search_memories(self, query: str, limit: int = 10) -> list[StoreItem]:
        namespace = self._memories()
        return [] if namespace is None else await self._store.search(namespace, query, limit)

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
