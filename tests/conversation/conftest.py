"""Fixtures of the conversation tests: a recorder of memory_event."""

from __future__ import annotations

from typing import Any

import pytest

from tulip_memory.events import memory_event


class EventRecorder(list[tuple[str, dict[str, Any]]]):
    def named(self, name: str) -> list[dict[str, Any]]:
        return [payload for event, payload in self if event == name]

    def names(self) -> list[str]:
        return [event for event, _ in self]


@pytest.fixture
def events() -> Any:
    """Every memory_event sent during the test, as (event, payload) pairs."""
    recorded = EventRecorder()

    def receiver(sender: object, event: str, payload: dict[str, Any], **kwargs: object) -> None:
        recorded.append((event, payload))

    memory_event.connect(receiver, weak=False)
    yield recorded
    memory_event.disconnect(receiver)
