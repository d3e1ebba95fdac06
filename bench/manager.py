"""Benchmark of the long-term memory manager.

1. Heuristic extractor: precision and recall per memory type on the labelled corpus of
   tests/manager/heuristic_corpus.py (an utterance counts for a type when the extractor
   yields at least one memory of that type).
2. ``on_session_start`` latency with ``--memories`` (10k) memories in the user's
   namespace (spread over the four types) on PgMemory (embedded PostgreSQL 18 +
   pgvector, HRR vectors, the app role under row-level security), and on InMemoryStore
   for comparison: 200 turns with different user messages; p50 / p95 / max in ms. Each
   call is two ``search_many`` statements (ranked + recency) over the 4 type namespaces.
3. Celery mode with 2 real workers (``celery -A example_project worker``, prefork, one
   child each) running the heuristic extractor into PgMemory: ``--jobs`` sessions over
   10 namespaces; the enqueue latency of ``on_session_end`` (p50 / p95) and jobs/s from
   the first enqueue until ``drain()`` returns.

    .venv/bin/python bench/manager.py [--memories 10000] [--jobs 200] [--skip-celery]

Starts its own embedded PostgreSQL in a temporary folder (tests/settings.py) and uses the
machine's Redis (REDIS_URL, default redis://127.0.0.1:6379/0).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

QUERIES = [
    "what database do we use for the billing service",
    "remind me of my role",
    "which editor do I prefer",
    "where is the design doc for search",
    "how should you format answers",
    "what did we decide about python versions",
    "the deadline for the release",
    "ticket about the login bug",
]
TOPICS = ["postgres", "billing", "search", "editor", "release", "python", "login", "cache"]


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[max(0, round(0.95 * len(ordered)) - 1)]
    return (
        f"p50 {statistics.median(ordered) * 1000:7.2f} ms   p95 {p95 * 1000:7.2f} ms   "
        f"max {ordered[-1] * 1000:7.2f} ms   (n={len(ordered)})"
    )


def heuristic_part() -> None:
    from tests.manager.heuristic_corpus import CORPUS, precision_recall

    print(f"\n== Heuristic extractor on the labelled corpus ({len(CORPUS)} utterances) ==")
    print(f"{'type':<10} {'precision':>9} {'recall':>7} {'tp':>4} {'fp':>4} {'fn':>4}")
    for memory_type, (precision, recall, tp, fp, fn) in precision_recall(CORPUS).items():
        print(f"{memory_type.value:<10} {precision:9.2f} {recall:7.2f} {tp:4d} {fp:4d} {fn:4d}")


async def _fill(store, prefix: tuple[str, ...], count: int) -> None:
    from tulip_memory.manager import Memory, MemoryType

    types = list(MemoryType)
    batch = []
    for i in range(count):
        memory_type = types[i % len(types)]
        topic = TOPICS[i % len(TOPICS)]
        memory = Memory(
            memory_type, f"fact-{i}", f"Fact {i} about {topic}: detail {i * 7919 % 10007}."
        )
        batch.append(
            (
                (*prefix, memory_type.value),
                memory.key,
                memory.to_store_value(),
                {"type": memory_type.value},
            )
        )
        if len(batch) == 500:
            await store.put_batch(batch)
            batch = []
    if batch:
        await store.put_batch(batch)


async def session_start_part(count: int) -> None:
    from tulip_memory.manager import LLMMemoryManager
    from tulip_memory.messages import Message, Role
    from tulip_memory.state import AgentState
    from tulip_memory.store import InMemoryStore, PgMemory

    prefix = ("bench", "users", "u1")
    for name, store in (("PgMemory", PgMemory()), ("InMemoryStore", InMemoryStore())):
        started = time.perf_counter()
        await _fill(store, prefix, count)
        fill = time.perf_counter() - started
        manager = LLMMemoryManager(store, namespace_prefix=prefix, max_memories=count)
        samples = []
        for turn in range(220):
            state = AgentState(
                messages=[
                    Message(Role.SYSTEM, "You help."),
                    Message(Role.USER, QUERIES[turn % len(QUERIES)]),
                ]
            )
            started = time.perf_counter()
            injected = await manager.on_session_start(state)
            if turn >= 20:  # the first 20 warm connections and caches
                samples.append(time.perf_counter() - started)
        assert injected.messages[1].metadata.get("tulip_memory_block")
        print(f"\n== on_session_start, {count} memories in the user's namespace, {name} ==")
        print(f"fill {fill:.1f} s; retrieve_limit {manager.retrieve_limit}")
        print(_ms(samples))


async def celery_part(jobs: int) -> None:
    from tests.manager.celery_setup import Workers
    from tulip_memory.manager import LLMMemoryManager
    from tulip_memory.messages import Message, Role
    from tulip_memory.state import AgentState
    from tulip_memory.store import InMemoryStore

    workers = Workers(2, Path(tempfile.mkdtemp(prefix="tulip-bench-workers-")))
    workers.start()
    try:
        manager = LLMMemoryManager(
            InMemoryStore(), namespace_prefix=("bench", "x"), extract_mode="celery"
        )
        conversation = [
            Message(
                Role.USER,
                "I'm a data engineer at Acme. We're migrating the billing service to Django 6.",
            ),
            Message(Role.ASSISTANT, "Understood. I'll keep the migration notes short."),
            Message(
                Role.USER,
                "Never push directly to main. The spec is at https://wiki.example.com/billing.",
            ),
        ]
        for _warm in range(5):  # connections to PostgreSQL and Redis
            with manager.scoped(("bench", "warmup")):
                await manager.on_session_end(AgentState(messages=conversation))
        await manager.drain()
        samples = []
        started = time.perf_counter()
        for number in range(jobs):
            with manager.scoped(("bench", f"user{number % 10}")):
                state = AgentState(
                    messages=[*conversation, Message(Role.USER, f"Ticket PROJ-{number} is mine.")]
                )
                before = time.perf_counter()
                await manager.on_session_end(state)
                samples.append(time.perf_counter() - before)
        enqueued = time.perf_counter() - started
        async with asyncio.timeout(600):
            await manager.drain()
        total = time.perf_counter() - started
        print(
            f"\n== Celery mode, 2 workers, {jobs} jobs over 10 namespaces "
            "(heuristic extractor, PgMemory) =="
        )
        print(f"on_session_end (record + enqueue): {_ms(samples)}")
        print(
            f"enqueued in {enqueued:.2f} s; all done after {total:.2f} s: {jobs / total:.1f} jobs/s"
        )
    finally:
        workers.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--skip-celery", action="store_true")
    args = parser.parse_args()

    heuristic_part()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    os.environ["TULIP_TEST_CELERY_QUEUE"] = (
        f"tulip_memory_bench_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    )
    os.environ["TULIP_TEST_EXTRACTOR"] = ""  # workers run the heuristic extractor
    import django
    from django.conf import settings
    from django.core.management import call_command

    from tests.manager.celery_setup import celery_tulip_memory

    django.setup()
    settings.TULIP_MEMORY = celery_tulip_memory()
    call_command("migrate", database="owner", verbosity=0)
    asyncio.run(session_start_part(args.memories))
    if not args.skip_celery:
        asyncio.run(celery_part(args.jobs))


if __name__ == "__main__":
    main()
