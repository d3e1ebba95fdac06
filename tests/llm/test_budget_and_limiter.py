"""The token budget cut and the process-wide concurrency limiter."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import pytest

from tulip_memory.llm.budget import TokenEstimator, cut_to_budget
from tulip_memory.llm.limiter import ProcessLimiter, limiter_for


def test_estimate_and_observe():
    estimator = TokenEstimator(4.0)
    assert estimator.tokens("x" * 10) == 3
    estimator.observe(chars=800, prompt_tokens=100)  # 8 chars per token reported
    assert 4.0 < estimator.chars_per_token < 8.0
    estimator.observe(chars=0, prompt_tokens=0)  # nothing learnt from an empty call
    with pytest.raises(ValueError, match="chars_per_token must be > 0"):
        TokenEstimator(0)


def test_the_newest_messages_are_kept_and_the_dropped_logged(caplog):
    texts = [f"{i}" * 40 for i in range(10)]  # 10 tokens + 4 overhead each
    with caplog.at_level(logging.INFO, logger="tulip_memory.llm"):
        cut = cut_to_budget(texts, 45, TokenEstimator(4.0))
    assert cut.kept == texts[-3:] and cut.dropped == list(range(7)) and cut.tokens == 42
    assert "dropped 7 of 10 messages (indexes 0-6), kept 3" in caplog.text


def test_bad_budget():
    with pytest.raises(ValueError, match="budget must be an int >= 1"):
        cut_to_budget(["a"], 0, TokenEstimator())


def test_everything_fits():
    cut = cut_to_budget(["a", "b"], 100, TokenEstimator())
    assert cut.kept == ["a", "b"] and cut.dropped == []


def test_a_single_oversized_message_keeps_its_end():
    cut = cut_to_budget(["old", "x" * 100 + "END"], 14, TokenEstimator(4.0))
    assert cut.dropped == [0]
    (kept,) = cut.kept
    assert kept.startswith("…") and kept.endswith("END") and len(kept) <= 40


async def test_limiter_caps_one_loop():
    limiter = ProcessLimiter(2)
    running = peak = 0

    async def work():
        nonlocal running, peak
        async with limiter.slot():
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0.02)
            running -= 1

    await asyncio.gather(*(work() for _ in range(7)))
    assert peak == 2 and limiter.in_use == 0


def test_limiter_caps_across_threads_and_loops():
    limiter = ProcessLimiter(1)
    lock = threading.Lock()
    running = peak = 0

    async def work():
        nonlocal running, peak
        async with limiter.slot():
            with lock:
                running += 1
                peak = max(peak, running)
            await asyncio.sleep(0.03)
            with lock:
                running -= 1

    threads = [threading.Thread(target=lambda: asyncio.run(work())) for _ in range(4)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert peak == 1 and limiter.in_use == 0
    assert time.perf_counter() - started >= 0.12


async def test_a_cancelled_waiter_does_not_leak_its_slot():
    limiter = ProcessLimiter(1)
    async with limiter.slot():
        waiter = asyncio.create_task(_hold(limiter))
        await asyncio.sleep(0.01)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
    assert limiter.in_use == 0
    await _hold(limiter)  # the slot is free again


async def _hold(limiter: ProcessLimiter) -> None:
    async with limiter.slot():
        await asyncio.sleep(0)


def test_one_limiter_per_endpoint_and_cap():
    assert limiter_for("http://a/v1", 3) is limiter_for("http://a/v1", 3)
    assert limiter_for("http://a/v1", 3) is not limiter_for("http://b/v1", 3)
    with pytest.raises(ValueError, match="limit must be an int >= 1"):
        ProcessLimiter(0)
