"""tulip_memory.events: events go through memory_event; failing receivers never break callers."""

import asyncio
import logging

import pytest

from tulip_memory import events


@pytest.fixture
def received():
    got: list[tuple[str, dict]] = []

    def receiver(sender, event, payload, **kwargs):
        got.append((event, payload))

    events.memory_event.connect(receiver, weak=False)
    yield got
    events.memory_event.disconnect(receiver)


@pytest.fixture
def async_received():
    """Event names an async receiver got."""
    got: list[str] = []

    async def receiver(sender, event, payload, **kwargs):
        got.append(event)

    events.memory_event.connect(receiver, weak=False)
    yield got
    events.memory_event.disconnect(receiver)


@pytest.fixture
def failing_receiver():
    def receiver(**kwargs):
        raise RuntimeError("receiver exploded")

    events.memory_event.connect(receiver, weak=False)
    yield receiver
    events.memory_event.disconnect(receiver)


def test_event_names():
    assert events.EV_MEMORY_CONVERSATION_PRUNED == "memory.conversation.pruned"
    assert events.EV_MEMORY_COMPACTOR_TRIGGERED == "memory.compactor.triggered"
    assert events.EV_MEMORY_COMPACTOR_COMPLETED == "memory.compactor.completed"
    assert events.EV_MEMORY_MANAGER_INJECTED == "memory.manager.injected"
    assert events.EV_MEMORY_MANAGER_EXTRACTED == "memory.manager.extracted"
    assert events.EV_MEMORY_MANAGER_EXTRACT_FAILED == "memory.manager.extract_failed"


def test_emit_sync_sends_name_and_payload(received):
    events.emit_sync("memory.test", removed_count=3)
    assert received == [("memory.test", {"removed_count": 3})]


async def test_emit_sends_through_the_same_signal(received):
    await events.emit("memory.test", duration_ms=1.5)
    assert received == [("memory.test", {"duration_ms": 1.5})]


async def test_async_receivers_are_awaited(async_received):
    await events.emit("memory.async")
    assert async_received == ["memory.async"]


async def test_a_failing_receiver_is_logged_and_others_still_run(
    received, failing_receiver, caplog
):
    with caplog.at_level(logging.ERROR, logger="tulip_memory.events"):
        events.emit_sync("memory.sync")
        await events.emit("memory.async")
    assert [name for name, _ in received] == ["memory.sync", "memory.async"]
    messages = [r.getMessage() for r in caplog.records if r.name == "tulip_memory.events"]
    assert any("memory.sync" in m and "receiver exploded" in m for m in messages)
    assert any("memory.async" in m for m in messages)


async def test_emit_sync_inside_a_running_loop_reaches_async_receivers(async_received):
    events.emit_sync("memory.from-sync-api")  # a sync API called from async code
    assert async_received == ["memory.from-sync-api"]


def test_sender_is_passed_to_receivers(sent_events):
    events.emit_sync("memory.test", sender=int, n=1)
    assert [(e.sender, e.event, e.payload) for e in sent_events.sent] == [
        (int, "memory.test", {"n": 1})
    ]


async def test_muted_blocks_send_nothing_in_tasks_and_threads_too(sent_events):
    from asgiref.sync import sync_to_async

    with events.muted():
        assert not events.listening()
        await events.emit("memory.test")
        await asyncio.gather(events.emit("memory.test"))
        await sync_to_async(events.emit_sync)("memory.test")
    await events.emit("memory.after")
    assert [e.event for e in sent_events.sent] == ["memory.after"]


def test_no_receiver_means_not_listening():
    assert not events.memory_event.receivers or events.listening()
    receivers = list(events.memory_event.receivers)
    events.memory_event.receivers.clear()
    try:
        assert not events.listening()
        events.emit_sync("memory.test", n=1)  # nothing to send to: returns at once
    finally:
        events.memory_event.receivers.extend(receivers)


async def test_the_layers_send_their_own_class(sent_events):
    from tulip_memory.conversation import SlidingWindowManager
    from tulip_memory.manager import LLMMemoryManager, Memory, MemoryType
    from tulip_memory.messages import Message, Role
    from tulip_memory.state import AgentState
    from tulip_memory.store.memory import InMemoryStore

    state = AgentState(messages=[Message(Role.USER, f"m{i}") for i in range(5)])
    await SlidingWindowManager(window_size=2, preserve_first_user=False).async_apply(state.messages)
    store = InMemoryStore()
    manager = LLMMemoryManager(store, namespace_prefix=("acme", "users", "u1"))
    await manager.save([Memory(MemoryType.USER, "role", "The user is a nurse.")])
    await manager.on_session_start(state)
    senders = {e.event: e.sender for e in sent_events.sent}
    assert senders == {
        events.EV_MEMORY_CONVERSATION_PRUNED: SlidingWindowManager,
        events.EV_STORE_ITEMS_WRITTEN: InMemoryStore,
        events.EV_MEMORY_MANAGER_INJECTED: LLMMemoryManager,
    }
