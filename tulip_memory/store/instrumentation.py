"""Events of every store's writes and deletes (``store.items.written`` / ``.deleted``).

:class:`~tulip_memory.store.base.BaseStore` wraps the :data:`OBSERVED` methods of each
subclass, a user's too, when the class is created. Payloads hold the operation, the
tenant, counts, the ttl and ``duration_ms``, never keys or values. Only the outermost
call of one store sends; a call that raises sends nothing.
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable, Coroutine, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from tulip_memory.events import (
    EV_STORE_EXPIRED_SWEPT,
    EV_STORE_ITEMS_DELETED,
    EV_STORE_ITEMS_WRITTEN,
    elapsed_ms,
    emit,
    listening,
)

if TYPE_CHECKING:
    from tulip_memory.store.base import BaseStore

__all__ = ["OBSERVED", "observe_methods", "swept"]

Method = Callable[..., Coroutine[Any, Any, Any]]

# The store whose observed call is running in this context (its nested calls stay quiet).
_running: ContextVar[object | None] = ContextVar("tulip_memory_store_event", default=None)


def _seconds(ttl: object) -> float | None:
    if isinstance(ttl, timedelta):
        return ttl.total_seconds()
    return None if ttl is None else float(ttl)  # type: ignore[arg-type]


def _tenant(store: BaseStore, namespace: object) -> str | None:
    if not store.capabilities.tenant_isolated:
        return None
    if isinstance(namespace, tuple | list) and namespace and isinstance(namespace[0], str):
        return namespace[0]
    return None


def _one_item(store: BaseStore, call: inspect.BoundArguments, result: object) -> dict[str, Any]:
    return {
        "tenant": _tenant(store, call.arguments["namespace"]),
        "items": 1,
        "ttl": _seconds(call.arguments.get("ttl")),
    }


def _batch(store: BaseStore, call: inspect.BoundArguments, result: object) -> dict[str, Any]:
    items = list(call.arguments["items"])
    written = result is not False  # compare_and_put_batch returns False when it wrote nothing
    tenants = {_tenant(store, item[0]) for item in items}
    fields = {
        "tenant": tenants.pop() if len(tenants) == 1 else None,  # None: several, or none
        "items": len(items) if written else 0,
        "ttl": _seconds(call.arguments.get("ttl")),
    }
    if isinstance(result, bool):
        fields["written"] = result
    return fields


def _deleted(store: BaseStore, call: inspect.BoundArguments, result: object) -> dict[str, Any]:
    return {
        "tenant": _tenant(store, call.arguments["namespace"]),
        "deleted": int(result),  # type: ignore[call-overload]
    }


@dataclass(frozen=True)
class _Observed:
    event: str
    fields: Callable[[BaseStore, inspect.BoundArguments, object], dict[str, Any]]


# Method name -> the event it sends and how its payload is read from the call.
OBSERVED: dict[str, _Observed] = {
    "put": _Observed(EV_STORE_ITEMS_WRITTEN, _one_item),
    "put_with_embedding": _Observed(EV_STORE_ITEMS_WRITTEN, _one_item),
    "put_batch": _Observed(EV_STORE_ITEMS_WRITTEN, _batch),
    "compare_and_put_batch": _Observed(EV_STORE_ITEMS_WRITTEN, _batch),
    "delete": _Observed(EV_STORE_ITEMS_DELETED, _deleted),
    "clear_namespace": _Observed(EV_STORE_ITEMS_DELETED, _deleted),
}


def _named_parameters(method: Method) -> inspect.Signature | None:
    """``method``'s signature, unless it takes ``*args`` or ``**kwargs``."""
    signature = inspect.signature(method)
    catch_all = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    if any(parameter.kind in catch_all for parameter in signature.parameters.values()):
        return None
    return signature


def _contract_signature(cls: type, name: str, method: Method) -> inspect.Signature:
    """How a call of ``method`` (``cls``'s) is read: its own signature, or, when it takes
    ``*args`` / ``**kwargs`` (an override that passes everything on to ``super()``), the
    nearest base class's that names its parameters (the contract's, at the latest)."""
    for owner in cls.__mro__:
        defined = owner.__dict__.get(name)
        if defined is not None and (signature := _named_parameters(defined)) is not None:
            return signature
    return inspect.signature(method)


def _observed(cls: type, name: str, method: Method) -> Method:
    spec = OBSERVED[name]
    signature = _contract_signature(cls, name, method)

    @functools.wraps(method)
    async def observed(self: BaseStore, *args: Any, **kwargs: Any) -> Any:
        if not listening() or _running.get() is self:
            return await method(self, *args, **kwargs)
        call = signature.bind(self, *args, **kwargs)
        if isinstance(call.arguments.get("items"), Iterator):
            # A generator of items: read once here, so that the store writes the items
            # the payload counts.
            call.arguments["items"] = list(call.arguments["items"])
        token = _running.set(self)
        started = time.perf_counter()
        try:
            result = await method(*call.args, **call.kwargs)
        finally:
            _running.reset(token)
        duration = elapsed_ms(started)
        call.apply_defaults()
        await emit(
            spec.event,
            sender=type(self),
            operation=name,
            **spec.fields(self, call, result),
            duration_ms=duration,
        )
        return result

    observed.__tulip_observed__ = True  # type: ignore[attr-defined]
    return observed


def observe_methods(cls: type) -> None:
    """Wrap the observed methods ``cls`` itself defines (once; inherited ones already are)."""
    for name in OBSERVED:
        method = cls.__dict__.get(name)
        if inspect.iscoroutinefunction(method) and not getattr(method, "__tulip_observed__", False):
            setattr(cls, name, _observed(cls, name, method))


async def swept(store: BaseStore, deleted: int, started: float) -> int:
    """Send ``store.expired.swept`` for a store's own ``sweep_expired``; returns ``deleted``.

    (PgMemory's sweep runs in :mod:`tulip_memory.retention.expiry`, which sends one per
    tenant.)
    """
    if deleted:
        await emit(
            EV_STORE_EXPIRED_SWEPT,
            sender=type(store),
            tenant=None,
            deleted=deleted,
            duration_ms=elapsed_ms(started),
        )
    return deleted
