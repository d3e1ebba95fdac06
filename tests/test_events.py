"""tulip_memory.events: events go through memory_event; failing receivers never break callers."""

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
