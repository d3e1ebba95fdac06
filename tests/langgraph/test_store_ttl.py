"""DjangoStore's TTL, on a manual clock: ttl in minutes (or ttl_config's default_ttl),
expired items invisible at once to get, search and list_namespaces, reads that refresh
the expiry (refresh_ttl / refresh_on_read), the sweep, and bad TTLs refused with nothing
written. LangGraph's reference InMemoryStore has no TTL, so these are checked against
LangGraph's documented semantics, not as pairs."""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async

from tulip_memory.core.clock import ManualClock
from tulip_memory.langgraph import DjangoStore
from tulip_memory.models import MemoryItem
from tulip_memory.tenancy import tenant_atomic

pytestmark = pytest.mark.django_db(transaction=True)

NS = ("memories", "u1")


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
def make(clock):
    made: list[DjangoStore] = []

    def build(**options) -> DjangoStore:
        made.append(DjangoStore(tenant="acme", clock=clock, **options))
        return made[-1]

    yield build
    for store in made:
        store.close()


def _stored_keys(tenant: str) -> list[str]:
    with tenant_atomic(tenant):
        return sorted(MemoryItem.objects.values_list("key", flat=True))


def _row(tenant: str, key: str) -> MemoryItem:
    with tenant_atomic(tenant):
        return MemoryItem.objects.get(key=key)


def _keys(items) -> list[str]:
    return sorted(item.key for item in items)


async def test_an_item_expires_after_its_ttl_for_every_read(make, clock):
    store = make()
    await store.aput(NS, "short", {"text": "green tea"}, ttl=1)  # minutes
    await store.aput(NS, "long", {"text": "green tea"}, ttl=60)
    await store.aput(("other",), "short", {"text": "tea"}, ttl=1)
    await store.aput(NS, "forever", {"text": "green tea"})
    clock.advance(59)
    assert (await store.aget(NS, "short", refresh_ttl=False)).value == {"text": "green tea"}
    clock.advance(2)  # 61 s: "short" is gone for every read, before any sweep
    assert await store.aget(NS, "short") is None
    assert _keys(await store.asearch(NS, query="green tea")) == ["forever", "long"]
    assert _keys(await store.asearch(NS)) == ["forever", "long"]
    assert await store.alist_namespaces() == [NS]  # ("other",) held only an expired item
    # A write makes it anew.
    await store.aput(NS, "short", {"text": "again"})
    assert (await store.aget(NS, "short")).value == {"text": "again"}


async def test_reads_refresh_the_expiry_unless_told_not_to(make, clock):
    store = make()
    await store.aput(NS, "read", {"text": "kept alive by reads"}, ttl=1)
    await store.aput(NS, "found", {"text": "kept alive by searches"}, ttl=1)
    await store.aput(NS, "unread", {"text": "left alone"}, ttl=1)
    for _ in range(3):
        clock.advance(50)
        assert await store.aget(NS, "read") is not None  # refresh_ttl defaults to True
        found = await store.asearch(NS, query="kept alive by searches", limit=2)
        assert _keys(found) == ["found", "read"]
    assert await store.aget(NS, "unread") is None
    clock.advance(50)
    assert await store.aget(NS, "read", refresh_ttl=False) is not None  # 50 s after a refresh
    clock.advance(20)
    assert await store.aget(NS, "read") is None  # the last read did not refresh it


async def test_ttl_config_gives_the_default_ttl_and_the_refresh_default(make, clock):
    store = make(ttl_config={"default_ttl": 2, "refresh_on_read": False})
    await store.aput(NS, "defaulted", {"v": 1})
    await store.aput(NS, "explicit", {"v": 2}, ttl=10)
    await store.aput(NS, "never", {"v": 3}, ttl=None)  # None: no expiry, not the default
    clock.advance(100)
    assert await store.aget(NS, "defaulted") is not None  # read, but not refreshed
    clock.advance(21)
    assert await store.aget(NS, "defaulted") is None
    assert await store.aget(NS, "explicit") is not None
    clock.advance(10**6)
    assert await store.aget(NS, "never") is not None


async def test_the_sweep_deletes_the_expired_rows_of_the_tenant_only(make, clock):
    acme = make()
    globex = DjangoStore(tenant="globex", clock=clock)
    try:
        await acme.aput(NS, "a", {"v": 1}, ttl=1)
        await acme.aput(NS, "b", {"v": 1})
        await globex.aput(NS, "g", {"v": 1}, ttl=1)
        clock.advance(61)
        assert await acme.asweep_ttl() == 1
        assert await sync_to_async(acme.sweep_ttl)() == 0
        assert await sync_to_async(_stored_keys)("acme") == ["b"]
        # Another tenant's expired row waits for its own sweep.
        assert await sync_to_async(_stored_keys)("globex") == ["g"]
    finally:
        globex.close()


@pytest.mark.parametrize(
    "ttl, problem",
    [
        (-1, "must be a positive number of minutes"),
        (0, "must be a positive number of minutes"),
        (float("nan"), "must be a positive number of minutes"),
        (True, "must be a positive number of minutes"),
        ("5", "must be a positive number of minutes"),
        (10**12, "refused"),
    ],
)
async def test_a_bad_ttl_is_refused_and_the_batch_writes_nothing(make, ttl, problem):
    store = make()
    await store.aput(NS, "kept", {"v": 1}, ttl=5)
    with pytest.raises(ValueError, match=problem):
        await store.aput(NS, "new", {"v": 2}, ttl=ttl)
    assert await store.aget(NS, "new") is None
    assert (await store.aget(NS, "kept")).value == {"v": 1}


@pytest.mark.parametrize(
    "config, problem",
    [
        ("1h", "must be a dict"),
        ({"default_tl": 5}, "unknown keys"),
        ({"default_ttl": -5}, "must be a positive number of minutes"),
        ({"refresh_on_read": "yes"}, "must be a bool"),
        ({"sweep_interval_minutes": 5}, "tulip_memory.sweep_expired_items"),
    ],
)
def test_a_bad_ttl_config_is_refused_at_construction(config, problem):
    with pytest.raises(ValueError, match=problem):
        DjangoStore(tenant="acme", ttl_config=config)


async def test_the_expiry_and_ttl_are_stored_on_the_row(make, clock):
    store = make()
    await store.aput(NS, "k", {"v": 1}, ttl=1.5)
    row = await sync_to_async(_row)("acme", "k")
    assert row.ttl == timedelta(seconds=90)
    assert row.expires_at == clock() + timedelta(seconds=90)
