"""Several async store calls as one database transaction, for ORM-backed stores.

:func:`in_one_transaction` is how an LLM extraction run's decisions reach ``PgMemory`` all
or nothing (:mod:`tulip_memory.manager.consolidation`). ``PgMemory`` runs every call in its
own ``tenant_atomic`` on Django's thread-sensitive executor thread; here that thread opens
``transaction.atomic(using)`` first and runs the coroutine with ``async_to_sync`` inside it,
so each of its store calls is sent back to this same thread (asgiref routes thread-sensitive
calls made under ``async_to_sync`` to the thread that called it) and becomes a savepoint
of the one outer transaction. While it runs, other coroutines' thread-sensitive calls wait
for that thread, so none of them can slip into the transaction.

Imported lazily, only for a store with a Django database alias: it imports ``django.db``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from asgiref.sync import async_to_sync, sync_to_async

__all__ = ["in_one_transaction"]

T = TypeVar("T")


async def in_one_transaction(using: str, work: Callable[[], Awaitable[T]]) -> T:
    """Run ``work()`` inside one ``transaction.atomic(using=using)``; roll back if it raises.

    ``work`` must only talk to the database through the ORM of this process (a store on
    ``using``); it must not wait for other tasks that need the database.
    """
    from django.db import transaction

    def run() -> T:
        with transaction.atomic(using=using):
            return async_to_sync(work)()

    return await sync_to_async(run, thread_sensitive=True)()
