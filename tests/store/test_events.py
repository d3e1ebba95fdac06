"""Store events, on every backend of ``STORE_FACTORIES``: writes and deletes send
``store.items.written`` / ``store.items.deleted`` with ``sender`` the store's class, one
event per call, counts and timings, never content; failed calls send nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.store.conftest import STORE_FACTORIES
from tests.store.test_contract_ttl import TTL_BACKENDS
from tulip_memory.core.clock import ManualClock
from tulip_memory.events import (
    EV_STORE_EXPIRED_SWEPT,
    EV_STORE_ITEMS_DELETED,
    EV_STORE_ITEMS_WRITTEN,
    memory_event,
)
from tulip_memory.models import MemoryItem
from tulip_memory.store import BaseStore, InMemoryStore, PgMemory, StoreCapabilityError
from tulip_memory.tenancy import tenant_context

SECRET = "s3cret-value-xyz"

STORE_EVENTS = (EV_STORE_ITEMS_WRITTEN, EV_STORE_ITEMS_DELETED, EV_STORE_EXPIRED_SWEPT)


def _tenant(store: BaseStore, root: str) -> str | None:
    return root if store.capabilities.tenant_isolated else None


def _only(sent_events, store):
    """The store events sent, each checked to come from ``store``'s class."""
    events = sent_events.of(*STORE_EVENTS)
    assert {e.sender for e in events} <= {type(store)}, events
    return [(e.event, e.fields()) for e in events]


async def test_put_sends_one_written_event_without_content(store, root, sent_events):
    await store.put((root, "notes"), "diet", {"text": SECRET}, {"source": SECRET})
    assert _only(sent_events, store) == [
        (
            EV_STORE_ITEMS_WRITTEN,
            {"operation": "put", "tenant": _tenant(store, root), "items": 1, "ttl": None},
        )
    ]
    assert SECRET not in repr(sent_events.sent) and "diet" not in repr(sent_events.sent)


async def test_a_batch_is_one_event_whatever_it_is_built_on(store, root, sent_events):
    ns = (root, "batch")
    await store.put_batch([(ns, f"k{i}", i, None) for i in range(3)])
    assert _only(sent_events, store) == [
        (
            EV_STORE_ITEMS_WRITTEN,
            {"operation": "put_batch", "tenant": _tenant(store, root), "items": 3, "ttl": None},
        )
    ]


async def test_a_generator_batch_counts_its_items_and_tenants_are_named_only_alone(
    store, root, sent_events
):
    ns = (root, "generated")
    await store.put_batch((ns, f"k{i}", i, None) for i in range(3))
    other = (f"{root}-other", "batch")
    await store.put_batch([(ns, "a", 1, None), (other, "b", 2, None)])
    assert await store.get(other, "b") == 2
    assert [fields for _event, fields in _only(sent_events, store)] == [
        {"operation": "put_batch", "tenant": _tenant(store, root), "items": 3, "ttl": None},
        {"operation": "put_batch", "tenant": None, "items": 2, "ttl": None},  # two tenants
    ]


async def test_compare_and_put_batch_says_whether_it_wrote(store, root, sent_events):
    ns = (root, "cas")
    tenant = _tenant(store, root)
    assert await store.compare_and_put_batch([(ns, "k", 1, None)], {(ns, "k"): None})
    assert not await store.compare_and_put_batch([(ns, "k", 2, None)], {(ns, "k"): None})
    written = {"operation": "compare_and_put_batch", "tenant": tenant, "ttl": None}
    assert _only(sent_events, store) == [
        (EV_STORE_ITEMS_WRITTEN, {**written, "items": 1, "written": True}),
        (EV_STORE_ITEMS_WRITTEN, {**written, "items": 0, "written": False}),
    ]


async def test_deletes_count_what_went(store, root, sent_events):
    ns = (root, "gone")
    await store.put_batch([(ns, f"k{i}", i, None) for i in range(4)])
    sent_events.clear()
    assert await store.delete(ns, "k0")
    assert not await store.delete(ns, "k0")
    assert await store.clear_namespace(ns) == 3
    tenant = _tenant(store, root)
    assert _only(sent_events, store) == [
        (EV_STORE_ITEMS_DELETED, {"operation": "delete", "tenant": tenant, "deleted": 1}),
        (EV_STORE_ITEMS_DELETED, {"operation": "delete", "tenant": tenant, "deleted": 0}),
        (EV_STORE_ITEMS_DELETED, {"operation": "clear_namespace", "tenant": tenant, "deleted": 3}),
    ]


