"""Checkpointer events, on every backend of ``BACKENDS``: save, load and delete send
``checkpoint.saved`` / ``.loaded`` / ``.deleted`` with ``sender`` the checkpointer's class,
ids, counts and timings, never the state's content; bad input sends nothing."""

from __future__ import annotations

import pytest

from tests.backends.conftest import TENANT
from tests.backends.test_contract import make_state
from tulip_memory.delta import DeltaCheckpointer
from tulip_memory.delta.storage import InMemoryDeltaStorage
from tulip_memory.events import (
    EV_CHECKPOINT_DELETED,
    EV_CHECKPOINT_LOADED,
    EV_CHECKPOINT_PRUNED,
    EV_CHECKPOINT_SAVED,
    memory_event,
)
from tulip_memory.tenancy.database import TenantDatabase

CHECKPOINT_EVENTS = (
    EV_CHECKPOINT_SAVED,
    EV_CHECKPOINT_LOADED,
    EV_CHECKPOINT_DELETED,
    EV_CHECKPOINT_PRUNED,
)


def _tenant(checkpointer) -> str | None:
    """The ORM backends (plain and delta) are fixed to ``TENANT``; the others have none."""
    storage = getattr(checkpointer, "storage", checkpointer)
    return TENANT if isinstance(storage, TenantDatabase) else None


def _sent(sent_events, checkpointer):
    events = sent_events.of(*CHECKPOINT_EVENTS)
    assert {e.sender for e in events} <= {type(checkpointer)}, events
    return [(e.event, e.fields()) for e in events]


async def test_save_load_delete_each_send_one_event(checkpointer, sent_events):
    tenant = _tenant(checkpointer)
    state = make_state(2, tag="private words")
    first = await checkpointer.save(state, "thread-ev")
    second = await checkpointer.save(make_state(3), "thread-ev", "chosen-id")
    await checkpointer.load("thread-ev")
    await checkpointer.load("thread-ev", first)
    await checkpointer.load("thread-ev", "no-such-id")
    await checkpointer.delete("thread-ev", first)
    await checkpointer.delete("thread-ev")
    await checkpointer.delete("thread-ev")
    ids = {"tenant": tenant, "thread_id": "thread-ev"}
    messages = len(state.messages)
    assert _sent(sent_events, checkpointer) == [
        (EV_CHECKPOINT_SAVED, {**ids, "checkpoint_id": first, "messages": messages}),
        (EV_CHECKPOINT_SAVED, {**ids, "checkpoint_id": second, "messages": messages + 2}),
        (
            EV_CHECKPOINT_LOADED,
            {**ids, "checkpoint_id": None, "found": True, "messages": messages + 2},
        ),
        (
            EV_CHECKPOINT_LOADED,
            {**ids, "checkpoint_id": first, "found": True, "messages": messages},
        ),
        (
            EV_CHECKPOINT_LOADED,
            {**ids, "checkpoint_id": "no-such-id", "found": False, "messages": 0},
        ),
        (EV_CHECKPOINT_DELETED, {**ids, "checkpoint_id": first, "deleted": True}),
        (EV_CHECKPOINT_DELETED, {**ids, "checkpoint_id": None, "deleted": True}),
        (EV_CHECKPOINT_DELETED, {**ids, "checkpoint_id": None, "deleted": False}),
    ]
    assert "private words" not in repr(sent_events.sent)


async def test_bad_input_sends_nothing(checkpointer, sent_events):
    with pytest.raises(ValueError, match="thread_id"):
        await checkpointer.save(make_state(1), "")
    with pytest.raises(ValueError, match="state"):
        await checkpointer.save("not a state", "thread-bad")
    with pytest.raises(ValueError, match="checkpoint_id"):
        await checkpointer.load("thread-bad", "")
    assert _sent(sent_events, checkpointer) == []
    assert await checkpointer.list_checkpoints("thread-bad") == []


async def test_a_failing_receiver_never_costs_the_save(checkpointer):
    def explode(**kwargs):
        raise RuntimeError("receiver exploded")

    memory_event.connect(explode, weak=False)
    try:
        checkpoint_id = await checkpointer.save(make_state(1), "thread-safe")
    finally:
        memory_event.disconnect(explode)
    assert await checkpointer.load("thread-safe", checkpoint_id) == make_state(1)


async def test_delta_prune_sends_what_went(sent_events):
    checkpointer = DeltaCheckpointer(InMemoryDeltaStorage(), max_chain_depth=2)
    for turn in range(1, 6):
        await checkpointer.save(make_state(turn), "long")
    sent_events.clear()
    assert await checkpointer.prune("long", keep_last=2) == 3
    assert await checkpointer.prune("long", keep_last=2) == 0  # nothing went: no event
    with pytest.raises(ValueError, match="keep_last"):
        await checkpointer.prune("long", keep_last=-1)
    assert _sent(sent_events, checkpointer) == [
        (
            EV_CHECKPOINT_PRUNED,
            {"tenant": None, "thread_id": "long", "checkpoints": 3, "threads": 0},
        )
    ]
