"""Memory history over any store: InMemoryStore and PgMemory (PostgreSQL, row-level security)."""

from __future__ import annotations

import itertools
from datetime import datetime

import pytest

from tulip_memory.manager import LLMMemoryManager, Memory, MemoryType
from tulip_memory.store import InMemoryStore

NS = ("acme", "users", "u1")


@pytest.fixture(
    params=["memory", pytest.param("pg", marks=pytest.mark.django_db(transaction=True))]
)
def store(request):
    if request.param == "memory":
        return InMemoryStore()
    from tulip_memory.store import PgMemory

    return PgMemory()


async def test_update_keeps_what_the_memory_said_before_and_when(store):
    manager = LLMMemoryManager(store, namespace_prefix=NS)
    await manager.save(
        [Memory(MemoryType.USER, "role", "The user is a nurse.", {"source": "chat"})]
    )
    first = await store.get_item((*NS, "user"), "role")
    await manager.save([Memory(MemoryType.USER, "role", "The user is a nurse.")])  # same content
    await manager.save([Memory(MemoryType.USER, "role", "The user is a surgeon.")])
    await manager.save([Memory(MemoryType.USER, "role", "The user is a chief surgeon.")])
    versions = await manager.history(MemoryType.USER, "role")
    assert [v.content for v in versions] == [
        "The user is a nurse.",
        "The user is a surgeon.",
        "The user is a chief surgeon.",
    ]
    # Valid since it was first said (re-stating it did not move that), until replaced.
    assert versions[0].valid_from == datetime.fromisoformat(first.value["content_since"])
    assert versions[0].valid_from <= first.updated_at
    for earlier, later in itertools.pairwise(versions):
        assert earlier.valid_to is not None and earlier.valid_to <= later.valid_from
    assert versions[-1].valid_to is None
    # Retrieval reads memories only, never their history.
    assert [m.content for m in await manager.retrieve()] == ["The user is a chief surgeon."]


async def test_forget_removes_the_memory_and_its_history(store):
    manager = LLMMemoryManager(store, namespace_prefix=NS)
    await manager.save([Memory(MemoryType.PROJECT, "stack", "Django 5")])
    await manager.save([Memory(MemoryType.PROJECT, "stack", "Django 6")])
    await manager.save([Memory(MemoryType.PROJECT, "db", "PostgreSQL")])
    assert await manager.forget(MemoryType.PROJECT, "stack") is True
    assert await manager.history(MemoryType.PROJECT, "stack") == []
    assert await manager.forget("project", "stack") is False
    assert [m.key for m in await manager.retrieve()] == ["db"]
    assert [v.content for v in await manager.history("project", "db")] == ["PostgreSQL"]


async def test_pruned_memories_lose_their_history_too(store):
    manager = LLMMemoryManager(store, namespace_prefix=NS, max_memories=1)
    await manager.save([Memory(MemoryType.USER, "a", "one")])
    await manager.save([Memory(MemoryType.USER, "a", "two")])
    await manager.save([Memory(MemoryType.USER, "b", "three")])
    assert await manager.history(MemoryType.USER, "a") == []


async def test_history_is_per_namespace_and_can_be_read_for_another_one(store):
    manager = LLMMemoryManager(store, namespace_prefix=NS)
    with manager.scoped(("acme", "users", "u2")):
        await manager.save([Memory(MemoryType.USER, "name", "Ada")])
        await manager.save([Memory(MemoryType.USER, "name", "Grace")])
    assert await manager.history(MemoryType.USER, "name") == []
    other = await manager.history(MemoryType.USER, "name", namespace=("acme", "users", "u2"))
    assert [v.content for v in other] == ["Ada", "Grace"]


async def test_keep_history_false_keeps_none(store):
    manager = LLMMemoryManager(store, namespace_prefix=NS, keep_history=False)
    await manager.save([Memory(MemoryType.USER, "a", "one")])
    await manager.save([Memory(MemoryType.USER, "a", "two")])
    assert [v.content for v in await manager.history(MemoryType.USER, "a")] == ["two"]
