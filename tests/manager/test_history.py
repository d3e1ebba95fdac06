"""Memory history over any store: InMemoryStore and PgMemory (PostgreSQL, row-level security)."""

from __future__ import annotations

import itertools
from datetime import datetime

import pytest

from tests.llm.conftest import make_client
from tulip_memory.manager import (
    ExtractionReport,
    LLMExtractor,
    LLMMemoryManager,
    Memory,
    MemoryType,
    Operation,
)
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


async def test_history_of_a_resolver_manager_outside_a_run_says_how_to_name_the_namespace(
    store,
):
    from tulip_memory.tenancy import tenant_context

    manager = LLMMemoryManager(
        store, namespace_resolver=lambda run: ("acme", "users", run.metadata["user_id"])
    )
    with tenant_context("acme"):
        with manager.scoped(NS):
            await manager.save([Memory(MemoryType.USER, "location", "Berlin")])
            await manager.save([Memory(MemoryType.USER, "location", "Paris")])
        for call in (manager.history, manager.forget):
            with pytest.raises(ValueError, match=r"manager\.scoped.*namespace=prefix"):
                await call(MemoryType.USER, "location")
        outside = await manager.history(MemoryType.USER, "location", namespace=NS)
        with manager.scoped(NS):
            inside = await manager.history(MemoryType.USER, "location")
    assert [v.content for v in outside] == [v.content for v in inside] == ["Berlin", "Paris"]


async def test_keep_history_false_keeps_none(store):
    manager = LLMMemoryManager(store, namespace_prefix=NS, keep_history=False)
    await manager.save([Memory(MemoryType.USER, "a", "one")])
    await manager.save([Memory(MemoryType.USER, "a", "two")])
    assert [v.content for v in await manager.history(MemoryType.USER, "a")] == ["two"]


async def test_a_memory_deleted_and_added_again_keeps_both_lives_in_order(store, server):
    """ADD, UPDATE, DELETE, ADD, UPDATE, UPDATE: the second life's versions restart at 1 in
    the store and must not overwrite the first life's history entries."""
    extractor = LLMExtractor(make_client(server))
    manager = LLMMemoryManager(store, extractor=extractor, namespace_prefix=NS)
    steps = [
        ("ADD", "The user lives in Berlin."),
        ("UPDATE", "The user lives in Paris."),
        ("DELETE", ""),
        ("ADD", "The user lives in Rome."),
        ("UPDATE", "The user lives in Oslo."),
        ("UPDATE", "The user lives in Lima."),
    ]
    for run, (event, content) in enumerate(steps):
        operation = Operation(event, MemoryType.USER, "city", content, f"op-{run}")
        await extractor.apply(ExtractionReport(f"run-{run}", operations=[operation]), manager)
    versions = await manager.history(MemoryType.USER, "city")
    assert [(v.content, v.version) for v in versions] == [
        ("The user lives in Berlin.", 1),
        ("The user lives in Paris.", 2),
        ("The user lives in Rome.", 1),
        ("The user lives in Oslo.", 2),
        ("The user lives in Lima.", 3),
    ]
    for earlier, later in itertools.pairwise(versions):
        assert earlier.valid_to is not None and earlier.valid_to <= later.valid_from
    assert versions[-1].valid_to is None
    assert server.requests == []  # applying asks the model nothing


async def test_entries_keyed_by_the_bare_version_are_listed_first_in_order(store):
    """History entries stored under the zero-padded version alone (the key of earlier
    releases) come before the entries written now, in version order."""
    manager = LLMMemoryManager(store, namespace_prefix=NS)
    history = (*NS, "_history", "user", "city")
    for version, (content, since, until) in enumerate(
        [
            ("The user lives in Berlin.", "2024-01-01T00:00:00+00:00", "2024-02-01T00:00:00+00:00"),
            ("The user lives in Paris.", "2024-02-01T00:00:00+00:00", "2024-03-01T00:00:00+00:00"),
        ],
        start=9,  # 9 and 10: the order of the numbers, not of their first digits
    ):
        entry = {"content": content, "metadata": {}, "valid_from": since, "valid_to": until}
        await store.put(history, f"{version:012d}", {**entry, "version": version})
    await manager.save([Memory(MemoryType.USER, "city", "The user lives in Rome.")])
    await manager.save([Memory(MemoryType.USER, "city", "The user lives in Oslo.")])
    await manager.save([Memory(MemoryType.USER, "city", "The user lives in Lima.")])
    versions = await manager.history(MemoryType.USER, "city")
    assert [v.content for v in versions] == [
        "The user lives in Berlin.",
        "The user lives in Paris.",
        "The user lives in Rome.",
        "The user lives in Oslo.",
        "The user lives in Lima.",
    ]
    # The admin lists the entries by key: the same order.
    keys = sorted(await store.list_keys(history))
    assert keys[:2] == ["000000000009", "000000000010"]
    contents = [(await store.get(history, key))["content"] for key in keys]
    assert contents == [v.content for v in versions[:-1]]
