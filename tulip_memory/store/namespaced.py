"""NamespacedStore: a view of a store fixed to one namespace.

``NamespacedStore(store, ("users", "u1"))`` forwards every call with that namespace
(validated once); ``scoped("memories")`` narrows it further. :func:`in_namespace` makes
such a forwarding method, typed as the store's method without its ``namespace``.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from tulip_memory.core.namespaces import Namespace
from tulip_memory.store.base import BaseStore
from tulip_memory.store.validation import validate_namespace

__all__ = ["NamespacedStore", "in_namespace"]

P = ParamSpec("P")
R = TypeVar("R")
V = TypeVar("V", bound="_View")


class _View(Protocol):
    @property
    def store(self) -> BaseStore: ...


def in_namespace(
    method: Callable[Concatenate[BaseStore, Namespace, P], Awaitable[R]],
    namespace: Callable[[V], Namespace],
) -> Callable[Concatenate[V, P], Coroutine[Any, Any, R]]:
    """A method of a view calling ``method`` of its store in ``namespace(view)`` with the
    rest of the arguments; a ``ttl=None`` is left out (a store may take no ``ttl``)."""

    async def forward(view: V, /, *args: P.args, **kwargs: P.kwargs) -> R:
        if kwargs.get("ttl", 0) is None:
            del kwargs["ttl"]
        return await getattr(view.store, method.__name__)(namespace(view), *args, **kwargs)

    signature = inspect.signature(method)
    this, _, *rest = signature.parameters.values()
    forward.__signature__ = signature.replace(parameters=[this, *rest])  # type: ignore[attr-defined]
    forward.__name__ = forward.__qualname__ = method.__name__
    forward.__doc__ = method.__doc__
    return forward


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

    def _fixed(self) -> Namespace:
        return self._namespace

    def scoped(self, *suffix: str) -> NamespacedStore:
        """A view of ``namespace + suffix`` on the same store."""
        return NamespacedStore(self._store, (*self._namespace, *suffix))

    async def clear(self) -> int:
        """Delete every item of this namespace; returns how many."""
        return await self._store.clear_namespace(self._namespace)

    put = in_namespace(BaseStore.put, _fixed)
    get = in_namespace(BaseStore.get, _fixed)
    get_item = in_namespace(BaseStore.get_item, _fixed)
    exists = in_namespace(BaseStore.exists, _fixed)
    delete = in_namespace(BaseStore.delete, _fixed)
    list_keys = in_namespace(BaseStore.list_keys, _fixed)
    search = in_namespace(BaseStore.search, _fixed)
    put_with_embedding = in_namespace(BaseStore.put_with_embedding, _fixed)
    search_by_embedding = in_namespace(BaseStore.search_by_embedding, _fixed)
    get_embedding = in_namespace(BaseStore.get_embedding, _fixed)
