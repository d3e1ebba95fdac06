"""What the store events cost a write: ``InMemoryStore.put`` with the event wrapper
removed, with it and no receiver, with one sync receiver and with one async receiver.

20,000 puts per round (500 keys, so updates after the first 500), 5 rounds, the median
of the per-round means; in-process, so the figures are the wrapper's and Django's signal
dispatch, not a database's.

    .venv/bin/python bench/events.py
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from typing import Any

from tulip_memory.events import memory_event
from tulip_memory.store.memory import InMemoryStore

PUTS = 20_000
ROUNDS = 5


async def _mean_put_us(put: Callable[..., Any]) -> float:
    store = InMemoryStore()
    started = time.perf_counter()
    for i in range(PUTS):
        await put(store, ("acme", "notes"), f"k{i % 500}", {"v": i})
    return (time.perf_counter() - started) / PUTS * 1e6


def _sync_receiver(**kwargs: Any) -> None:
    """Does nothing: what is measured is getting here."""


async def _async_receiver(**kwargs: Any) -> None:
    """Does nothing: what is measured is getting here."""


async def main() -> None:
    wrapped = InMemoryStore.put
    unwrapped = InMemoryStore.put.__wrapped__  # type: ignore[attr-defined]
    cases: dict[str, tuple[Callable[..., Any], Callable[..., Any] | None]] = {
        "event wrapper removed": (unwrapped, None),
        "no receiver": (wrapped, None),
        "one sync receiver": (wrapped, _sync_receiver),
        "one async receiver": (wrapped, _async_receiver),
    }
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(ROUNDS):
        for name, (put, receiver) in cases.items():
            if receiver is not None:
                memory_event.connect(receiver, weak=False)
            try:
                samples[name].append(await _mean_put_us(put))
            finally:
                if receiver is not None:
                    memory_event.disconnect(receiver)
    print(f"InMemoryStore.put, {PUTS} puts x {ROUNDS} rounds (median of the round means)")
    for name, values in samples.items():
        print(f"{name:<24} {statistics.median(values):8.1f} µs per put")


if __name__ == "__main__":
    asyncio.run(main())
