"""The expiry sweep of PgMemory on PostgreSQL: every tenant (each under its row-level
security), in batches, only expired rows, a dry run that counts, one event per tenant."""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.db import connection

from tulip_memory.core.clock import ManualClock
from tulip_memory.events import EV_STORE_EXPIRED_SWEPT
from tulip_memory.models import MemoryItem
from tulip_memory.retention.expiry import sweep_expired_items, sweep_expired_tenant
from tulip_memory.store import PgMemory
from tulip_memory.tenancy import tenant_atomic

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def events(sent_events):
    """The ``store.expired.swept`` payloads sent so far (without timing), from MemoryItem."""

    def sent():
        swept = sent_events.of(EV_STORE_EXPIRED_SWEPT)
        assert {e.sender for e in swept} <= {MemoryItem}
        return [e.fields() for e in swept]

    return sent


def _rows(tenant: str) -> list[str]:
    with tenant_atomic(tenant):
        return sorted(MemoryItem.objects.values_list("key", flat=True))


def test_the_sweep_deletes_the_expired_rows_of_every_tenant(events):
    clock = ManualClock()
    store = PgMemory(clock=clock)
    put_batch = async_to_sync(store.put_batch)
    put_batch([(("acme", "n"), f"short{i}", i, None) for i in range(5)], ttl=10)
    put_batch([(("globex", "n"), "short", 1, None)], ttl=10)
    put_batch([(("acme", "n"), "long", 1, None)], ttl=1000)
    put_batch([(("acme", "n"), "forever", 1, None), (("globex", "n"), "forever", 1, None)])
    clock.advance(11)
    assert async_to_sync(store.list_keys)(("acme", "n")) == ["forever", "long"]  # at once

    assert sweep_expired_items(now=clock(), dry_run=True) == {"acme": 5, "globex": 1}
    assert len(_rows("acme")) == 7 and events() == []

    assert sweep_expired_tenant("acme", now=clock(), batch_size=2) == 5  # three batches
    assert _rows("acme") == ["forever", "long"]
    assert sweep_expired_items(now=clock()) == {"acme": 0, "globex": 1}
    assert _rows("globex") == ["forever"]
    assert events() == [{"tenant": "acme", "deleted": 5}, {"tenant": "globex", "deleted": 1}]


def test_pgmemory_sweeps_the_named_tenants_and_refuses_bad_ones():
    clock = ManualClock()
    store = PgMemory(clock=clock)
    async_to_sync(store.put)(("acme", "n"), "k", 1, ttl=1)
    async_to_sync(store.put)(("globex", "n"), "k", 1, ttl=1)
    clock.advance(2)
    assert async_to_sync(store.sweep_expired)(tenants=["globex"]) == 1
    assert _rows("acme") == ["k"]  # still there (invisible), until its tenant is swept
    with pytest.raises(ValueError, match="not one string"):
        async_to_sync(store.sweep_expired)(tenants="acme")
    with pytest.raises(ValueError, match="tenants"):
        async_to_sync(store.sweep_expired)(tenants=[""])
    assert async_to_sync(store.sweep_expired)() == 1  # no tenant bound: every tenant


def test_the_expiry_column_and_its_partial_index():
    clock = ManualClock()
    store = PgMemory(clock=clock)
    async_to_sync(store.put)(("acme", "n"), "k", 1, ttl=60)
    async_to_sync(store.put)(("acme", "n"), "plain", 1)
    with tenant_atomic("acme"):
        expiries = dict(MemoryItem.objects.values_list("key", "expires_at"))
    assert expiries == {"k": clock() + timedelta(seconds=60), "plain": None}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'tulip_store_item_expiry'"
        )
        (definition,) = cursor.fetchone()
    assert "(tenant, expires_at)" in definition and "expires_at IS NOT NULL" in definition


class _RolledBack(Exception):
    pass


def test_inside_an_outer_transaction_the_event_waits_for_its_commit(events):
    from django.db import transaction

    clock = ManualClock()
    async_to_sync(PgMemory(clock=clock).put)(("acme", "n"), "k", 1, ttl=1)
    clock.advance(2)
    with pytest.raises(_RolledBack), transaction.atomic():
        assert sweep_expired_tenant("acme", now=clock()) == 1
        assert events() == []  # not committed yet
        raise _RolledBack
    assert events() == [] and _rows("acme") == ["k"]  # rolled back: nothing was swept
    with transaction.atomic():
        assert sweep_expired_tenant("acme", now=clock()) == 1
        assert events() == []
    assert events() == [{"tenant": "acme", "deleted": 1}]
