"""Events of every store's writes and deletes (``store.items.written`` / ``.deleted``).

:class:`~tulip_memory.store.base.BaseStore` wraps the :data:`OBSERVED` methods each
subclass defines, a user's too, so that an override of a public method still sends.
Payloads hold the operation, the tenant, counts, the ttl and ``duration_ms``, never keys
or values. Only the outermost call of one store sends; a call that raises sends nothing.
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable, Coroutine, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from tulip_memory.events import (
    EV_STORE_EXPIRED_SWEPT,
    EV_STORE_ITEMS_DELETED,
    EV_STORE_ITEMS_WRITTEN,
    elapsed_ms,
    emit,
    listening,
)

__all__ = ["OBSERVED", "observe_methods", "swept"]

Method = Callable[..., Coroutine[Any, Any, Any]]

# The store whose observed call is running in this context (its nested calls stay quiet).
_running: ContextVar[object | None] = ContextVar("tulip_memory_store_event", default=None)


def _seconds(ttl: object) -> float | None:
    if isinstance(ttl, timedelta):
        return ttl.total_seconds()
    return None if ttl is None else float(ttl)  # type: ignore[arg-type]


def _tenant(isolated: bool, namespace: object) -> str | None:
    if isolated and isinstance(namespace, tuple | list) and namespace:
        return namespace[0] if isinstance(namespace[0], str) else None
    return None


def _one_item(isolated: bool, namespace: Any, ttl: object, result: object) -> dict[str, Any]:
    return {"tenant": _tenant(isolated, namespace), "items": 1, "ttl": _seconds(ttl)}


def _batch(isolated: bool, items: Any, ttl: object, result: object) -> dict[str, Any]:
    written = result is not False  # compare_and_put_batch returns False when it wrote nothing
    tenants = {_tenant(isolated, item[0]) for item in items}
    fields = {
        "tenant": tenants.pop() if len(tenants) == 1 else None,  # None: several, or none
        "items": len(items) if written else 0,
        "ttl": _seconds(ttl),
    }
    if isinstance(result, bool):
        fields["written"] = result
    return fields


def _deleted(isolated: bool, namespace: Any, ttl: object, result: object) -> dict[str, Any]:
    return {"tenant": _tenant(isolated, namespace), "deleted": int(result)}  # type: ignore[call-overload]


@dataclass(frozen=True)
class _Observed:
    event: str
    first: str  # the name of the contract's first parameter, the one the payload reads
    fields: Callable[[bool, Any, object, object], dict[str, Any]]


# Method name -> the event it sends and how its payload is read from the call.
OBSERVED: dict[str, _Observed] = {
    "put": _Observed(EV_STORE_ITEMS_WRITTEN, "namespace", _one_item),
    "put_with_embedding": _Observed(EV_STORE_ITEMS_WRITTEN, "namespace", _one_item),
    "put_batch": _Observed(EV_STORE_ITEMS_WRITTEN, "items", _batch),
    "compare_and_put_batch": _Observed(EV_STORE_ITEMS_WRITTEN, "items", _batch),
    "delete": _Observed(EV_STORE_ITEMS_DELETED, "namespace", _deleted),
    "clear_namespace": _Observed(EV_STORE_ITEMS_DELETED, "namespace", _deleted),
}


def _observed(name: str, method: Method) -> Method:
    spec = OBSERVED[name]

    # The payload reads the contract's first parameter (positional or by name) and the
    # keyword-only ``ttl``, so an override taking ``*args, **kwargs`` is read the same.
    @functools.wraps(method)
    async def observed(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not listening() or _running.get() is self:
            return await method(self, *args, **kwargs)
        first = args[0] if args else kwargs.get(spec.first)
        if isinstance(first, Iterator):  # a generator of items, read once for store and payload
            first = list(first)
            if args:
                args = (first, *args[1:])
            else:
                kwargs[spec.first] = first
        token = _running.set(self)
        started = time.perf_counter()
        try:
            result = await method(self, *args, **kwargs)
        finally:
            _running.reset(token)
        duration = elapsed_ms(started)
        fields = spec.fields(self.capabilities.tenant_isolated, first, kwargs.get("ttl"), result)
        await emit(spec.event, sender=type(self), operation=name, **fields, duration_ms=duration)
        return result

    observed.__tulip_observed__ = True  # type: ignore[attr-defined]
    return observed


def observe_methods(cls: type) -> None:
    """Wrap the observed methods ``cls`` itself defines (once; inherited ones already are)."""
    for name in OBSERVED:
        method = cls.__dict__.get(name)
        if inspect.iscoroutinefunction(method) and not getattr(method, "__tulip_observed__", False):
            setattr(cls, name, _observed(name, method))


async def swept(store: object, deleted: int, started: float) -> int:
    """Send ``store.expired.swept`` for a store's own ``sweep_expired``; returns ``deleted``.
    (PgMemory's sweep runs in :mod:`tulip_memory.retention.expiry`, one event per tenant.)"""
    if deleted:
        await emit(
            EV_STORE_EXPIRED_SWEPT,
            sender=type(store),
            tenant=None,
            deleted=deleted,
            duration_ms=elapsed_ms(started),
        )
    return deleted
