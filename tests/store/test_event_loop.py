"""Long texts never stall the event loop: every store encodes them off the loop, bounded.

A ticker task records the longest gap between its 1 ms sleeps while one store call runs on
the same loop. Before long texts were encoded in a worker thread, a 30,000-word put blocked
HolographicStore's and PgMemory's loop for ~0.85 s (the HRR encoding of every distinct word,
on the loop); the bound held here is 50 ms.
"""

from __future__ import annotations

import gc
import random
import string

from tests.event_loop import longest_stall
from tulip_memory.core import hrr

MAX_STALL = 0.050


def _words(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words = {
        "".join(rng.choices(string.ascii_lowercase, k=rng.randint(5, 10))) for _ in range(count * 2)
    }
    return sorted(words)[:count]


async def _longest_stall(call) -> float:
    """The smallest of three measures of ``call()``'s longest loop stall (a fresh HRR cache
    each time, as on a cold process).

    Best of three, as benchmarks do: the operating system may leave this process's loop
    thread unscheduled for a while when other processes share the two cores, and that
    noise only ever adds. Work done on the loop is in every measure, so a store that
    encodes on the loop (800 ms here) fails all three.

    The heap of this test process (1,500 tests' worth of objects) is frozen first: a full
    cyclic garbage collection of it, which any allocation of any thread may trigger, holds
    the GIL for tens of milliseconds. That is a pause of the test runner's interpreter,
    not work of the store under test, which is what this measures.
    """
    stalls = []
    for _attempt in range(3):
        hrr._token_phasor.cache_clear()
        gc.collect()
        gc.freeze()
        try:
            stall, _duration = await longest_stall(call)
        finally:
            gc.unfreeze()
        stalls.append(stall)
        if stall <= MAX_STALL:
            break
    return min(stalls)


async def test_a_30000_word_put_and_a_94000_character_query_keep_the_loop_responsive(store, root):
    ns = (root, "long")
    words = _words(30_000, seed=1)
    stall = await _longest_stall(lambda: store.put(ns, "long", {"text": " ".join(words)}))
    assert stall <= MAX_STALL, f"put stalled the loop for {stall * 1000:.0f} ms"

    batch = [(ns, f"b{i}", {"text": " ".join(words[i::3])}) for i in range(3)]
    stall = await _longest_stall(lambda: store.put_batch(batch))
    assert stall <= MAX_STALL, f"put_batch stalled the loop for {stall * 1000:.0f} ms"

    item = await store.get_item(ns, "long")
    assert item.value == {"text": " ".join(words)}
    if not store.capabilities.search:  # the contract's minimal store: nothing to encode
        return

    query = " ".join(_words(16_000, seed=2))[:94_000]
    stall = await _longest_stall(lambda: store.search(ns, query=query, limit=5))
    assert stall <= MAX_STALL, f"search stalled the loop for {stall * 1000:.0f} ms"

    # Found by a word from its end, past the HRR bound.
    found = await store.search(ns, query=words[-1], limit=10)
    assert "long" in [hit.key for hit in found]
