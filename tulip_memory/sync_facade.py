"""Blocking versions of the async APIs, for synchronous Django code (views, commands).

:func:`sync_facade` wraps a store, manager or checkpointer; each coroutine method runs
through ``async_to_sync``, whose ORM work comes back to the calling thread and so joins
its transaction and ``tenant_context``. Other attributes pass through; the facade closes
what it wraps on exit. Not for use inside a running event loop.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Generic, TypeVar

from asgiref.sync import async_to_sync

__all__ = ["SyncFacade", "sync_facade"]

T = TypeVar("T")


class SyncFacade(Generic[T]):
    """``target``'s methods, blocking (see the module docstring)."""

    def __init__(self, target: T) -> None:
        self.target = target

    def __repr__(self) -> str:
        return f"<SyncFacade of {self.target!r}>"

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.target, name)
        if inspect.iscoroutinefunction(attribute):
            return functools.wraps(attribute)(async_to_sync(attribute))
        return attribute

    def close(self) -> None:
        """Close the wrapped object (``close()`` or ``aclose()``, whichever it has)."""
        closer = getattr(self.target, "aclose", None) or getattr(self.target, "close", None)
        if closer is None:
            return
        if inspect.iscoroutinefunction(closer):
            async_to_sync(closer)()
        else:
            closer()

    def __enter__(self) -> SyncFacade[T]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def sync_facade(target: T) -> SyncFacade[T]:
    """A blocking facade over a store, memory manager or checkpointer."""
    if isinstance(target, SyncFacade):
        raise ValueError("sync_facade() got a SyncFacade: wrap the async object itself")
    if inspect.iscoroutine(target) or inspect.isawaitable(target):
        raise ValueError(
            f"sync_facade() wraps an object with async methods, not an awaitable "
            f"({type(target).__name__}); pass the store, manager or checkpointer"
        )
    return SyncFacade(target)
