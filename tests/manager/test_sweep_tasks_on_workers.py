"""A sweep task sent through the broker and run by the session's real Celery workers."""

from __future__ import annotations

import asyncio
import time

import pytest
from asgiref.sync import sync_to_async
from celery import current_app

from tulip_memory.core.task_names import SWEEP_EXPIRED_ITEMS
from tulip_memory.models import MemoryItem
from tulip_memory.store import PgMemory
from tulip_memory.tenancy import tenant_atomic

pytestmark = pytest.mark.django_db(transaction=True)


def _keys(tenant: str) -> list[str]:
    with tenant_atomic(tenant):
        return sorted(MemoryItem.objects.values_list("key", flat=True))


async def test_a_worker_runs_the_expiry_sweep(workers, celery_settings):
    store = PgMemory()
    await store.put(("acme", "sweep"), "short", 1, ttl=0.5)
    await store.put(("acme", "sweep"), "kept", 1)
    await asyncio.sleep(0.6)
    current_app.signature(SWEEP_EXPIRED_ITEMS).apply_async(queue=celery_settings["CELERY_QUEUE"])
    deadline = time.monotonic() + 60
    while await sync_to_async(_keys)("acme") != ["kept"]:
        assert time.monotonic() < deadline, workers.logs()
        await asyncio.sleep(0.2)
