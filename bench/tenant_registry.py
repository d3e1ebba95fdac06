"""What the tenant registry's triggers cost a write (migration 0006_admin_tenants).

Every tenant table has a statement-level AFTER INSERT trigger adding the inserted rows'
tenants to ``tulip_memory_tenant`` (``ON CONFLICT DO NOTHING``). This times PgMemory
writes — one item per ``put`` (one statement each) and 100-item ``put_batch`` calls — with
the triggers enabled and disabled (``ALTER TABLE ... DISABLE TRIGGER``, as the owner), on
an embedded PostgreSQL, alternating rounds; it prints the median per write.

    python bench/tenant_registry.py [--puts 300] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

from embedded_django import embedded_workdir, setup_django

TRIGGER = "tulip_register_tenant"


def _set_trigger(owner_url: str, enabled: bool) -> None:
    import psycopg

    verb = "ENABLE" if enabled else "DISABLE"
    with psycopg.connect(owner_url, autocommit=True) as conn:
        conn.execute(f"ALTER TABLE tulip_memory_store_item {verb} TRIGGER {TRIGGER}")


async def _round(puts: int, tag: str) -> tuple[float, float]:
    from tulip_memory.store import PgMemory

    store = PgMemory()
    started = time.perf_counter()
    for n in range(puts):
        await store.put(("bench", tag), f"k{n}", {"content": f"memory number {n} of {tag}"})
    single = (time.perf_counter() - started) / puts
    batches = max(puts // 100, 1)
    started = time.perf_counter()
    for b in range(batches):
        await store.put_batch(
            [
                (("bench", tag, "batch"), f"b{b}-{n}", {"content": f"batch {b} item {n}"}, None)
                for n in range(100)
            ]
        )
    batch = (time.perf_counter() - started) / batches
    return single, batch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--puts", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with embedded_workdir() as workdir:
        database = setup_django(Path(workdir))
        results: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
        asyncio.run(_round(50, "warm-up"))
        for r in range(args.rounds):
            for enabled in (True, False) if r % 2 == 0 else (False, True):
                _set_trigger(database.owner, enabled)
                results[enabled].append(asyncio.run(_round(args.puts, f"r{r}-{enabled}")))
        _set_trigger(database.owner, True)
        for enabled in (True, False):
            single = statistics.median(s for s, _ in results[enabled]) * 1e3
            batch = statistics.median(b for _, b in results[enabled]) * 1e3
            print(
                f"triggers {'on ' if enabled else 'off'}: put {single:.3f} ms, "
                f"put_batch(100) {batch:.2f} ms (median of {args.rounds} rounds)"
            )


if __name__ == "__main__":
    main()
