"""Benchmark of the cross-thread stores: latency at 1k, 10k and 100k items, and lexical recall.

Latency, for InMemoryStore and HolographicStore (a file in a temporary folder): the store
is filled with ``size`` short texts in one namespace (by ``put_batch`` of 500), then it
times ``put`` (500 single writes), ``put_batch`` (50 batches of 100), ``get`` (1000 reads),
``search`` (200 three-word queries, limit 10) and ``search_many`` (100 calls over the big
namespace and three namespaces of 1000 items) and prints p50 / p95 in milliseconds.

Recall: 10k short texts; each query is three words of one target text that no other text
holds all together; it reports how often the target comes first with FTS5 alone
(``mode="lexical"``, the default), HRR alone (``mode="hrr"``, an exact scan) and BM25's
candidates re-scored with HRR (``mode="fused"``).

    .venv/bin/python bench/store.py [--sizes 1000 10000 100000] [--recall-size 10000]
        [--recall-queries 500] [--stores memory holographic] [--no-recall]

Pure Python + SQLite: needs no database server and no Django settings.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path

from tulip_memory.store import BaseStore, HolographicStore, InMemoryStore

MAIN = ("bench", "main")
SIDE = [("bench", "facts"), ("bench", "feedback"), ("bench", "projects")]
SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "an", "el", "or", "us", "ix"]


def vocabulary(size: int, rng: random.Random) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


class Corpus:
    """Texts of 6-12 words drawn from a Zipf-like vocabulary (a few words are very common)."""

    def __init__(self, vocab_size: int = 5000, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        self.words = vocabulary(vocab_size, self.rng)
        self.weights = [1 / (rank + 1) ** 0.9 for rank in range(vocab_size)]

    def text(self) -> str:
        count = self.rng.randint(6, 12)
        return " ".join(self.rng.choices(self.words, self.weights, k=count))

    def texts(self, count: int) -> list[str]:
        return [self.text() for _ in range(count)]


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1000, p95 * 1000


async def timed(calls: list[Callable[[], Awaitable[object]]]) -> tuple[float, float]:
    samples = []
    for call in calls:
        start = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - start)
    return percentiles(samples)


async def fill(store: BaseStore, namespace: tuple[str, ...], texts: list[str]) -> None:
    for start in range(0, len(texts), 500):
        chunk = texts[start : start + 500]
        await store.put_batch(
            [(namespace, f"k{start + i}", {"text": t}, None) for i, t in enumerate(chunk)]
        )


async def latency(name: str, store: BaseStore, size: int, corpus: Corpus) -> None:
    rng = random.Random(size)
    started = time.perf_counter()
    texts = corpus.texts(size)
    await fill(store, MAIN, texts)
    for namespace in SIDE:
        await fill(store, namespace, corpus.texts(1000))
    fill_seconds = time.perf_counter() - started

    queries = [" ".join(rng.sample(rng.choice(texts).split(), 3)) for _ in range(200)]
    extra = corpus.texts(500)
    results = {
        "put": await timed(
            [lambda i=i: store.put(MAIN, f"extra{i}", {"text": extra[i]}) for i in range(500)]
        ),
        "put_batch(100)": await timed(
            [
                lambda b=b: store.put_batch(
                    [(MAIN, f"b{b}-{i}", {"text": extra[i]}, None) for i in range(100)]
                )
                for b in range(50)
            ]
        ),
        "get": await timed(
            [lambda k=k: store.get(MAIN, f"k{k}") for k in rng.choices(range(size), k=1000)]
        ),
        "search": await timed([lambda q=q: store.search(MAIN, q) for q in queries]),
        "search_many(4)": await timed(
            [lambda q=q: store.search_many([MAIN, *SIDE], q) for q in queries[:100]]
        ),
    }
    cells = "  ".join(f"{op} {p50:7.3f}/{p95:7.3f}" for op, (p50, p95) in results.items())
    print(f"{name:<18} {size:>7}  fill {fill_seconds:6.1f}s  {cells}", flush=True)


def recall_queries(texts: list[str], count: int, rng: random.Random) -> list[tuple[int, str]]:
    """(target index, three of its words that no other text holds all together)."""
    holders: dict[str, set[int]] = defaultdict(set)
    for index, text in enumerate(texts):
        for word in set(text.split()):
            holders[word].add(index)
    queries: list[tuple[int, str]] = []
    while len(queries) < count:
        target = rng.randrange(len(texts))
        words = sorted(set(texts[target].split()))
        if len(words) < 3:
            continue
        chosen = rng.sample(words, 3)
        if set.intersection(*(holders[w] for w in chosen)) == {target}:
            queries.append((target, " ".join(chosen)))
    return queries


async def recall(size: int, count: int) -> None:
    corpus = Corpus(seed=11)
    texts = corpus.texts(size)
    queries = recall_queries(texts, count, random.Random(3))
    with tempfile.TemporaryDirectory() as folder:
        store = HolographicStore(Path(folder) / "recall.sqlite3")
        await fill(store, MAIN, texts)
        for mode in ("lexical", "hrr", "fused"):
            hits = 0
            started = time.perf_counter()
            for target, query in queries:
                found = await store.search(MAIN, query, limit=1, mode=mode)
                hits += bool(found) and found[0].key == f"k{target}"
            seconds = (time.perf_counter() - started) / len(queries)
            print(
                f"recall@1 {mode:<8} {hits / len(queries):.3f}  "
                f"({hits}/{len(queries)} queries, {seconds * 1000:.1f} ms/query)",
                flush=True,
            )
        await store.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--recall-size", type=int, default=10000)
    parser.add_argument("--recall-queries", type=int, default=500)
    parser.add_argument(
        "--stores", nargs="+", choices=["memory", "holographic"], default=["memory", "holographic"]
    )
    parser.add_argument("--no-recall", action="store_true")
    args = parser.parse_args()

    print("latency p50/p95 in ms (one namespace of `size` items; search limit 10)")
    for size in args.sizes:
        if "memory" in args.stores:
            await latency("InMemoryStore", InMemoryStore(), size, Corpus())
        if "holographic" in args.stores:
            with tempfile.TemporaryDirectory() as folder:
                store = HolographicStore(Path(folder) / "bench.sqlite3")
                await latency("HolographicStore", store, size, Corpus())
                await store.close()
    if args.no_recall:
        return
    print(f"\nlexical recall on {args.recall_size} texts, three shared words per query")
    await recall(args.recall_size, args.recall_queries)


if __name__ == "__main__":
    asyncio.run(main())
