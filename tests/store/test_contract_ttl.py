"""Expiry (``ttl=``) in the store contract, on every backend of ``STORE_FACTORIES``.

Stores advertising ``capabilities.ttl`` (InMemoryStore, HolographicStore, PgMemory) are
built with a :class:`~tulip_memory.core.clock.ManualClock`, so time moves only when a test
moves it; the others must refuse ``ttl`` with StoreCapabilityError and write nothing.
"""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync

from tests.store.conftest import STORE_FACTORIES
from tulip_memory.core.clock import ManualClock
from tulip_memory.store import StoreCapabilityError
from tulip_memory.tenancy import tenant_context

# The backends advertising capabilities.ttl (the others refuse it: see the first test).
TTL_BACKENDS = ["holographic-file", "holographic-memory", "memory", "pg", "pg-prepared"]

BAD_TTLS = [
    (-1, "must be positive"),
    (0, "must be positive"),
    (0.0, "must be positive"),
    (1e-9, "must be at least one microsecond, got 1e-09 seconds"),
    (9.9e-7, "must be at least one microsecond"),
    (math.nan, "must be a finite number"),
    (math.inf, "must be a finite number"),
    (True, "must be a number of seconds or a timedelta"),
    ("10", "must be a number of seconds or a timedelta"),
    (timedelta(0), "must be positive"),
    (timedelta(seconds=-5), "must be positive"),
    (10**12, "must be at most"),
]


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture(params=TTL_BACKENDS)
async def ttl_store(request, clock):
    """A store of a backend advertising ``ttl``, on the manual clock."""
    instance = STORE_FACTORIES[request.param](request, clock=clock)
    yield instance
    await instance.close()


def test_the_ttl_backends_are_the_ones_advertising_it(request):
    advertising = set()
    for name, factory in STORE_FACTORIES.items():
        store = factory(request)
        if store.capabilities.ttl:
            advertising.add(name)
        async_to_sync(store.close)()
    assert advertising == set(TTL_BACKENDS)


async def _visible(store, ns):
    keys = await store.list_keys(ns)
    return {key: (await store.get_item(ns, key)).value for key in keys}


async def test_ttl_is_refused_without_the_capability(store, root):
    ns = (root, "ttl")
    if store.capabilities.ttl:
        await store.put(ns, "k", 1, ttl=60)
        assert await store.get(ns, "k") == 1
        return
    with pytest.raises(StoreCapabilityError, match="ttl") as raised:
        await store.put(ns, "k", 1, ttl=60)
    assert raised.value.capability == "ttl"
    with pytest.raises(StoreCapabilityError, match="ttl"):
        await store.put_batch([(ns, "b", 2, None)], ttl=timedelta(minutes=1))
    with pytest.raises(StoreCapabilityError, match="ttl"):
        await store.sweep_expired()
    assert await store.list_keys(ns) == []
    await store.put(ns, "k", 1, ttl=None)  # no ttl is a plain write everywhere
    assert await store.get(ns, "k") == 1


