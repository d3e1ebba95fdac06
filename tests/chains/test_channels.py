"""The list heads a DjangoSaver splices against (tulip_memory.chains.channels.next_head).

A put stores a list channel's new version as a splice of the saver's cached copy of the
parent's version (its head), then makes the version it stored the channel's head. Two
threads putting on one saver must not come between the two: a head made of another
put's list would make every later splice, and so the stored lists, wrong. Each test
checks what a fresh saver (nothing cached) loads.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from tulip_memory.chains.channels import Head, Stored, encode, next_head
from tulip_memory.langgraph import DjangoSaver

SERDE = JsonPlusSerializer()

# How long a thread waits for another at most (a hang is a failure, not a pass).
WAIT = 10


def _checkpoint(checkpoint_id: str, messages: list[str], version: str) -> Any:
    checkpoint = empty_checkpoint()
    checkpoint["id"] = checkpoint_id
    checkpoint["channel_values"] = {"messages": messages}
    checkpoint["channel_versions"] = {"messages": version}
    return checkpoint


def _config(thread_id: str, checkpoint_id: str | None = None) -> Any:
    configurable = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def _loaded(thread_id: str, checkpoint_id: str) -> list[str]:
    found = DjangoSaver(tenant="acme").get_tuple(_config(thread_id, checkpoint_id))
    assert found is not None
    return found.checkpoint["channel_values"]["messages"]


class _WatchedLock:
    """The saver's connection lock (re-entrant), setting ``waiting`` when a thread finds
    it held by another and waits."""

    def __init__(self, lock: Any, waiting: threading.Event) -> None:
        self._lock = lock
        self.waiting = waiting

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self._lock.acquire(blocking=False):
            return True
        if not blocking:
            return False
        self.waiting.set()
        return self._lock.acquire(timeout=timeout)

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _hold_a_between_statement_and_head(saver: DjangoSaver, go_on: threading.Event) -> Any:
    """Hold the thread named "A" in its put after the statement, before the put's heads
    are updated (as a preemption would), until ``go_on`` is set: another thread's put
    either runs meanwhile or, as it must, waits for the saver's lock. Returns an event
    set when A is held there."""
    held = threading.Event()
    remember = saver._remember

    def held_remember(*args: Any) -> None:
        if threading.current_thread().name == "A":
            held.set()
            assert go_on.wait(WAIT), "the other put neither ran nor waited"
        remember(*args)

    saver._remember = held_remember  # type: ignore[method-assign]
    return held


def _run(targets: dict[str, Any]) -> dict[str, BaseException]:
    """Run each target in a thread of its name; the exceptions they raised, by name."""
    errors: dict[str, BaseException] = {}

    def run(name: str) -> None:
        try:
            targets[name]()
        except BaseException as exc:  # reported by the test
            errors[name] = exc

    threads = [threading.Thread(target=run, args=(name,), name=name) for name in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 2)
        assert not thread.is_alive()
    return errors


@pytest.mark.django_db(transaction=True)
def test_a_put_on_the_thread_cannot_come_between_a_statement_and_its_head():
    """Thread A puts a message list one message longer; thread B puts, on A's
    checkpoint, a shorter one. B's put must wait until A's head is updated: else A's
    splice lands on B's head and every later checkpoint A stores is wrong."""
    saver = DjangoSaver(tenant="acme")
    go_on = threading.Event()
    saver._connection._lock = _WatchedLock(saver._connection._lock, go_on)  # type: ignore[assignment]
    first = saver.get_next_version(None, None)
    parent = saver.put(
        _config("race"), _checkpoint("1", ["m1", "m2", "m3", "m4"], first), {}, {"messages": first}
    )
    mine, theirs = saver.get_next_version(first, None), saver.get_next_version(first, None)
    a_held = _hold_a_between_statement_and_head(saver, go_on)
    put: dict[str, Any] = {}

    def a() -> None:
        grown = _checkpoint("2", ["m1", "m2", "m3", "m4", "a1"], mine)
        put["A"] = saver.put(parent, grown, {"step": 1}, {"messages": mine})

    def b() -> None:
        assert a_held.wait(WAIT)
        trimmed = _checkpoint("3", ["m1", "m2"], theirs)
        saver.put(_config("race", "2"), trimmed, {"step": 2}, {"messages": theirs})
        go_on.set()

    assert _run({"A": a, "B": b}) == {}
    # A goes on from its checkpoint: the same list again, then one message more.
    again = saver.put(put["A"], _checkpoint("4", ["m1", "m2", "m3", "m4", "a1"], mine), {}, {})
    newest = saver.get_next_version(theirs, None)
    expected = ["m1", "m2", "m3", "m4", "a1", "a2"]
    saver.put(again, _checkpoint("5", expected, newest), {}, {"messages": newest})
    assert _loaded("race", "2") == ["m1", "m2", "m3", "m4", "a1"]
    assert _loaded("race", "3") == ["m1", "m2"]
    assert _loaded("race", "4") == ["m1", "m2", "m3", "m4", "a1"]
    assert _loaded("race", "5") == expected


