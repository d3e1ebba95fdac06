"""A receiver of ``memory_event`` for tests: every event as (sender, event, payload)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tulip_memory.events import memory_event


@dataclass
class SentEvent:
    sender: Any
    event: str
    payload: dict[str, Any]

    def fields(self) -> dict[str, Any]:
        """The payload without ``duration_ms`` (checked to be a number >= 0)."""
        fields = dict(self.payload)
        duration = fields.pop("duration_ms")
        assert isinstance(duration, float) and duration >= 0, duration
        return fields


@dataclass
class EventRecorder:
    sent: list[SentEvent] = field(default_factory=list)

    def of(self, *names: str) -> list[SentEvent]:
        return [e for e in self.sent if e.event in names]

    def clear(self) -> None:
        self.sent.clear()


@contextmanager
def recording() -> Iterator[EventRecorder]:
    recorder = EventRecorder()

    def receiver(sender: Any, event: str, payload: dict[str, Any], **kwargs: Any) -> None:
        recorder.sent.append(SentEvent(sender, event, payload))

    memory_event.connect(receiver, weak=False)
    try:
        yield recorder
    finally:
        memory_event.disconnect(receiver)
