"""Checkpoint retention on PostgreSQL (under row-level security) and MariaDB: the newest N
per thread, idle threads, delta chains re-based so that every kept checkpoint loads to the
very same state, tenants kept apart, dry runs, events."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync

from tests.backends.test_contract import make_state
from tulip_memory.backends import MySQLCheckpointer, PostgreSQLCheckpointer
from tulip_memory.core.clock import utc_now
from tulip_memory.delta import DeltaCheckpointer, ORMDeltaStorage
from tulip_memory.events import EV_CHECKPOINT_PRUNED
from tulip_memory.models import CheckpointRecord, DeltaBlock, DeltaCheckpointRecord
from tulip_memory.retention.checkpoints import prune_checkpoints, prune_tenant_checkpoints
from tulip_memory.retention.policy import RetentionPolicy
from tulip_memory.tenancy import tenant_atomic

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "mysql"])

KINDS = {
    "postgresql": (lambda tenant: PostgreSQLCheckpointer("default", tenant=tenant), "default"),
    "mysql": (lambda tenant: MySQLCheckpointer("mysql", tenant=tenant), "mysql"),
    "delta-postgresql": (
        lambda tenant: DeltaCheckpointer(ORMDeltaStorage("default", tenant=tenant), 2),
        "default",
    ),
    "delta-mysql": (
        lambda tenant: DeltaCheckpointer(ORMDeltaStorage("mysql", tenant=tenant), 2),
        "mysql",
    ),
}


@pytest.fixture(params=sorted(KINDS))
def kind(request):
    return request.param


@pytest.fixture
def events(sent_events):
    """The ``checkpoint.pruned`` events sent so far, as (sender's name, payload without
    timing): one per tenant and table, the delta checkpointer's own are muted."""
    return lambda: [(e.sender.__name__, e.fields()) for e in sent_events.of(EV_CHECKPOINT_PRUNED)]


def _table(kind: str) -> str:
    return "DeltaCheckpointRecord" if kind.startswith("delta") else "CheckpointRecord"


def _pruned(tenant: str, checkpoints: int, threads: int) -> dict:
    return {"tenant": tenant, "thread_id": None, "checkpoints": checkpoints, "threads": threads}


def _save(checkpointer, thread, count, *, tag=""):
    ids = []
    for turn in range(1, count + 1):
        ids.append(async_to_sync(checkpointer.save)(make_state(turn, tag=tag), thread))
    return ids


def _exact(checkpointer, thread, checkpoint_id):
    """The checkpoint's state as bytes (canonical JSON): what "loads identically" compares."""
    state = async_to_sync(checkpointer.load)(thread, checkpoint_id)
    return json.dumps(state.to_checkpoint(), sort_keys=True).encode()


def _listed(checkpointer, thread):
    return async_to_sync(checkpointer.list_checkpoints)(thread, limit=1000)


def test_keep_last_keeps_the_newest_and_every_kept_one_loads_the_same(kind, events):
    make, alias = KINDS[kind]
    acme, globex = make("acme"), make("globex")
    long_ids = _save(acme, "long", 8)
    short_ids = _save(acme, "short", 2)
    other_ids = _save(globex, "long", 8, tag="g")
    before = {cid: _exact(acme, "long", cid) for cid in long_ids}

    policy = RetentionPolicy(checkpoint_keep_last=3)
    dry = prune_checkpoints(alias, ["acme"], policy=policy, dry_run=True)
    assert (dry["acme"].checkpoints, dry["acme"].threads) == (5, 0)
    assert len(_listed(acme, "long")) == 8 and events() == []  # a dry run writes nothing

    report = prune_checkpoints(alias, ["acme"], policy=policy)
    assert (report["acme"].checkpoints, report["acme"].threads) == (5, 0)
    kept = long_ids[-3:]
    assert _listed(acme, "long") == kept[::-1]
    for cid in kept:  # byte-identical states, the oldest kept one now standing alone
        assert _exact(make("acme"), "long", cid) == before[cid]
    assert _listed(acme, "short") == short_ids[::-1]
    assert _listed(globex, "long") == other_ids[::-1]  # another tenant: untouched
    assert events() == [(_table(kind), _pruned("acme", 5, 0))]
    again = prune_checkpoints(alias, ["acme"], policy=policy)
    assert again["acme"].checkpoints == 0 and len(events()) == 1  # nothing left to prune


