"""How long one long text stalls the event loop, per store.

A ticker task sleeps 1 ms at a time on the loop while one store call runs; the figure is
the longest gap it saw (1 ms means the loop never waited). Calls: a put of a value of
30,000 distinct words, and a search with a 94,000-character query, each with a cold HRR
phasor cache (as the first long text of a process sees it). PgMemory runs on an embedded
PostgreSQL 18 + pgvector.

    .venv/bin/python bench/event_loop.py
"""

from __future__ import annotations

import asyncio
import random
import string
from pathlib import Path

from embedded_django import embedded_workdir, setup_django


def words(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    found = {
        "".join(rng.choices(string.ascii_lowercase, k=rng.randint(5, 10))) for _ in range(count * 2)
    }
    return sorted(found)[:count]


async def main(workdir: Path) -> None:
    from tests.event_loop import longest_stall
    from tulip_memory.core import hrr
    from tulip_memory.store import HolographicStore, InMemoryStore, PgMemory

    value = {"text": " ".join(words(30_000, seed=1))}
    query = " ".join(words(16_000, seed=2))[:94_000]
    stores = {
        "InMemoryStore": InMemoryStore(),
        "HolographicStore (file)": HolographicStore(workdir / "store.sqlite3"),
        "PgMemory (HRR)": PgMemory(),
    }
    print(f"{'store':<26}{'call':<22}{'longest stall ms':>18}{'call ms':>10}")
    for name, store in stores.items():
        ns = ("bench", "loop", name.split()[0])
        for call_name, call in (
            ("put 30,000 words", lambda s=store, n=ns: s.put(n, "long", value)),
            ("search 94,000 chars", lambda s=store, n=ns: s.search(n, query=query, limit=5)),
        ):
            hrr._token_phasor.cache_clear()
            stall, duration = await longest_stall(call)
            print(f"{name:<26}{call_name:<22}{stall * 1000:>18.1f}{duration * 1000:>10.1f}")
        await store.close()


if __name__ == "__main__":
    with embedded_workdir() as tmp:
        setup_django(Path(tmp))
        asyncio.run(main(Path(tmp)))
