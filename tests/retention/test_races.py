"""The retention sweeps against a writer that commits between their "find" and their
"delete": a thread found idle then written to keeps everything it holds (and meets the
newest N rule instead), an item found expired then written anew stays, and the reports
and events count only what was deleted.

The writer runs on another thread (its own connection, committed when it returns) at a
fixed point of the sweep: right after the sweep found the idle threads or selected the
expired items — the window a real concurrent request can hit. Two more tests hold a
LangGraph save's transaction open until a deletion waits for it: the idle sweep's, and the
newest N rule's (or ``delete_for_runs``') deleting the checkpoint the save stores a delta
row against."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

import pytest
from asgiref.sync import async_to_sync
from django.db import connections, transaction

from tests.backends.test_contract import make_state
from tests.langgraph_agent import build_agent, user_turn
from tests.lock_waits import waiting_for_locks
from tests.threads import OnItsOwnConnections
from tulip_memory.backends import MySQLCheckpointer, PostgreSQLCheckpointer
from tulip_memory.core.clock import ManualClock, utc_now
from tulip_memory.delta import DeltaCheckpointer, ORMDeltaStorage
from tulip_memory.events import EV_CHECKPOINT_PRUNED, EV_STORE_EXPIRED_SWEPT
from tulip_memory.langgraph import DjangoSaver
from tulip_memory.models import (
    CheckpointRecord,
    DeltaBlock,
    DeltaCheckpointRecord,
    LangGraphCheckpoint,
    MemoryItem,
)
from tulip_memory.models.langgraph import LangGraphCheckpointQuerySet
from tulip_memory.retention.checkpoints import prune_tenant_checkpoints
from tulip_memory.retention.expiry import sweep_expired_tenant
from tulip_memory.retention.policy import RetentionPolicy
from tulip_memory.store import PgMemory
from tulip_memory.tenancy import tenant_atomic

T = TypeVar("T")

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "mysql"])

IDLE = timedelta(days=30)

KINDS = {
    "postgresql": (lambda: PostgreSQLCheckpointer("default", tenant="acme"), "default"),
    "mysql": (lambda: MySQLCheckpointer("mysql", tenant="acme"), "mysql"),
    "delta-postgresql": (
        lambda: DeltaCheckpointer(ORMDeltaStorage("default", tenant="acme"), 2),
        "default",
    ),
    "delta-mysql": (lambda: DeltaCheckpointer(ORMDeltaStorage("mysql", tenant="acme"), 2), "mysql"),
}


def _commit_elsewhere(write: Callable[[], object]) -> None:
    """Run ``write`` on another thread, on its own connections (committed on return)."""
    worker = OnItsOwnConnections(write)
    worker.start()
    worker.join_and_raise()


@pytest.fixture
def writer_at(monkeypatch):
    """``writer_at(cls, name, write, before=False)``: at the first call of ``cls.name``,
    ``write`` commits on another thread, after that call (before it with ``before``);
    later calls are left alone. Returns a list that is non-empty once ``write`` ran."""

    def install(
        cls: type, name: str, write: Callable[[], object], *, before: bool = False
    ) -> list[object]:
        original = getattr(cls, name)
        done: list[object] = []

        def hooked(self, *args, **kwargs):
            first = not done
            done.append(True)
            if first and before:
                _commit_elsewhere(write)
            result = original(self, *args, **kwargs)
            if first and not before:
                _commit_elsewhere(write)
            return result

        monkeypatch.setattr(cls, name, hooked)
        return done

    return install


def _age(model, alias: str, thread: str) -> None:
    """Make every row of the thread 40 days old: idle for a 30-day rule."""
    with tenant_atomic("acme", using=alias):
        model.objects.using(alias).filter(tenant="acme", thread_id=thread).update(
            created_at=utc_now() - timedelta(days=40)
        )


def _save(checkpointer, thread: str, count: int, first: int = 1) -> list[str]:
    return [
        async_to_sync(checkpointer.save)(make_state(turn), thread)
        for turn in range(first, first + count)
    ]


def _listed(checkpointer, thread: str) -> list[str]:
    return async_to_sync(checkpointer.list_checkpoints)(thread, limit=1000)


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("keep", [None, 2], ids=["idle-rule", "both-rules"])
def test_a_thread_written_after_it_was_found_idle_keeps_its_checkpoints(
    kind, keep, writer_at, sent_events
):
    make, alias = KINDS[kind]
    delta = kind.startswith("delta")
    model = DeltaCheckpointRecord if delta else CheckpointRecord
    checkpointer = make()
    back = _save(checkpointer, "back", 2)
    old = _save(checkpointer, "old", 3)
    _age(model, alias, "back")
    _age(model, alias, "old")
    fresh: list[str] = []

    def user_comes_back() -> None:  # another request, another connection
        fresh.extend(_save(make(), "back", 1, first=3))

    written = writer_at(type(model.objects.all()), "threads_idle_since", user_comes_back)
    policy = RetentionPolicy(checkpoint_idle=IDLE, checkpoint_keep_last=keep)
    report = prune_tenant_checkpoints("acme", using=alias, policy=policy)

    assert written and len(fresh) == 1
    everything = fresh + back[::-1]  # newest first
    kept = everything if keep is None else everything[:keep]
    assert _listed(make(), "back") == kept
    # Every kept checkpoint still loads (a delta one whose parent went was re-based).
    for checkpoint_id in kept:
        assert async_to_sync(make().load)("back", checkpoint_id) is not None
    assert _listed(make(), "old") == []
    pruned = len(old) + len(everything) - len(kept)
    assert (report.checkpoints, report.threads) == (pruned, 1)
    with tenant_atomic("acme", using=alias):
        assert not DeltaBlock.objects.using(alias).filter(thread_id="old").exists()
    assert [e.fields() for e in sent_events.of(EV_CHECKPOINT_PRUNED)] == [
        {"tenant": "acme", "thread_id": None, "checkpoints": pruned, "threads": 1}
    ]


def _chat(thread: str, turns: int, first: int = 0) -> None:
    graph = build_agent(DjangoSaver(tenant="acme"))
    for turn in range(first, first + turns):
        graph.invoke(user_turn(turn), {"configurable": {"thread_id": thread}})


def _chat_with(graph, thread: str, turn: int, **configurable: str) -> None:
    """One turn of ``graph`` (``configurable``: a ``checkpoint_id`` to fork from, a
    ``run_id`` for its checkpoints' metadata)."""
    graph.invoke(user_turn(turn), {"configurable": {"thread_id": thread, **configurable}})


def _langgraph_history(thread: str) -> list[str]:
    """The thread's checkpoint ids, newest first, as a fresh saver reads them."""
    saver = DjangoSaver(tenant="acme")
    config = {"configurable": {"thread_id": thread}}
    return [t.config["configurable"]["checkpoint_id"] for t in saver.list(config)]


def _langgraph_state(thread: str) -> dict:
    """The channel values of the thread's newest checkpoint (what the graph goes on from)."""
    graph = build_agent(DjangoSaver(tenant="acme"))
    return graph.get_state({"configurable": {"thread_id": thread}}).values


@pytest.mark.parametrize("keep", [None, 3], ids=["idle-rule", "both-rules"])
def test_a_langgraph_thread_written_after_it_was_found_idle_keeps_its_checkpoints(
    keep, writer_at, sent_events
):
    _chat("back", 1)
    _chat("old", 2)
    _age(LangGraphCheckpoint, "default", "back")
    _age(LangGraphCheckpoint, "default", "old")
    before = _langgraph_history("back")
    old = len(_langgraph_history("old"))
    seen: dict[str, object] = {}

    def user_comes_back() -> None:  # another request, another connection
        _chat("back", 1, first=1)
        seen["history"] = _langgraph_history("back")
        seen["state"] = _langgraph_state("back")

    written = writer_at(
        type(LangGraphCheckpoint.objects.all()), "threads_idle_since", user_comes_back
    )
    policy = RetentionPolicy(checkpoint_idle=IDLE, checkpoint_keep_last=keep)
    report = prune_tenant_checkpoints("acme", policy=policy)

    assert written
    everything = seen["history"]
    assert isinstance(everything, list) and everything[-len(before) :] == before
    assert len(everything) > len(before)  # the old turn's checkpoints, then the new one's
    kept = everything if keep is None else everything[:keep]
    assert _langgraph_history("back") == kept
    assert _langgraph_state("back") == seen["state"]  # both turns, to go on from
    with tenant_atomic("acme"):
        assert not LangGraphCheckpoint.rows.filter(tenant="acme", thread_id="old").exists()
    pruned = old + len(everything) - len(kept)
    assert (report.checkpoints, report.threads) == (pruned, 1)
    assert [e.fields() for e in sent_events.of(EV_CHECKPOINT_PRUNED)] == [
        {"tenant": "acme", "thread_id": None, "checkpoints": pruned, "threads": 1}
    ]


def _wait_for_a_lock_wait(timeout: float = 20.0) -> bool:
    """Poll (own connection) until a session of the test database waits for a lock."""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if waiting_for_locks():
                return True
            time.sleep(0.01)
        return False
    finally:
        connections.close_all()


def _deletion_while_a_save_is_held_open(
    monkeypatch, write: Callable[[], Any], delete: Callable[[], T]
) -> tuple[list[int], list[bool], T]:
    """Run ``write`` (LangGraph saves) on another thread, its first checkpoint's
    transaction held open (a slow request) until ``delete``, run here meanwhile, waits
    for a lock it holds; then let it commit. The depth of each row ``write`` stored
    first, whether ``delete`` waited, and what ``delete`` returned; ``write``'s error,
    if any, is raised here."""
    original = LangGraphCheckpointQuerySet.save_checkpoint
    stored, release = threading.Event(), threading.Event()
    depths: list[int] = []

    def held_open(self, tenant, row, *args, **kwargs):
        if depths:
            return original(self, tenant, row, *args, **kwargs)
        depths.append(row["depth"])
        with transaction.atomic(using=self.db):
            result = original(self, tenant, row, *args, **kwargs)
            stored.set()
            release.wait(30)
        return result

    monkeypatch.setattr(LangGraphCheckpointQuerySet, "save_checkpoint", held_open)
    waited: list[bool] = []

    def let_it_commit() -> None:
        waited.append(_wait_for_a_lock_wait())
        release.set()

    writer = OnItsOwnConnections(write)
    writer.start()
    assert stored.wait(30)
    poller = threading.Thread(target=let_it_commit)
    poller.start()
    try:
        deleted = delete()
    finally:
        release.set()
        poller.join()
        writer.join()
    writer.join_and_raise()
    return depths, waited, deleted


def test_a_langgraph_save_under_way_while_the_sweep_deletes_keeps_its_thread(monkeypatch):
    """A delta row being stored locks its parent (``FOR KEY SHARE``) until its transaction
    commits. The sweep, which found the thread idle before, waits for that lock; then it
    must see the new row and keep the thread: deleting the parent would leave the new
    delta row without the values it is stored against."""
    import tulip_memory.models.langgraph as langgraph_rows

    graph = build_agent(DjangoSaver(tenant="acme"))  # a long-lived saver: it knows its tip
    config = {"configurable": {"thread_id": "back"}}
    # The first turn, 40 days ago: its rows are written old (aging them afterwards would
    # change them under the saver, which then stores its next checkpoint whole).
    with monkeypatch.context() as past:
        past.setattr(langgraph_rows.timezone, "now", lambda: utc_now() - timedelta(days=40))
        graph.invoke(user_turn(0), config)
    turn = len(_langgraph_state("back")["messages"])  # the messages one turn adds
    _chat("old", 1)
    _age(LangGraphCheckpoint, "default", "old")
    before = _langgraph_history("back")
    old = len(_langgraph_history("old"))

    depths, waited, report = _deletion_while_a_save_is_held_open(
        monkeypatch,
        lambda: graph.invoke(user_turn(1), config),
        lambda: prune_tenant_checkpoints("acme", policy=RetentionPolicy(checkpoint_idle=IDLE)),
    )
    assert depths[0] > 0  # a delta row, stored against the old turn's newest checkpoint
    assert waited == [True]  # the sweep did wait for the save

    after = _langgraph_history("back")
    assert after[-len(before) :] == before and len(after) > len(before)
    # The newest checkpoint loads (its parents are there): both turns, to go on from.
    assert len(_langgraph_state("back")["messages"]) == 2 * turn
    assert (report.checkpoints, report.threads) == (old, 1)


@pytest.mark.parametrize("rule", ["keep-last", "delete-for-runs"])
def test_a_langgraph_delta_saved_against_a_checkpoint_being_deleted_still_loads(rule, monkeypatch):
    """The newest N rule ranks a namespace's checkpoints, then deletes the older ones (as
    ``delete_for_runs`` deletes a run's). A save can be storing a delta row against one of
    those meanwhile: a saver goes on from a checkpoint it wrote (its tip) that newer ones
    of the thread push out of the newest N (a fork from it; another request's run on the
    same thread). The row locks its parent (``FOR KEY SHARE``) until its transaction
    commits; the deletion must wait for it and see the row before the parent goes (and
    store every value in it): else the parent is deleted under a committed delta row, and
    the fork's checkpoints cannot be loaded (CheckpointCorruptError)."""
    fork = build_agent(DjangoSaver(tenant="acme"))  # a long-lived saver: it knows its tip
    _chat_with(fork, "t", 0, run_id="run-0")
    first = _langgraph_history("t")
    fork_from = first[0]  # the fork's saver's tip
    _chat("t", 1, first=1)  # another saver (another process) goes on with the thread
    before = _langgraph_history("t")
    turn = len(_langgraph_state("t")["messages"]) // 2  # the messages one turn adds
    kept = before[:2] if rule == "keep-last" else before[: len(before) - len(first)]
    assert fork_from not in kept

    def delete() -> int:
        if rule == "keep-last":
            policy = RetentionPolicy(checkpoint_keep_last=2)
            return prune_tenant_checkpoints("acme", policy=policy).checkpoints
        DjangoSaver(tenant="acme").delete_for_runs(["run-0"])
        return len(first)

    depths, waited, dropped = _deletion_while_a_save_is_held_open(
        monkeypatch, lambda: _chat_with(fork, "t", 2, checkpoint_id=fork_from), delete
    )
    assert depths[0] > 0  # a delta row, stored against fork_from
    assert waited == [True]  # the deletion did wait for the save

    after = _langgraph_history("t")  # every checkpoint listed loads (else it raises)
    assert [c for c in after if c in before] == kept
    assert len(after) > len(kept)  # and the fork's
    # The fork's newest checkpoint (the thread's) loads: turn 0, then the fork's turn.
    messages = _langgraph_state("t")["messages"]
    assert messages[0].id == "user-0" and len(messages) == 2 * turn
    assert dropped == len(before) - len(kept)


def test_an_item_written_again_after_it_was_found_expired_stays(writer_at, sent_events):
    clock = ManualClock()
    store = PgMemory(clock=clock)
    for key in ("rewritten", "extended", "gone"):
        async_to_sync(store.put)(("acme", "n"), key, {"v": "old"}, ttl=10)
    clock.advance(11)  # all three expired

    def rewrite() -> None:  # another request writes two of them again
        writer = PgMemory(clock=clock)
        async_to_sync(writer.put)(("acme", "n"), "rewritten", {"v": "new"})  # no ttl
        async_to_sync(writer.put)(("acme", "n"), "extended", {"v": "new"}, ttl=1000)

    # ``clear`` runs the batch's DELETE: the writer commits just before it, after the
    # batch was selected.
    written = writer_at(type(MemoryItem.objects.all()), "clear", rewrite, before=True)
    deleted = sweep_expired_tenant("acme", now=clock())

    assert written
    assert deleted == 1
    with tenant_atomic("acme"):
        assert sorted(MemoryItem.objects.values_list("key", flat=True)) == [
            "extended",
            "rewritten",
        ]
    for key in ("rewritten", "extended"):
        item = async_to_sync(store.get_item)(("acme", "n"), key)
        assert item is not None and item.value == {"v": "new"}
    assert [e.fields() for e in sent_events.of(EV_STORE_EXPIRED_SWEPT)] == [
        {"tenant": "acme", "deleted": 1}
    ]