def test_idle_threads_go_whole(kind, events):
    make, alias = KINDS[kind]
    acme = make("acme")
    _save(acme, "old", 4)
    fresh_ids = _save(acme, "fresh", 2)
    records = DeltaCheckpointRecord if kind.startswith("delta") else CheckpointRecord
    with tenant_atomic("acme", using=alias):
        records.objects.using(alias).filter(tenant="acme", thread_id="old").update(
            created_at=utc_now() - timedelta(days=40)
        )
    policy = RetentionPolicy(checkpoint_idle=timedelta(days=30))
    dry = prune_tenant_checkpoints("acme", using=alias, policy=policy, dry_run=True)
    assert (dry.checkpoints, dry.threads) == (4, 1)
    assert len(_listed(acme, "old")) == 4

    report = prune_tenant_checkpoints("acme", using=alias, policy=policy)
    assert (report.checkpoints, report.threads) == (4, 1)
    assert _listed(acme, "old") == []
    assert async_to_sync(acme.load)("old") is None
    assert _listed(acme, "fresh") == fresh_ids[::-1]
    with tenant_atomic("acme", using=alias):  # a delta thread's blocks went with it
        assert not DeltaBlock.objects.using(alias).filter(thread_id="old").exists()
    assert events() == [(_table(kind), _pruned("acme", 4, 1))]


def test_a_kept_delta_whose_parent_goes_is_rewritten_as_a_full_base():
    checkpointer = DeltaCheckpointer(ORMDeltaStorage("default", tenant="acme"), 4)
    ids = _save(checkpointer, "t", 5)  # one full checkpoint and four deltas on it
    metadata = async_to_sync(checkpointer.storage.list_checkpoints)("t", None)
    assert [m.is_full for m in metadata] == [False, False, False, False, True]
    before = {cid: _exact(checkpointer, "t", cid) for cid in ids}

    prune_tenant_checkpoints("acme", policy=RetentionPolicy(checkpoint_keep_last=2))

    metadata = async_to_sync(checkpointer.storage.list_checkpoints)("t", None)
    assert [(m.checkpoint_id, m.is_full) for m in metadata] == [(ids[4], False), (ids[3], True)]
    assert metadata[0].root_id == ids[3]
    fresh = DeltaCheckpointer(ORMDeltaStorage("default", tenant="acme"))
    assert [_exact(fresh, "t", cid) for cid in ids[3:]] == [before[cid] for cid in ids[3:]]
    referenced = {digest for m in metadata if m.is_full for digest, _ in m.blocks}
    assert set(async_to_sync(checkpointer.storage.block_sizes)("t")) == referenced


def test_every_tenant_by_default_and_both_rules_at_once():
    acme, globex = PostgreSQLCheckpointer(tenant="acme"), PostgreSQLCheckpointer(tenant="globex")
    _save(acme, "a", 5)
    _save(globex, "g", 5)
    _save(globex, "idle", 1)
    with tenant_atomic("globex"):
        CheckpointRecord.objects.filter(thread_id="idle").update(
            created_at=utc_now() - timedelta(days=3)
        )
    policy = RetentionPolicy(checkpoint_keep_last=2, checkpoint_idle=timedelta(days=2))
    report = prune_checkpoints(policy=policy)
    assert {t: (r.checkpoints, r.threads) for t, r in report.items() if r.checkpoints} == {
        "acme": (3, 0),
        "globex": (4, 1),
    }
    assert len(_listed(acme, "a")) == 2 and len(_listed(globex, "g")) == 2


def test_bad_tenants_are_refused_before_anything_runs():
    with pytest.raises(ValueError, match="not one string"):
        prune_checkpoints(tenants="acme", policy=RetentionPolicy(checkpoint_keep_last=1))
    with pytest.raises(ValueError, match="Tenant '' is not valid"):
        prune_checkpoints(tenants=[""], policy=RetentionPolicy(checkpoint_keep_last=1))


class _RolledBack(Exception):
    pass


def test_inside_an_outer_transaction_the_event_waits_for_its_commit(events):
    from django.db import transaction

    acme = PostgreSQLCheckpointer("default", tenant="acme")
    _save(acme, "t", 3)
    policy = RetentionPolicy(checkpoint_keep_last=1)
    with pytest.raises(_RolledBack), transaction.atomic():
        assert prune_tenant_checkpoints("acme", policy=policy).checkpoints == 2
        assert events() == []  # not committed yet
        raise _RolledBack
    assert events() == [] and len(_listed(acme, "t")) == 3  # rolled back: nothing pruned
    with transaction.atomic():
        prune_tenant_checkpoints("acme", policy=policy)
        assert events() == []
    assert events() == [("CheckpointRecord", _pruned("acme", 2, 0))]
