"""Benchmark of LangGraph checkpoint savers: tulip_memory's DjangoSaver against PostgresSaver.

The same compiled agent (tulip_memory.testing.langgraph_agent: a tool-calling loop with a
scripted model, four messages and four checkpoints per turn) runs ``--turns`` turns on
each saver, on one embedded PostgreSQL 18 (temporary folder): DjangoSaver as the
application role under row-level security, PostgresSaver (langgraph-checkpoint-postgres)
as the owner role (its ``setup()`` creates its tables). The graph runs with
``durability="sync"``, so every ``put`` is timed in the caller's thread.

Reported per saver:

* payload bytes — what the saver stored: the serialized checkpoints, metadata, channel
  values and writes (for PostgresSaver's JSONB columns, their text length);
* table bytes — ``pg_total_relation_size`` of its tables after VACUUM (heap, TOAST with
  its compression, indexes);
* ``put`` p50/p95 over the run, and ``get_tuple`` p50/p95 of the newest checkpoint and of
  100 random checkpoints of the thread (by id), from a fresh saver.

    PYTHONPATH=$PWD .venv/bin/python bench/langgraph.py [--turns 200]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# LangGraph is a namespace package, which this script's name would hide: import it with
# the script's folder off the path, then put the folder back (for embedded_django).
_BENCH = sys.path.pop(0)
import langgraph.checkpoint.postgres  # noqa: E402
import langgraph.graph  # noqa: E402

sys.path.insert(0, _BENCH)

from embedded_django import setup_django  # noqa: E402

THREAD = "bench"
CONFIG = {"configurable": {"thread_id": THREAD}}


def quantiles_ms(samples: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(samples, n=20)
    return statistics.median(samples) * 1000, cuts[18] * 1000


def timed(samples: list[float], method: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            samples.append(time.perf_counter() - start)

    return call


def run(saver: Any, fresh: Any, turns: int) -> tuple[dict[str, Any], Any]:
    from tulip_memory.testing.langgraph_agent import build_agent, user_turn

    puts: list[float] = []
    saver.put = timed(puts, saver.put)
    graph = build_agent(saver)
    for turn in range(turns):
        graph.invoke(user_turn(turn), CONFIG, durability="sync")
    state = graph.get_state(CONFIG).values
    ids = [t.config["configurable"]["checkpoint_id"] for t in fresh.list(CONFIG)]
    latest, by_id = [], []
    for _ in range(100):
        start = time.perf_counter()
        newest = fresh.get_tuple(CONFIG)
        latest.append(time.perf_counter() - start)
    assert newest.checkpoint["channel_values"]["messages"] == state["messages"]
    rng = random.Random(7)
    for checkpoint_id in rng.sample(ids, min(100, len(ids))):
        config = {"configurable": {"thread_id": THREAD, "checkpoint_id": checkpoint_id}}
        start = time.perf_counter()
        assert fresh.get_tuple(config) is not None
        by_id.append(time.perf_counter() - start)
    return {
        "checkpoints": len(ids),
        "put": quantiles_ms(puts),
        "get_tuple newest": quantiles_ms(latest),
        "get_tuple by id": quantiles_ms(by_id),
    }, state


def table_bytes(url: str, tables: list[str]) -> int:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        for table in tables:
            conn.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.Identifier(table)))
        return sum(
            conn.execute("SELECT pg_total_relation_size(%s)", [t]).fetchone()[0] for t in tables
        )


def postgres_payload_bytes(url: str) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        return sum(
            conn.execute(query).fetchone()[0] or 0
            for query in (
                "SELECT sum(octet_length(checkpoint::text) + octet_length(metadata::text)) "
                "FROM checkpoints",
                "SELECT sum(octet_length(blob)) FROM checkpoint_blobs",
                "SELECT sum(octet_length(blob)) FROM checkpoint_writes",
            )
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--max-chain-depth", type=int, default=None)
    args = parser.parse_args()
    turns = args.turns
    options = {} if args.max_chain_depth is None else {"max_chain_depth": args.max_chain_depth}
    with tempfile.TemporaryDirectory(prefix="tulip-bench-") as workdir:
        urls = setup_django(Path(workdir))
        from tulip_memory.langgraph import DjangoSaver

        PostgresSaver = langgraph.checkpoint.postgres.PostgresSaver

        results = {}
        ours, our_state = run(
            DjangoSaver(tenant="bench", **options), DjangoSaver(tenant="bench"), turns
        )
        ours["payload"] = DjangoSaver(tenant="bench").storage_bytes(THREAD)
        ours["tables"] = table_bytes(
            urls.owner,
            [
                "tulip_memory_langgraph_checkpoint",
                "tulip_memory_langgraph_blob",
                "tulip_memory_langgraph_write",
            ],
        )
        results["DjangoSaver (tulip_memory)"] = ours
        with (
            PostgresSaver.from_conn_string(urls.owner) as saver,
            PostgresSaver.from_conn_string(urls.owner) as fresh,
        ):
            saver.setup()
            theirs, their_state = run(saver, fresh, turns)
        assert our_state == their_state
        theirs["payload"] = postgres_payload_bytes(urls.owner)
        theirs["tables"] = table_bytes(
            urls.owner, ["checkpoints", "checkpoint_blobs", "checkpoint_writes"]
        )
        results["PostgresSaver (langgraph)"] = theirs

    base = results["PostgresSaver (langgraph)"]
    print(
        f"\n{turns} turns, {len(our_state['messages'])} messages, "
        f"{ours['checkpoints']} checkpoints per saver (ms; bytes)"
    )
    print(
        f"{'saver':<28} {'payload':>10} {'ratio':>6} {'tables':>10} {'ratio':>6} "
        f"{'put p50/p95':>13} {'newest p50/p95':>15} {'by id p50/p95':>14}"
    )
    for name, r in results.items():
        print(
            f"{name:<28} {r['payload']:>10} {r['payload'] / base['payload']:>6.3f} "
            f"{r['tables']:>10} {r['tables'] / base['tables']:>6.3f} "
            f"{r['put'][0]:>6.2f}/{r['put'][1]:<6.2f} "
            f"{r['get_tuple newest'][0]:>7.2f}/{r['get_tuple newest'][1]:<7.2f} "
            f"{r['get_tuple by id'][0]:>6.2f}/{r['get_tuple by id'][1]:<6.2f}"
        )


if __name__ == "__main__":
    main()