@pytest.mark.django_db(transaction=True)
def test_a_head_evicted_by_another_threads_put_does_not_fail_a_committed_put():
    """With room for one head, thread B's put on another thread id would evict the head
    thread A's splice is applied to between A's statement and A's head update: A's put
    then raised after its checkpoint was committed. B waits instead."""
    saver = DjangoSaver(tenant="acme", cache_size=1)
    go_on = threading.Event()
    saver._connection._lock = _WatchedLock(saver._connection._lock, go_on)  # type: ignore[assignment]
    first = saver.get_next_version(None, None)
    parent = saver.put(
        _config("evicted"), _checkpoint("1", ["m1", "m2"], first), {}, {"messages": first}
    )
    second = saver.get_next_version(first, None)
    a_held = _hold_a_between_statement_and_head(saver, go_on)
    put: dict[str, Any] = {}

    def a() -> None:
        grown = _checkpoint("2", ["m1", "m2", "a1"], second)
        put["A"] = saver.put(parent, grown, {}, {"messages": second})

    def b() -> None:
        assert a_held.wait(WAIT)
        other = _checkpoint("9", ["x"], first)
        saver.put(_config("other"), other, {}, {"messages": first})
        go_on.set()

    assert _run({"A": a, "B": b}) == {}
    third = saver.get_next_version(second, None)
    saver.put(put["A"], _checkpoint("3", ["m1", "m2", "a1", "a2"], third), {}, {"messages": third})
    assert _loaded("evicted", "2") == ["m1", "m2", "a1"]
    assert _loaded("evicted", "3") == ["m1", "m2", "a1", "a2"]
    assert _loaded("other", "9") == ["x"]


def _stored(items: list[Any], head: Head | None, version: str = "000000000002.00000000") -> Stored:
    return encode("messages", version, items, head, SERDE.dumps_typed)


def test_a_splice_applies_only_to_the_head_it_was_taken_against():
    parent = Head("000000000001.00000000", ("m1", "m2"))
    spliced = _stored(["m1", "m2", "m3"], parent)
    assert spliced.entry.parent_version == parent.version
    assert next_head(spliced, parent, SERDE.loads_typed) == Head(
        spliced.entry.version, ("m1", "m2", "m3")
    )
    # Another version cached meanwhile, or none: no head (the next put stores whole).
    other = Head("000000000001.ffffffff", ("x",))
    assert next_head(spliced, other, SERDE.loads_typed) is None
    assert next_head(spliced, None, SERDE.loads_typed) is None


def test_a_whole_list_becomes_the_head_as_stored_whatever_head_is_cached():
    stored = _stored(["m1", "m2"], None)
    assert not stored.entry.parent_version
    # A head of the same version holding another list is not kept over the stored data.
    stale = Head(stored.entry.version, ("m1", "m2", "a1"))
    assert next_head(stored, stale, SERDE.loads_typed) == Head(stored.entry.version, ("m1", "m2"))
    assert next_head(stored, None, SERDE.loads_typed) == Head(stored.entry.version, ("m1", "m2"))
    # A value that is not a list has no head.
    assert next_head(encode("n", "v", 3, None, SERDE.dumps_typed), stale, SERDE.loads_typed) is None


def test_a_list_stored_whole_builds_its_head_on_the_cached_one_it_was_compared_with():
    parent = Head("000000000001.00000000", ("m1", "m2"))
    stored = encode(
        "messages",
        "000000000002.00000000",
        ["m1", "m2", "m3"],
        parent,
        SERDE.dumps_typed,
        whole=True,
    )
    assert not stored.entry.parent_version  # the row holds the whole list
    assert SERDE.loads_typed((stored.entry.type, stored.entry.data)) == ["m1", "m2", "m3"]
    expected = Head(stored.entry.version, ("m1", "m2", "m3"))
    assert next_head(stored, parent, SERDE.loads_typed) == expected
    # Another head cached meanwhile: the whole list is decoded instead.
    other = Head("000000000001.ffffffff", ("x",))
    assert next_head(stored, other, SERDE.loads_typed) == expected
    assert next_head(stored, None, SERDE.loads_typed) == expected
