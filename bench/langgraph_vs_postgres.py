"""Benchmark of LangGraph on tulip_memory: DjangoSaver against PostgresSaver, DjangoStore
against PostgresStore.

**Savers.**
The same compiled agent (tests.langgraph_agent: a tool-calling loop with a
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
  100 random checkpoints of the thread (by id), from a fresh saver. The two graphs run in
  turns, turn by turn, and the two savers read in turns, call by call, so that the
  machine's drift during the run weighs on both.

**Stores.** The LoCoMo dev conversations (``bench/recall.py``'s loader and measure: one
item per turn under ``("locomo", "conv<id>")``, value ``{"text", "date"}``, each question
one ``search(namespace, query=question, limit=10)``, recall@k = share of its evidence
turns in the first k) loaded into DjangoStore (tenant ``bench``, application role) and
into LangGraph's ``AsyncPostgresStore`` (owner role, its ``setup()``; its default HNSW
cosine index), both embedding the ``text`` field with WordLlama (256 dimensions). Both
are driven through their async API, one search at a time.

    PYTHONPATH=$PWD .venv/bin/python bench/langgraph_vs_postgres.py [--turns 200] \
        [--part saver|store|all] [--prepare-threshold 0]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import langgraph.checkpoint.postgres
import langgraph.graph
from embedded_django import add_prepare_threshold, embedded_workdir, setup_django, table_bytes
from recall import WORDLLAMA_DIM, Config, Context, LangGraphSubject, load_conversations
from recall import measure as measure_recall

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


def write(savers: dict[str, Any], turns: int) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """Run the agent ``turns`` turns on each saver, the savers taking turns (turn by turn,
    so that the machine's drift weighs on both alike); their ``put`` times and final
    states, by name."""
    from tests.langgraph_agent import build_agent, user_turn

    puts: dict[str, list[float]] = {name: [] for name in savers}
    graphs = {}
    for name, saver in savers.items():
        saver.put = timed(puts[name], saver.put)
        graphs[name] = build_agent(saver)
    for turn in range(turns):
        for graph in graphs.values():
            graph.invoke(user_turn(turn), CONFIG, durability="sync")
    return puts, {name: graph.get_state(CONFIG).values for name, graph in graphs.items()}


def read(
    listers: dict[str, Any], fresh: dict[str, Any], states: dict[str, Any]
) -> dict[str, dict[str, Any]]:
    """``get_tuple`` times of each fresh saver: the newest checkpoint 100 times, then 100
    random checkpoints by id (the same positions in each thread), the savers taking turns
    call by call so that the machine's drift weighs on both alike. The ids come from
    ``listers``, other savers: a ``list`` would leave its rows in a DjangoSaver's cache."""
    ids = {
        name: [t.config["configurable"]["checkpoint_id"] for t in saver.list(CONFIG)]
        for name, saver in listers.items()
    }
    found: dict[str, dict[str, Any]] = {
        name: {"checkpoints": len(ids[name]), "newest": [], "by id": []} for name in fresh
    }
    for _ in range(100):
        for name, saver in fresh.items():
            start = time.perf_counter()
            newest = saver.get_tuple(CONFIG)
            found[name]["newest"].append(time.perf_counter() - start)
            assert newest.checkpoint["channel_values"]["messages"] == states[name]["messages"]
    count = min(len(checkpoints) for checkpoints in ids.values())
    for position in random.Random(7).sample(range(count), min(100, count)):
        for name, saver in fresh.items():
            config = {"configurable": {"thread_id": THREAD, "checkpoint_id": ids[name][position]}}
            start = time.perf_counter()
            assert saver.get_tuple(config) is not None
            found[name]["by id"].append(time.perf_counter() - start)
    return {
        name: {
            "checkpoints": r["checkpoints"],
            "get_tuple newest": quantiles_ms(r["newest"]),
            "get_tuple by id": quantiles_ms(r["by id"]),
        }
        for name, r in found.items()
    }


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


class DjangoStoreSubject:
    """DjangoStore for ``bench/recall.py``'s measure: its namespaces are ``(tenant, *ns)``."""

    def __init__(self, embedder: Any) -> None:
        from tulip_memory.langgraph import DjangoStore

        self.store = DjangoStore(tenant="bench", embedder=embedder, index={"fields": ["text"]})

    async def load(self, namespace: tuple[str, ...], items: list[tuple[str, Any]]) -> None:
        from langgraph.store.base import PutOp

        assert namespace[0] == "bench"
        for start in range(0, len(items), 500):
            chunk = items[start : start + 500]
            await self.store.abatch([PutOp(namespace[1:], key, value) for key, value in chunk])

    async def search(self, namespace: tuple[str, ...], query: str, limit: int) -> list[str]:
        hits = await self.store.asearch(namespace[1:], query=query, limit=limit)
        return [hit.key for hit in hits]


class PostgresStoreSubject(LangGraphSubject):
    """``AsyncPostgresStore`` on the same LangGraph namespaces as DjangoStore's."""

    async def load(self, namespace: tuple[str, ...], items: list[tuple[str, Any]]) -> None:
        await super().load(namespace[1:], items)

    async def search(self, namespace: tuple[str, ...], query: str, limit: int) -> list[str]:
        return await super().search(namespace[1:], query, limit)


def run_stores(owner_url: str) -> list[dict[str, Any]]:
    import asyncio

    ctx = Context(admin_url=owner_url)
    configs = [
        Config("DjangoStore (tulip_memory)", lambda c: DjangoStoreSubject(c.wordllama())),
        Config(
            "PostgresStore (langgraph)",
            lambda c: PostgresStoreSubject(c.admin_url, c.wordllama()),
        ),
    ]
    conversations = load_conversations()

    async def both() -> list[dict[str, Any]]:
        return [await measure_recall(config, ctx, conversations) for config in configs]

    return asyncio.run(both())


def run_savers(urls: Any, turns: int, max_chain_depth: int | None) -> None:
    options = {} if max_chain_depth is None else {"max_chain_depth": max_chain_depth}
    from tulip_memory.langgraph import DjangoSaver

    PostgresSaver = langgraph.checkpoint.postgres.PostgresSaver

    ours, theirs = "DjangoSaver (tulip_memory)", "PostgresSaver (langgraph)"
    with (
        PostgresSaver.from_conn_string(urls.owner) as saver,
        PostgresSaver.from_conn_string(urls.owner) as fresh,
    ):
        saver.setup()
        puts, states = write({ours: DjangoSaver(tenant="bench", **options), theirs: saver}, turns)
        assert states[ours] == states[theirs]
        results = read(
            {ours: DjangoSaver(tenant="bench"), theirs: saver},
            {ours: DjangoSaver(tenant="bench"), theirs: fresh},
            states,
        )
    for name in results:
        results[name]["put"] = quantiles_ms(puts[name])
    results[ours]["payload"] = DjangoSaver(tenant="bench").storage_bytes(THREAD)
    results[ours]["tables"] = table_bytes(urls.owner, ["tulip_memory_langgraph_checkpoint"])
    results[theirs]["payload"] = postgres_payload_bytes(urls.owner)
    results[theirs]["tables"] = table_bytes(
        urls.owner, ["checkpoints", "checkpoint_blobs", "checkpoint_writes"]
    )
    base = results[theirs]
    print(
        f"\n{turns} turns, {len(states[ours]['messages'])} messages, "
        f"{results[ours]['checkpoints']} checkpoints per saver (ms; bytes)"
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--max-chain-depth", type=int, default=None)
    parser.add_argument("--part", choices=["saver", "store", "all"], default="all")
    add_prepare_threshold(parser)
    args = parser.parse_args()
    with embedded_workdir() as workdir:
        urls = setup_django(
            Path(workdir),
            prepare_threshold=args.prepare_threshold,
            VECTOR_DIMENSIONS=WORDLLAMA_DIM,
            EMBEDDER="tulip_memory.embeddings.WordLlamaEmbedding",
        )
        if args.part in ("saver", "all"):
            run_savers(urls, args.turns, args.max_chain_depth)
        if args.part in ("store", "all"):
            results = run_stores(urls.owner)
            questions = results[0]["questions"]
            print(f"\nLoCoMo dev, {questions} questions, limit 10, WordLlama (ms)")
            print(f"{'store':<28} {'R@1':>6} {'R@5':>6} {'R@10':>6} {'p50':>7} {'p95':>7}")
            for r in results:
                print(
                    f"{r['name']:<28} {r['r@1']:>6.3f} {r['r@5']:>6.3f} {r['r@10']:>6.3f} "
                    f"{r['p50_ms']:>7.2f} {r['p95_ms']:>7.2f}"
                )


if __name__ == "__main__":
    main()
