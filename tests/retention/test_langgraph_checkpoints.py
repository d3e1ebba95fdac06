"""The checkpoint retention sweep on LangGraph threads (DjangoSaver): the newest N of each
namespace stay and read back exactly as before, idle threads go whole, dry runs and other
tenants are untouched, and one event per tenant reports it."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.langgraph_agent import build_agent, user_turn
from tulip_memory.core.clock import utc_now
from tulip_memory.events import EV_CHECKPOINT_PRUNED
from tulip_memory.langgraph import DjangoSaver
from tulip_memory.models import LangGraphCheckpoint
from tulip_memory.retention.checkpoints import prune_checkpoints, prune_tenant_checkpoints
from tulip_memory.retention.policy import RetentionPolicy
from tulip_memory.tenancy import tenant_atomic

pytestmark = pytest.mark.django_db(transaction=True)


def _config(thread_id: str) -> dict:
    return {"configurable": {"thread_id": thread_id}}


def _chat(tenant: str, thread: str, turns: int):
    graph = build_agent(DjangoSaver(tenant=tenant))
    for turn in range(turns):
        graph.invoke(user_turn(turn), _config(thread))
    return graph


def _history(tenant: str, thread: str) -> list[tuple[str, dict]]:
    """(checkpoint id, channel values) of every checkpoint, newest first, as a fresh saver
    (nothing cached) reads them."""
    saver = DjangoSaver(tenant=tenant)
    return [
        (t.config["configurable"]["checkpoint_id"], t.checkpoint["channel_values"])
        for t in saver.list(_config(thread))
    ]


def _rows(model, tenant: str, thread: str) -> int:
    with tenant_atomic(tenant):
        return model.objects.filter(tenant=tenant, thread_id=thread).count()


def test_keep_last_keeps_the_newest_of_a_langgraph_thread_exactly(sent_events):
    _chat("acme", "long", 4)  # several checkpoints per turn: far more than 3
    _chat("acme", "short", 1)
    _chat("globex", "long", 4)
    before = _history("acme", "long")
    others = _history("globex", "long")
    short = _history("acme", "short")
    assert len(before) > 6

    policy = RetentionPolicy(checkpoint_keep_last=3)
    expected = len(before) - 3 + max(0, len(short) - 3)
    dry = prune_checkpoints("default", ["acme"], policy=policy, dry_run=True)
    assert (dry["acme"].checkpoints, dry["acme"].threads) == (expected, 0)
    assert _history("acme", "long") == before and sent_events.of(EV_CHECKPOINT_PRUNED) == []

    report = prune_checkpoints("default", ["acme"], policy=policy)
    assert (report["acme"].checkpoints, report["acme"].threads) == (expected, 0)
    after = _history("acme", "long")
    assert after == before[:3]  # the same ids with the very same channel values
    assert _history("globex", "long") == others  # another tenant: untouched
    assert prune_tenant_checkpoints("acme", policy=policy).checkpoints == 0  # nothing left
    # The oldest kept one has no parent left; the graph goes on from the newest.
    oldest = DjangoSaver(tenant="acme").get_tuple(
        {"configurable": {"thread_id": "long", "checkpoint_ns": "", "checkpoint_id": after[-1][0]}},
    )
    assert oldest.parent_config is None
    graph = build_agent(DjangoSaver(tenant="acme"))
    graph.invoke(user_turn(99), _config("long"))
    assert len(graph.get_state(_config("long")).values["messages"]) == 4 * 5

    [event] = sent_events.of(EV_CHECKPOINT_PRUNED)
    assert event.sender is LangGraphCheckpoint
    assert event.fields() == {
        "tenant": "acme",
        "thread_id": None,
        "checkpoints": expected,
        "threads": 0,
    }


def test_idle_langgraph_threads_go_whole_with_their_values_and_writes():
    _chat("acme", "old", 2)
    _chat("acme", "fresh", 1)
    with tenant_atomic("acme"):
        LangGraphCheckpoint.objects.filter(tenant="acme", thread_id="old").update(
            created_at=utc_now() - timedelta(days=40)
        )
    count = len(_history("acme", "old"))
    fresh = _history("acme", "fresh")
    policy = RetentionPolicy(checkpoint_idle=timedelta(days=30))
    dry = prune_tenant_checkpoints("acme", policy=policy, dry_run=True)
    assert (dry.checkpoints, dry.threads) == (count, 1)
    assert len(_history("acme", "old")) == count

    report = prune_tenant_checkpoints("acme", policy=policy)
    assert (report.checkpoints, report.threads) == (count, 1)
    assert _rows(LangGraphCheckpoint, "acme", "old") == 0
    assert _history("acme", "fresh") == fresh


def test_keep_newest_refuses_a_bad_count_and_deletes_nothing():
    _chat("acme", "t", 1)
    before = _history("acme", "t")
    saver = DjangoSaver(tenant="acme")
    for bad in (0, -1, True, "3", 1.5):
        with pytest.raises(ValueError, match="keep_last must be an int >= 1"):
            saver.keep_newest(["t"], bad)
    assert _history("acme", "t") == before