async def test_expired_items_are_invisible_to_every_read_at_once(ttl_store, clock, root):
    store = ttl_store
    ns, gone_ns = (root, "notes"), (root, "short")
    await store.put(ns, "tea", {"text": "green tea in the morning"}, ttl=10)
    await store.put(ns, "car", {"text": "a red car and green tea"})
    await store.put_batch([(ns, "bike", "a green bike", None)], ttl=timedelta(seconds=5))
    await store.put(gone_ns, "only", "green tea again", ttl=10)
    assert set(await store.list_keys(ns)) == {"tea", "car", "bike"}
    assert {i.key for i in await store.search(ns, "green")} == {"tea", "car", "bike"}

    clock.advance(9.99)  # not yet
    assert await store.get(ns, "tea") == {"text": "green tea in the morning"}
    assert await store.get(ns, "bike") is None  # its 5 s have passed
    clock.advance(0.02)  # now past the ttl: gone for every read, before any sweep

    assert await store.get(ns, "tea") is None
    assert await store.get_item(ns, "tea") is None
    assert not await store.exists(ns, "tea")
    assert await store.get_batch([(ns, "tea"), (ns, "car")]) == {
        (ns, "car"): {"text": "a red car and green tea"}
    }
    assert await store.list_keys(ns) == ["car"]
    assert [i.key for i in await store.search(ns, "green tea")] == ["car"]
    assert [i.key for i in await store.search(ns)] == ["car"]
    hits = await store.search_many([ns, gone_ns], query="tea")
    assert [[i.key for i in found] for found in hits] == [["car"], []]
    with tenant_context(root):
        assert await store.list_namespaces(prefix=(root,)) == [ns]
    # A write over an expired key creates it anew; compare-and-put sees it absent.
    assert await store.compare_and_put_batch([(ns, "tea", "fresh", None)], {(ns, "tea"): None})
    item = await store.get_item(ns, "tea")
    assert (item.value, item.version) == ("fresh", 1)
    assert not await store.delete(gone_ns, "only")  # already gone
    assert await store.clear_namespace(ns) == 2  # car and the new tea


async def test_expired_embeddings_are_invisible(ttl_store, clock, root):
    store = ttl_store
    if not store.capabilities.semantic_search:
        return
    width = store.capabilities.embedding_dimension or 4
    vector = [1.0] + [0.0] * (width - 1)
    ns = (root, "vectors")
    await store.put_with_embedding(ns, "short", "a", vector, ttl=1)
    await store.put_with_embedding(ns, "long", "b", vector)
    clock.advance(2)
    assert await store.get_embedding(ns, "short") is None
    hits = await store.search_by_embedding(ns, vector)
    assert [hit.item.key for hit in hits] == ["long"]


async def test_the_sweep_deletes_expired_items_only(ttl_store, clock, root):
    store = ttl_store
    ns = (root, "sweep")
    await store.put_batch([(ns, f"s{i}", i, None) for i in range(3)], ttl=1)
    await store.put(ns, "later", "x", ttl=100)
    await store.put(ns, "never", "y")
    with tenant_context(root):  # PgMemory sweeps the bound tenant (else every tenant)
        assert await store.sweep_expired() == 0
        clock.advance(2)
        assert await store.sweep_expired() == 3
        assert await store.sweep_expired() == 0
    assert await _visible(store, ns) == {"later": "x", "never": "y"}
    clock.advance(200)
    with tenant_context(root):
        assert await store.sweep_expired() == 1
    assert await _visible(store, ns) == {"never": "y"}


async def test_a_write_without_ttl_clears_the_expiry_and_a_new_ttl_replaces_it(
    ttl_store, clock, root
):
    store = ttl_store
    ns = (root, "rewrite")
    await store.put(ns, "cleared", 1, ttl=10)
    await store.put(ns, "cleared", 2)  # no ttl: never expires now
    await store.put(ns, "extended", 1, ttl=10)
    clock.advance(8)
    await store.put(ns, "extended", 2, ttl=10)  # expires 10 s from now
    clock.advance(8)
    assert await _visible(store, ns) == {"extended": 2, "cleared": 2}
    assert (await store.get_item(ns, "extended")).version == 2
    clock.advance(3)
    assert await _visible(store, ns) == {"cleared": 2}
    clock.advance(10**6)
    assert (await store.get_item(ns, "cleared")).version == 2


async def test_an_expired_key_written_again_starts_over(ttl_store, clock, root):
    store = ttl_store
    ns = (root, "again")
    await store.put(ns, "k", "old", ttl=1)
    before = await store.get_item(ns, "k")
    clock.advance(2)
    await store.put(ns, "k", "new")
    item = await store.get_item(ns, "k")
    assert (item.value, item.version) == ("new", 1)
    assert item.created_at > before.created_at


