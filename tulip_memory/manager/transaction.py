"""Several async store calls as one database transaction, for ORM-backed stores: how an
LLM run's decisions reach ``PgMemory`` all or nothing (docs/design/extraction.md).
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
