"""How long a call keeps the event loop from running anything else: :func:`longest_stall`
runs a 1 ms ticker beside it and returns the longest gap the ticker saw.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

__all__ = ["longest_stall"]


async def longest_stall(call: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    """``(longest loop gap, duration of the call)``, in seconds, while ``call()`` runs."""
    gaps: list[float] = []
    done = asyncio.Event()

    async def tick() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0.01)  # the ticker is running
    gaps.clear()
    started = time.perf_counter()
    try:
        await call()
    finally:
        duration = time.perf_counter() - started
        done.set()
        await ticker
    return max(gaps, default=0.0), duration
