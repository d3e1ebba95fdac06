"""Two sessions updating one memory at once: every version reaches the history.

Each writer runs in its own thread (on PgMemory with its own database connection). The
store is the real one; a barrier after the read of the memory makes both writers read the
same version before either writes, which is the interleaving that used to lose a version.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from asgiref.sync import async_to_sync

from tulip_memory.manager import LLMMemoryManager, Memory, MemoryType
from tulip_memory.store import InMemoryStore

NS = ("acme", "users", "u1")
MEMORY_NS = (*NS, "user")


def racing(store_class):
    """``store_class`` whose first read of the memory in each thread waits for the other
    writer's, once armed."""

    class Racing(store_class):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.barrier = threading.Barrier(2, timeout=30)
            self.armed = False
            self.local = threading.local()

        async def get_item(self, namespace, key):
            item = await super().get_item(namespace, key)
            if self.armed and namespace == MEMORY_NS and not getattr(self.local, "met", False):
                self.local.met = True
                await asyncio.to_thread(self.barrier.wait)
            return item

    return Racing


def _save_in_own_thread(manager: LLMMemoryManager, content: str) -> None:
    try:
        async_to_sync(manager.save)([Memory(MemoryType.USER, "city", content)])
    finally:
        from django.db import connections

        connections.close_all()


def _race(store) -> list[str]:
    manager = LLMMemoryManager(store, namespace_prefix=NS)
    async_to_sync(manager.save)([Memory(MemoryType.USER, "city", "Lives in Berlin.")])
    store.armed = True
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [
            pool.submit(_save_in_own_thread, manager, content)
            for content in ("Lives in Paris.", "Lives in London.")
        ]
        for future in futures:
            future.result()
    store.armed = False
    versions = async_to_sync(manager.history)(MemoryType.USER, "city")
    current = async_to_sync(store.get_item)(MEMORY_NS, "city")
    assert current.version == 3
    assert [v.version for v in versions] == [1, 2, 3]
    assert versions[-1].valid_to is None
    return [v.content for v in versions]


def test_concurrent_updates_on_the_in_memory_store_keep_every_version():
    contents = _race(racing(InMemoryStore)())
    assert contents[0] == "Lives in Berlin."
    assert sorted(contents[1:]) == ["Lives in London.", "Lives in Paris."]


@pytest.mark.django_db(transaction=True)
def test_concurrent_updates_on_pgmemory_keep_every_version():
    from tulip_memory.store import PgMemory

    contents = _race(racing(PgMemory)())
    assert contents[0] == "Lives in Berlin."
    assert sorted(contents[1:]) == ["Lives in London.", "Lives in Paris."]


@pytest.mark.django_db(transaction=True)
def test_concurrent_first_writes_on_pgmemory_keep_both():
    """Two sessions creating the same memory at once: the second sees the first."""
    from tulip_memory.store import PgMemory

    store = racing(PgMemory)()
    manager = LLMMemoryManager(store, namespace_prefix=NS)
    store.armed = True
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [
            pool.submit(_save_in_own_thread, manager, content)
            for content in ("Lives in Paris.", "Lives in London.")
        ]
        for future in futures:
            future.result()
    store.armed = False
    versions = async_to_sync(manager.history)(MemoryType.USER, "city")
    assert [v.version for v in versions] == [1, 2]
    assert sorted(v.content for v in versions) == ["Lives in London.", "Lives in Paris."]