@pytest.mark.parametrize(("ttl", "message"), BAD_TTLS, ids=repr)
async def test_a_bad_ttl_is_a_value_error_and_writes_nothing(ttl_store, root, ttl, message):
    store = ttl_store
    ns = (root, "bad")
    await store.put(ns, "kept", "v", ttl=30)
    before = await store.get_item(ns, "kept")
    with pytest.raises(ValueError, match=f"ttl {message}"):
        await store.put(ns, "kept", "changed", ttl=ttl)
    with pytest.raises(ValueError, match=f"ttl {message}"):
        await store.put(ns, "new", "v", ttl=ttl)
    with pytest.raises(ValueError, match=f"ttl {message}"):
        await store.put_batch([(ns, "kept", "changed", None), (ns, "b", 1, None)], ttl=ttl)
    assert await store.list_keys(ns) == ["kept"]
    assert await store.get_item(ns, "kept") == before


async def test_ttl_as_seconds_or_timedelta(ttl_store, clock, root):
    store = ttl_store
    ns = (root, "kinds")
    await store.put(ns, "int", 1, ttl=2)
    await store.put(ns, "float", 1, ttl=2.5)
    await store.put(ns, "delta", 1, ttl=timedelta(seconds=3))
    clock.advance(2.2)
    assert set(await store.list_keys(ns)) == {"float", "delta"}
    clock.advance(0.5)
    assert await store.list_keys(ns) == ["delta"]


async def test_the_shortest_ttls_are_written(ttl_store, clock, root):
    """A microsecond is a valid ttl on every backend, as one item and in a batch."""
    store = ttl_store
    ns = (root, "short")
    await store.put(ns, "micro", 1, ttl=timedelta(microseconds=1))
    await store.put_batch([(ns, "float", 2, None)], ttl=5e-05)
    assert set(await store.list_keys(ns)) == {"micro", "float"}  # the clock has not moved
    clock.advance(0.001)
    assert await store.list_keys(ns) == []


async def test_the_namespaced_views_pass_ttl_through(ttl_store, clock, root):
    from tulip_memory.store import NamespacedStore, StoreContext

    store = ttl_store
    view = NamespacedStore(store, (root, "view"))
    await view.put("short", 1, ttl=10)
    await view.put("long", 2, ttl=timedelta(hours=1))
    context = StoreContext(store, tenant=root, user_id="u1")
    await context.remember("diet", "vegetarian", ttl=10)
    await context.set_global("notice", "closed on Friday", ttl=10)
    await context.remember("name", "Ada")
    if store.capabilities.semantic_search:
        width = store.capabilities.embedding_dimension or 4
        await view.put_with_embedding("vec", 3, [1.0] + [0.0] * (width - 1), ttl=10)
        await context.remember_with_embedding("v", 4, [1.0] + [0.0] * (width - 1), ttl=10)
    clock.advance(11)
    assert await view.get("short") is None and await view.get("vec") is None
    assert await view.get("long") == 2
    assert await context.get_user_memory("diet") is None
    assert await context.get_user_memory("v") is None
    assert await context.get_global("notice") is None
    assert await context.get_user_memory("name") == "Ada"
    with pytest.raises(ValueError, match="ttl"):  # bad ttl: refused, nothing written
        await view.put("bad", 1, ttl=-1)
    assert await view.get("bad") is None


@pytest.mark.parametrize("backend", sorted(set(STORE_FACTORIES) - set(TTL_BACKENDS)))
async def test_the_views_of_a_store_without_ttl_refuse_it(request, backend, root):
    from tulip_memory.store import NamespacedStore, StoreContext

    store = STORE_FACTORIES[backend](request)
    try:
        view = NamespacedStore(store, (root, "view"))
        with pytest.raises(StoreCapabilityError, match="ttl"):
            await view.put("k", 1, ttl=10)
        with pytest.raises(StoreCapabilityError, match="ttl"):
            await StoreContext(store, user_id="u1").remember("k", 1, ttl=10)
        assert await view.get("k") is None
    finally:
        await store.close()