async def test_bad_input_sends_nothing_and_writes_nothing(store, root, sent_events):
    ns = (root, "bad")
    await store.put(ns, "kept", 1)
    sent_events.clear()
    with pytest.raises(ValueError, match="key"):
        await store.put(ns, "", 2)
    with pytest.raises(ValueError):
        await store.put_batch([(ns, "fine", 1, None), (ns, "", 2, None)])
    assert _only(sent_events, store) == []
    assert await store.list_keys(ns) == ["kept"]


async def test_reads_send_nothing(store, root, sent_events):
    ns = (root, "reads")
    await store.put(ns, "k", 1)
    sent_events.clear()
    await store.get(ns, "k")
    await store.get_item(ns, "k")
    await store.list_keys(ns)
    assert _only(sent_events, store) == []


async def test_a_failing_receiver_never_costs_the_write(store, root):
    def explode(**kwargs):
        raise RuntimeError("receiver exploded")

    memory_event.connect(explode, weak=False)
    try:
        await store.put((root, "safe"), "k", 1)
    finally:
        memory_event.disconnect(explode)
    assert await store.get((root, "safe"), "k") == 1


async def test_put_with_embedding_sends_its_operation(store, root, sent_events):
    if not store.capabilities.semantic_search:  # refused: nothing written, nothing sent
        with pytest.raises(StoreCapabilityError):
            await store.put_with_embedding((root, "vec"), "k", SECRET, [1.0])
        assert _only(sent_events, store) == []
        return
    width = store.capabilities.embedding_dimension or 8
    await store.put_with_embedding((root, "vec"), "k", SECRET, [1.0] + [0.0] * (width - 1))
    assert _only(sent_events, store) == [
        (
            EV_STORE_ITEMS_WRITTEN,
            {
                "operation": "put_with_embedding",
                "tenant": _tenant(store, root),
                "items": 1,
                "ttl": None,
            },
        )
    ]
    assert SECRET not in repr(sent_events.sent)


@pytest.fixture(params=TTL_BACKENDS)
async def ttl_store(request):
    clock = ManualClock()
    instance = STORE_FACTORIES[request.param](request, clock=clock)
    yield instance, clock
    await instance.close()


async def test_ttl_is_reported_in_seconds_and_the_sweep_counts(ttl_store, root, sent_events):
    store, clock = ttl_store
    ns = (root, "short")
    await store.put(ns, "a", 1, ttl=timedelta(minutes=1))
    await store.put_batch([(ns, "b", 2, None), (ns, "c", 3, None)], ttl=5)
    assert [(e.event, e.fields()["ttl"]) for e in sent_events.of(EV_STORE_ITEMS_WRITTEN)] == [
        (EV_STORE_ITEMS_WRITTEN, 60.0),
        (EV_STORE_ITEMS_WRITTEN, 5.0),
    ]
    sent_events.clear()
    clock.advance(120)
    with tenant_context(root):
        assert await store.sweep_expired() == 3
        assert await store.sweep_expired() == 0  # nothing swept: no event
    [swept] = sent_events.of(EV_STORE_EXPIRED_SWEPT)
    if isinstance(store, PgMemory):  # swept per tenant by the retention sweep, on its table
        assert (swept.sender, swept.fields()) == (MemoryItem, {"tenant": root, "deleted": 3})
    else:
        assert (swept.sender, swept.fields()) == (type(store), {"tenant": None, "deleted": 3})


class _PassingOn(InMemoryStore):
    """Overrides that take ``*args, **kwargs`` and pass them on, as a counting or
    logging subclass does."""

    async def put_batch(self, *args, **kwargs):
        return await super().put_batch(*args, **kwargs)

    async def delete(self, *args, **kwargs):
        return await super().delete(*args, **kwargs)


async def test_overrides_taking_any_arguments_are_read_by_the_contract(sent_events):
    store = _PassingOn()
    ns = ("t", "passing-on")
    await store.put_batch([(ns, "a", 1, None), (ns, "b", 2, None)], ttl=None)
    assert await store.delete(ns, "a") is True
    written = {"operation": "put_batch", "tenant": None, "items": 2, "ttl": None}
    deleted = {"operation": "delete", "tenant": None, "deleted": 1}
    assert [(e.event, e.fields()) for e in sent_events.of(*STORE_EVENTS)] == [
        (EV_STORE_ITEMS_WRITTEN, written),
        (EV_STORE_ITEMS_DELETED, deleted),
    ]
