"""The store contract: ``BaseStore``, ``StoreItem``, ``StoreCapabilities``.

``put``, ``get``, ``delete`` and ``list_keys`` are abstract; the rest has defaults built
over them, or raises :class:`StoreCapabilityError` unless ``capabilities`` advertises it.
docs/store.md, "The contract", states it in full.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any, NoReturn

from tulip_memory.core.clock import utc_now
from tulip_memory.core.namespaces import Namespace
from tulip_memory.exceptions import StoreCapabilityError
from tulip_memory.store.instrumentation import observe_methods
from tulip_memory.store.validation import (
    PreparedPut,
    batch_items,
    prepare_batch,
    prepare_put,
    validate_embedding,
    validate_expected_versions,
    validate_key_list,
    validate_limit,
    validate_metadata_filter,
    validate_namespace,
    validate_namespaces,
    validate_query,
    validate_threshold,
    validate_ttl,
)

__all__ = [
    "TTL",
    "BaseStore",
    "BatchWriteStore",
    "SemanticSearchResult",
    "StoreCapabilities",
    "StoreCapabilityError",
    "StoreItem",
]

BatchItem = tuple[Namespace, str, Any, dict[str, Any] | None]
# compare_and_put_batch's expected version of each (namespace, key) (None: absent).
Versions = dict[tuple[Namespace, str], int | None]
# A ttl as callers pass it: seconds, or a timedelta (None: never expires).
TTL = float | timedelta | None

_TTL_HINT = (
    "pick a store whose capabilities.ttl is True (InMemoryStore, HolographicStore, PgMemory)"
)
_EMBEDDING_HINT = "use put() for plain storage, or a store with semantic_search"
_SEMANTIC_HINT = "pick a store with capabilities.semantic_search"
_SEARCH_HINT = "pick a store whose capabilities.search is True (e.g. InMemoryStore)"


_CLEAR_PAGE = 1000


@dataclass
class StoreItem:
    """An item of a store, with its metadata, timestamps and write count."""

    namespace: tuple[str, ...]
    key: str
    value: Any
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    version: int = 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {
            "namespace": list(self.namespace),
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StoreItem:
        return cls(
            namespace=tuple(data["namespace"]),
            key=data["key"],
            value=data["value"],
            metadata=dict(data.get("metadata") or {}),
            created_at=datetime.fromisoformat(data["created_at"]),
            updated_at=datetime.fromisoformat(data["updated_at"]),
            version=int(data.get("version", 1)),
        )


@dataclass(frozen=True)
class StoreCapabilities:
    """What a store implements beyond the abstract methods (docs/store.md, "Capabilities").
    ``tenant_isolated``: ``namespace[0]`` is the tenant and tenants are kept apart."""

    search: bool = False
    semantic_search: bool = False
    embedding_dimension: int | None = None
    ttl: bool = False
    list_namespaces: bool = False
    batch_operations: bool = False
    transactions: bool = False
    tenant_isolated: bool = False


@dataclass
class SemanticSearchResult:
    """One hit of ``search_by_embedding``: the item, its cosine similarity and distance."""

    item: StoreItem
    score: float
    distance: float | None = None


class BaseStore(ABC):
    """Abstract store: subclasses implement ``put``, ``get``, ``delete``, ``list_keys``
    and advertise the optional methods they override in ``capabilities``."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        observe_methods(cls)

    @property
    def capabilities(self) -> StoreCapabilities:
        return StoreCapabilities()

    def bound_tenant(self) -> str | None:
        """The tenant bound by ``tenant_context``/``TenantMiddleware``, as this store sees it
        (always ``None`` unless ``tenant_isolated``)."""
        return None

    def _unsupported(self, capability: str, hint: str | None = None) -> NoReturn:
        raise StoreCapabilityError(
            capability=capability, store_class=type(self).__name__, hint=hint
        )

    def _ttl(self, ttl: object) -> timedelta | None:
        if ttl is None:
            return None
        if not self.capabilities.ttl:
            self._unsupported("ttl", _TTL_HINT)
        return validate_ttl(ttl)

    # --- abstract -----------------------------------------------------------------

    @abstractmethod
    async def put(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Any,
        metadata: dict[str, Any] | None = None,
        *,
        ttl: TTL = None,
    ) -> None:
        """Create or replace ``key`` (version 1, then +1 a write); ``ttl``: expire that long
        after the write, ``None`` never (clearing an earlier expiry)."""

    @abstractmethod
    async def get(self, namespace: tuple[str, ...], key: str) -> Any | None:
        """The value of ``key``, or ``None`` if there is no such item."""

    @abstractmethod
    async def delete(self, namespace: tuple[str, ...], key: str) -> bool:
        """Delete ``key``; ``True`` if it existed."""

    @abstractmethod
    async def list_keys(self, namespace: tuple[str, ...], limit: int = 100) -> list[str]:
        """Up to ``limit`` keys of exactly ``namespace``, newest-updated first, ties by key."""

    # --- optional, with working defaults -------------------------------------------

    async def get_item(self, namespace: tuple[str, ...], key: str) -> StoreItem | None:
        """The whole item, or ``None``. This default over ``get`` gives ``metadata={}``,
        ``version=0`` and the time of the call (docs/store.md)."""
        value = await self.get(namespace, key)
        if value is None:
            return None
        now = utc_now()
        return StoreItem(
            namespace=tuple(namespace),
            key=key,
            value=value,
            metadata={},
            created_at=now,
            updated_at=now,
            version=0,
        )

    async def exists(self, namespace: tuple[str, ...], key: str) -> bool:
        """Whether ``key`` exists (a stored ``None`` exists)."""
        return await self.get_item(namespace, key) is not None

    async def get_batch(
        self, keys: list[tuple[tuple[str, ...], str]]
    ) -> dict[tuple[tuple[str, ...], str], Any]:
        """``{(namespace, key): value}`` for the pairs that exist."""
        results: dict[tuple[tuple[str, ...], str], Any] = {}
        for namespace, key in validate_key_list(keys):
            item = await self.get_item(namespace, key)
            if item is not None:
                results[(namespace, key)] = item.value
        return results

    async def put_batch(self, items: list[BatchItem], *, ttl: TTL = None) -> None:
        """Write ``(namespace, key, value, metadata)`` items in order, all validated first;
        atomic only on stores advertising ``batch_operations``."""
        items = batch_items(items)
        prepare_batch(items)
        self._ttl(ttl)
        extra = {} if ttl is None else {"ttl": ttl}  # a store may take no ``ttl`` keyword
        for item in items:
            namespace, key, value, *rest = item
            await self.put(namespace, key, value, rest[0] if rest else None, **extra)

    async def compare_and_put_batch(
        self,
        items: list[BatchItem],
        expected_versions: Mapping[tuple[Namespace, str], int | None],
    ) -> bool:
        """``put_batch(items)`` if every ``(namespace, key)`` of ``expected_versions`` is
        still at that version (``None``: absent); ``False``, nothing written, otherwise.
        This default is not atomic; the stores of this package are."""
        items = batch_items(items)
        prepare_batch(items)
        for (namespace, key), version in validate_expected_versions(expected_versions).items():
            item = await self.get_item(namespace, key)
            if (None if item is None else item.version) != version:
                return False
        await self.put_batch(items)
        return True

    async def clear_namespace(self, namespace: tuple[str, ...]) -> int:
        """Delete every item of ``namespace`` (not its children); returns how many."""
        validate_namespace(namespace)
        count = 0
        while keys := await self.list_keys(namespace, limit=_CLEAR_PAGE):
            for key in keys:
                count += bool(await self.delete(namespace, key))
        return count

    async def close(self) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Release the store's resources (connections, files). Idempotent."""

    async def __aenter__(self) -> BaseStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # --- optional, advertised through capabilities ---------------------------------

    async def search(
        self,
        namespace: tuple[str, ...],
        query: str | None = None,
        limit: int = 10,
    ) -> list[StoreItem]:
        """Items of ``namespace`` ranked for ``query`` (newest first without a query)."""
        if not self.capabilities.search:
            self._unsupported("search", _SEARCH_HINT)
        return await self._search(
            validate_namespace(namespace), validate_query(query), validate_limit(limit)
        )

    async def _search(self, namespace: Namespace, query: str | None, limit: int) -> list[StoreItem]:
        """``search`` with validated arguments, for a store advertising it."""
        self._unsupported("search", _SEARCH_HINT)

    async def search_many(
        self,
        namespaces: Sequence[tuple[str, ...]],
        query: str | None = None,
        limit: int = 10,
    ) -> list[list[StoreItem]]:
        """``search`` over several namespaces: one result list per namespace, in order."""
        if not self.capabilities.search:
            self._unsupported("search", "pick a store whose capabilities.search is True")
        return await self._search_many(validate_namespaces(namespaces), query, limit)

    async def _search_many(
        self, namespaces: list[Namespace], query: str | None, limit: int
    ) -> list[list[StoreItem]]:
        """``search_many`` of validated ``namespaces``: this default searches one at a time."""
        return [await self.search(namespace, query=query, limit=limit) for namespace in namespaces]

    async def list_namespaces(
        self,
        prefix: tuple[str, ...] | None = None,
        limit: int = 100,
    ) -> list[tuple[str, ...]]:
        """Namespaces holding at least one item, starting with ``prefix``, sorted."""
        self._unsupported("list_namespaces")

    async def put_with_embedding(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Any,
        embedding: list[float],
        metadata: dict[str, Any] | None = None,
        *,
        ttl: TTL = None,
    ) -> None:
        """``put`` plus an embedding vector for ``search_by_embedding``."""
        if not self.capabilities.semantic_search:  # refused before the item is validated
            self._unsupported("semantic_search", _EMBEDDING_HINT)
        await self._put_embedded(prepare_put(namespace, key, value, metadata), embedding, ttl)

    async def _put_embedded(self, prepared: PreparedPut, embedding: list[float], ttl: TTL) -> None:
        self._unsupported("semantic_search", _EMBEDDING_HINT)

    async def sweep_expired(self) -> int:
        """Delete the items whose expiry has passed; how many were deleted."""
        self._unsupported("ttl", _TTL_HINT)

    async def search_by_embedding(
        self,
        namespace: tuple[str, ...],
        query_embedding: list[float],
        limit: int = 10,
        threshold: float | None = None,
        metadata_filter: dict[str, Any] | None = None,
    ) -> list[SemanticSearchResult]:
        """Items of ``namespace`` with an embedding, most similar first."""
        capabilities = self.capabilities
        if not capabilities.semantic_search:
            self._unsupported("semantic_search", _SEMANTIC_HINT)
        return await self._search_by_embedding(
            validate_namespace(namespace),
            validate_embedding(query_embedding, dimension=capabilities.embedding_dimension),
            validate_limit(limit),
            validate_threshold(threshold),
            validate_metadata_filter(metadata_filter),
        )

    async def _search_by_embedding(
        self, namespace: Namespace, query: list[float], limit: int, floor: float | None, where: Any
    ) -> list[SemanticSearchResult]:
        """``search_by_embedding`` with validated arguments (``floor``: the threshold,
        ``where``: the metadata filter as a dict), for a store advertising it."""
        self._unsupported("semantic_search", _SEMANTIC_HINT)

    async def get_embedding(self, namespace: tuple[str, ...], key: str) -> list[float] | None:
        """The embedding stored with ``key`` (``None``: no such item, or no embedding)."""
        self._unsupported("semantic_search", _SEMANTIC_HINT)


observe_methods(BaseStore)


class BatchWriteStore(BaseStore):
    """Base of this package's stores: every write is validated first, then is one
    ``_write_all`` (one lock or transaction), which first compares the ``expected``
    versions when given."""

    async def put(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Any,
        metadata: dict[str, Any] | None = None,
        *,
        ttl: TTL = None,
    ) -> None:
        await self._put(prepare_put(namespace, key, value, metadata), ttl)

    async def _put(self, prepared: PreparedPut, ttl: TTL) -> None:
        await self._write_all([prepared], self._ttl(ttl))

    async def put_batch(self, items: list[BatchItem], *, ttl: TTL = None) -> None:
        prepared = prepare_batch(items)
        await self._write_all(prepared, self._ttl(ttl))

    async def compare_and_put_batch(
        self,
        items: list[BatchItem],
        expected_versions: Mapping[tuple[Namespace, str], int | None],
    ) -> bool:
        prepared = prepare_batch(items)
        return await self._write_all(prepared, None, validate_expected_versions(expected_versions))

    @abstractmethod
    async def _write_all(
        self, prepared: list[PreparedPut], ttl: timedelta | None, expected: Versions | None = None
    ) -> bool:
        """Write every item unless an ``expected`` version differs (then ``False``)."""
