"""Benchmark of PgMemory on a large table, side by side with LangGraph's AsyncPostgresStore.

An embedded PostgreSQL 18 + pgvector in a temporary folder, the two roles of
tulip_memory.testing.postgres, ``TULIP_MEMORY["VECTOR_DIMENSIONS"] = 384``. The table gets
``--rows`` rows (default 1,000,000) across ``--tenants`` tenants (default 1,000); tenant
``t0000`` holds four namespaces of 100, 1,000, 10,000 and 50,000 rows, the others share the
rest (10 namespaces each). Vectors are 384-d from a seeded generator (``numpy`` PCG64, seed
42), served by an in-process embedder that maps ``"doc <i>"`` to row i's vector and
``"query q<j>"`` to query j's, so that every store ranks the same vectors. A query shares
no word with the rows: its top 10 is the exact vector answer, whatever the store does with
words.

Measured:

1. ``put_batch`` rows/s (chunks of ``--chunk`` items: one bulk upsert each, as the app
   role under row-level security) against a raw psycopg binary ``COPY`` of the same rows
   into a twin table (same columns, indexes and constraints) — the floor of any loader;
2. ``search`` p50 / p95 and recall@10 against the exact top 10 (numpy) for the namespaces
   of 100, 1k, 10k and 50k rows (``--queries`` queries each, one after the other: the exact
   answers are computed before the first is timed);
3. ``search_many`` over the four namespaces against four ``search`` calls;
4. LangGraph's ``AsyncPostgresStore`` (default index: HNSW, cosine) fed the rows of tenant
   ``t0000`` (61,100 rows: loading 1M rows through its HNSW index would take hours on 2
   cores), then the same searches: put rows/s, p50 / p95, recall@10, and our/their ratios.

    .venv/bin/python bench/pg_store.py [--rows 1000000] [--tenants 1000] [--queries 50]
                                       [--skip-langgraph] [--prepare-threshold 0]

``--citus [BUILD_SCRIPT]``: ``put_batch`` and the searches (namespaces of 100, 1k and 10k
rows) on one server, then the same rows on a Citus coordinator with two workers of the
embedded PostgreSQL (tests.citus_cluster; Citus built by BUILD_SCRIPT, default
``shared/citus/build.sh`` beside the repository); p50 on Citus / p50 on one server.

``--quantisation``: only this, no database: would a quantised first pass keep the exact top
10 of the 50k-row namespace among its best N rows? recall@10 of the first pass's pool
against the exact top 10, for several N: one sign bit per dimension, symmetric (hamming
distance between the query's and the rows' sign bits, pgvector's ``binary_quantize`` +
``<~>``) and asymmetric (the float query against the rows' signs); the search index's
codes (two bits a dimension, ``tulip_memory.postgres.search_index``) against the query in two bits
(the pass before 2026-12-05) and in the three bits of ``query_planes`` (the pass now).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from embedded_django import add_prepare_threshold, embedded_workdir, setup_django

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tulip_memory.embeddings import BaseEmbedding

DIM = 384
SIZES = {"ns100": 100, "ns1k": 1_000, "ns10k": 10_000, "ns50k": 50_000}
CITUS_SIZES = {"ns100": 100, "ns1k": 1_000, "ns10k": 10_000}
FOCUS_TENANT = "t0000"


# -- data --------------------------------------------------------------------------------


@dataclass
class Layout:
    """Which rows go where: ``spans`` are (tenant, namespace label, first row, count)."""

    rows: int
    sizes: dict[str, int]
    spans: list[tuple[str, str, int, int]] = field(default_factory=list)

    @classmethod
    def build(cls, rows: int, tenants: int, sizes: dict[str, int] = SIZES) -> Layout:
        layout = cls(rows, sizes)
        start = 0
        for label, count in sizes.items():
            layout.spans.append((FOCUS_TENANT, label, start, count))
            start += count
        others = tenants - 1
        per_namespace = max(1, (rows - start) // (others * 10))
        for t in range(1, tenants):
            for n in range(10):
                count = per_namespace if (t, n) != (others, 9) else rows - start
                if count <= 0:
                    break
                layout.spans.append((f"t{t:04d}", f"ns{n}", start, count))
                start += count
        layout.rows = start
        return layout

    def namespace(self, tenant: str, label: str) -> tuple[str, ...]:
        return (tenant, "memories", label)

    def span(self, label: str) -> tuple[int, int]:
        for tenant, name, first, count in self.spans:
            if tenant == FOCUS_TENANT and name == label:
                return first, count
        raise KeyError(label)


class SeededEmbedding(BaseEmbedding):
    """``"doc <i>"`` -> row i's vector, ``"query q<j>"`` -> query j's."""

    def __init__(self, vectors: np.ndarray, queries: np.ndarray) -> None:
        self.vectors = vectors
        self.queries = queries

    @property
    def dimension(self) -> int:
        return DIM

    def vector(self, text: str) -> np.ndarray:
        kind, number = text.split()
        return (self.vectors if kind == "doc" else self.queries)[int(number.lstrip("q"))]

    async def embed(self, text: str) -> list[float]:
        return self.vector(text).tolist()

    async def embed_batch(self, texts: list[str]) -> list[np.ndarray]:
        return [self.vector(text) for text in texts]


def generate(layout: Layout) -> tuple[np.ndarray, np.ndarray]:
    """The rows' vectors and 2,000 queries' (seeded)."""
    rng = np.random.default_rng(42)
    print(f"generating {layout.rows:,} x {DIM} vectors ...", flush=True)
    vectors = rng.standard_normal((layout.rows, DIM), dtype=np.float32)
    return vectors, rng.standard_normal((2000, DIM), dtype=np.float32)


def exact_top10(vectors: np.ndarray, first: int, count: int, query: np.ndarray) -> list[str]:
    block = vectors[first : first + count].astype(np.float64)
    similarity = block @ query / (np.linalg.norm(block, axis=1) * np.linalg.norm(query))
    best = np.argsort(-similarity, kind="stable")[:10]
    return [f"k{first + int(i)}" for i in best]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def fmt_ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


# -- set-up ------------------------------------------------------------------------------


def items_of(layout: Layout, first_span: int = 0, spans: int | None = None) -> Any:
    chosen = layout.spans[first_span : None if spans is None else first_span + spans]
    for tenant, label, first, count in chosen:
        namespace = layout.namespace(tenant, label)
        for i in range(first, first + count):
            yield namespace, f"k{i}", {"text": f"doc {i}"}, None


# -- 1. loading --------------------------------------------------------------------------


async def load_pgmemory(store: Any, layout: Layout, chunk: int) -> float:
    started = time.perf_counter()
    batch: list[Any] = []
    done = 0
    for item in items_of(layout):
        batch.append(item)
        if len(batch) == chunk:
            await store.put_batch(batch)
            done += len(batch)
            batch = []
            if done % 100_000 == 0:
                print(
                    f"  put_batch: {done:,} rows, {time.perf_counter() - started:.0f} s", flush=True
                )
    if batch:
        await store.put_batch(batch)
    return time.perf_counter() - started


def _item_table() -> str:
    """PgMemory's table, quoted as the model's own statements quote it."""
    from django.db import connection

    from tulip_memory.models.store import MemoryItem

    return connection.ops.quote_name(MemoryItem._meta.db_table)


def load_copy(admin_url: str, rows: Iterable[tuple[Any, ...]], vectors: np.ndarray) -> float:
    """Binary COPY of the same rows into a twin table (no row-level security on it).

    ``rows`` are ``put_batch``'s ``(namespace, key, value, metadata)``; row i's vector is
    ``vectors[i]``. The twin is ``LIKE`` PgMemory's table ``INCLUDING ALL``: its generated
    columns and indexes, no trigger.
    """
    import psycopg
    from pgvector.psycopg import register_vector
    from psycopg.types.json import Jsonb

    from tulip_memory.core.namespaces import encode_namespace
    from tulip_memory.core.text import tokenize
    from tulip_memory.models.store import search_text_of

    with psycopg.connect(admin_url, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("DROP TABLE IF EXISTS bench_copy")
        conn.execute(f"CREATE TABLE bench_copy (LIKE {_item_table()} INCLUDING ALL)")
        columns = (
            "tenant, namespace, key, value, metadata, search_text, embedding, "
            "embedding_source, created_at, updated_at, version"
        )
        started = time.perf_counter()
        with (
            conn.cursor() as cursor,
            cursor.copy(f"COPY bench_copy ({columns}) FROM STDIN (FORMAT BINARY)") as copy,
        ):
            copy.set_types(
                [
                    "varchar",
                    "text",
                    "text",
                    "jsonb",
                    "jsonb",
                    "text",
                    "vector",
                    "varchar",
                    "timestamptz",
                    "timestamptz",
                    "int8",
                ]
            )
            for i, (namespace, key, value, _metadata) in enumerate(rows):
                now = datetime.now(UTC)
                copy.write_row(
                    (
                        namespace[0],
                        encode_namespace(namespace),
                        key,
                        Jsonb(value),
                        Jsonb({}),
                        search_text_of(tokenize(value["text"])),
                        vectors[i],
                        "bench",
                        now,
                        now,
                        1,
                    )
                )
        elapsed = time.perf_counter() - started
        conn.execute("DROP TABLE bench_copy")
    return elapsed


# -- 2./3. searching -----------------------------------------------------------------------


async def measure_searches(
    search: Any, layout: Layout, vectors: np.ndarray, queries: np.ndarray, count: int
) -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, float]] = {}
    for label in layout.sizes:
        first, size = layout.span(label)
        namespace = layout.namespace(FOCUS_TENANT, label)
        # The answers first: computing one between two searches (a 50k x 384 float64
        # product) evicted the server's pages from the CPU caches, and the next search
        # paid for it (50k rows: ~4 ms more).
        expected = {j: exact_top10(vectors, first, size, queries[j]) for j in range(1, count + 1)}
        await search(namespace, "query q0")  # warm-up (plan cache, connection)
        timings, recalls = [], []
        for j in range(1, count + 1):
            started = time.perf_counter()
            keys = await search(namespace, f"query q{j}")
            timings.append(time.perf_counter() - started)
            recalls.append(len(set(keys) & set(expected[j])) / 10)
        results[label] = {
            "rows": size,
            "p50": statistics.median(timings),
            "p95": percentile(timings, 0.95),
            "recall": statistics.mean(recalls),
        }
    return results


async def measure_search_many(store: Any, layout: Layout, rounds: int) -> dict[str, float]:
    namespaces = [layout.namespace(FOCUS_TENANT, label) for label in layout.sizes]
    together, apart = [], []
    for j in range(rounds):
        query = f"query q{1000 + j}"
        started = time.perf_counter()
        many = await store.search_many(namespaces, query, limit=10)
        together.append(time.perf_counter() - started)
        started = time.perf_counter()
        single = [await store.search(ns, query, limit=10) for ns in namespaces]
        apart.append(time.perf_counter() - started)
        assert [[i.key for i in r] for r in many] == [[i.key for i in r] for r in single]
    return {
        "search_many_p50": statistics.median(together),
        "four_searches_p50": statistics.median(apart),
    }


# -- 4. LangGraph ----------------------------------------------------------------------------


async def langgraph_side(
    *,
    admin_url: str,
    layout: Layout,
    embedder: SeededEmbedding,
    queries: np.ndarray,
    count: int,
    chunk: int,
) -> dict[str, Any]:
    from langgraph.store.base import PutOp
    from langgraph.store.postgres import AsyncPostgresStore

    async def embed(texts: list[str]) -> list[list[float]]:
        return [embedder.vector(text).tolist() for text in texts]

    index = {"dims": DIM, "embed": embed, "fields": ["text"]}
    async with AsyncPostgresStore.from_conn_string(admin_url, index=index) as store:
        await store.setup()
        rows = sum(count for tenant, _l, _f, count in layout.spans if tenant == FOCUS_TENANT)
        started = time.perf_counter()
        batch: list[Any] = []
        for namespace, key, value, _metadata in items_of(layout, 0, len(layout.sizes)):
            batch.append(PutOp(namespace, key, value))
            if len(batch) == chunk:
                await store.abatch(batch)
                batch = []
        if batch:
            await store.abatch(batch)
        put_seconds = time.perf_counter() - started

        async def search(namespace: tuple[str, ...], query: str) -> list[str]:
            hits = await store.asearch(namespace, query=query, limit=10)
            return [hit.key for hit in hits]

        searches = await measure_searches(search, layout, embedder.vectors, queries, count)
    return {"rows": rows, "put_seconds": put_seconds, "searches": searches}


# -- quantisation -----------------------------------------------------------------------------


def quantisation_recall(
    layout: Layout, vectors: np.ndarray, queries: np.ndarray, count: int
) -> None:
    from tulip_memory.postgres.search_index import QUERY_WEIGHTS, query_planes

    first, size = layout.span("ns50k")
    block = vectors[first : first + size].astype(np.float64)
    unit = block / np.linalg.norm(block, axis=1, keepdims=True)
    signs = block > 0
    # search_codes: each unit vector's three thermometer planes (search_index).
    t = 0.6745 / np.sqrt(DIM)
    codes = np.concatenate([unit > -t, unit > 0, unit > t], axis=1)
    pools = (100, 500, 1_000, 2_000, 5_000, 10_000)
    kinds = (
        "sign bits, symmetric",
        "sign bits, asymmetric",
        "codes, 2-bit query",
        "codes, 3-bit query",
    )
    found: dict[str, dict[int, list[float]]] = {kind: {n: [] for n in pools} for kind in kinds}
    for j in range(1, count + 1):
        query = queries[j].astype(np.float64)
        exact = set(np.argsort(-(unit @ query), kind="stable")[:10].tolist())
        planes = [np.array([c == "1" for c in p]) for p in query_planes(query)]
        ranks = {
            kinds[0]: (signs != (query > 0)).sum(axis=1),
            kinds[1]: -(np.where(signs, 1.0, -1.0) @ query),
            kinds[2]: codes_rank_two_bits(codes, query),
            kinds[3]: sum(
                w * (codes != p).sum(axis=1) for w, p in zip(QUERY_WEIGHTS, planes, strict=True)
            ),
        }
        for kind, rank in ranks.items():
            order = np.argsort(rank, kind="stable")
            for n in pools:
                found[kind][n].append(len(exact & set(order[:n].tolist())) / 10)
    print(f"first pass over the {size:,}-row namespace, {count} queries: recall@10 of its best N")
    print(f"{'pool N':>8} " + " ".join(f"{kind:>22}" for kind in kinds))
    for n in pools:
        print(f"{n:>8,} " + " ".join(f"{statistics.mean(found[k][n]):>22.3f}" for k in kinds))


def codes_rank_two_bits(codes: np.ndarray, query: np.ndarray) -> np.ndarray:
    """The rank the codes' pass gave before the three-bit query: the query in two bits, a
    Gaussian's four Lloyd-Max levels (thresholds 0 and +-0.9816 sigma)."""
    q = query / np.linalg.norm(query)
    step = 0.9816 * q.std()
    level = np.digitize(q, [-step, 0.0, step])
    weights = (1.0572, 1.9628)
    return sum(
        w * (codes != np.tile((level >> bit) & 1, 3).astype(bool)).sum(axis=1)
        for bit, w in enumerate(weights)
    )


# -- main --------------------------------------------------------------------------------------


def vacuum(admin_url: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"VACUUM ANALYZE {_item_table()}")


def searcher(store: Any) -> Any:
    async def search(namespace: tuple[str, ...], query: str) -> list[str]:
        return [item.key for item in await store.search(namespace, query, limit=10)]

    return search


async def run_citus(args: argparse.Namespace, db: Any) -> dict[str, Any]:
    """``put_batch`` and the searches on one server, then on the Citus cluster: the same rows,
    namespaces of up to 10k rows."""
    from tulip_memory.store import PgMemory

    layout = Layout.build(args.rows, args.tenants, CITUS_SIZES)
    vectors, queries = generate(layout)
    result: dict[str, Any] = {"rows": layout.rows, "tenants": args.tenants}
    for alias, admin_url in (("default", db.admin), ("citus", db.citus_admin)):
        store = PgMemory(using=alias, embedder=SeededEmbedding(vectors, queries))
        print(f"{alias}: put_batch, then searching ...", flush=True)
        put_seconds = await load_pgmemory(store, layout, args.chunk)
        vacuum(admin_url)
        result[alias] = {
            "put_batch_rows_per_s": layout.rows / put_seconds,
            "search": await measure_searches(
                searcher(store), layout, vectors, queries, args.queries
            ),
        }
    return result


def report_citus(result: dict[str, Any]) -> None:
    one, cluster = result["default"], result["citus"]
    print(f"\n{result['rows']:,} rows, {result['tenants']:,} tenants, {DIM}-d vectors")
    print(
        f"put_batch rows/s: one server {one['put_batch_rows_per_s']:,.0f}, "
        f"Citus {cluster['put_batch_rows_per_s']:,.0f}"
    )
    side_by_side(
        one["search"],
        cluster["search"],
        ("one", "Citus", "p50 Citus/one"),
        lambda a, b: b["p50"] / a["p50"],
    )


def side_by_side(
    left: dict[str, Any], right: dict[str, Any], heads: tuple[str, str, str], ratio: Any
) -> None:
    """p50, p95 and recall per namespace of two runs of the searches, and ``ratio`` of the
    two namespaces' figures under ``heads[2]``."""
    a, b, ratio_head = heads
    print(
        f"{'namespace':>10} {a + ' p50':>10} {a + ' p95':>10} {'recall':>7} | "
        f"{b + ' p50':>10} {b + ' p95':>10} {'recall':>7} | {ratio_head:>13}"
    )
    for label, mine in left.items():
        other = right[label]
        print(
            f"{mine['rows']:>10,} {fmt_ms(mine['p50']):>10} {fmt_ms(mine['p95']):>10} "
            f"{mine['recall']:>7.3f} | {fmt_ms(other['p50']):>10} {fmt_ms(other['p95']):>10} "
            f"{other['recall']:>7.3f} | {ratio(mine, other):>13.2f}"
        )


async def run(args: argparse.Namespace, admin_url: str) -> dict[str, Any]:
    from tulip_memory.store import PgMemory

    layout = Layout.build(args.rows, args.tenants)
    vectors, queries = generate(layout)
    embedder = SeededEmbedding(vectors, queries)
    store = PgMemory(embedder=embedder)

    print("1. loading through PgMemory.put_batch ...", flush=True)
    put_seconds = await load_pgmemory(store, layout, args.chunk)
    print("   loading the same rows with a binary COPY ...", flush=True)
    copy_seconds = load_copy(admin_url, items_of(layout), vectors)
    vacuum(admin_url)
    print("2. searching ...", flush=True)
    ours = await measure_searches(searcher(store), layout, vectors, queries, args.queries)
    print("3. search_many ...", flush=True)
    many = await measure_search_many(store, layout, args.queries)
    if args.skip_langgraph:
        theirs = None
    else:
        print("4. LangGraph AsyncPostgresStore ...", flush=True)
        theirs = await langgraph_side(
            admin_url=admin_url,
            layout=layout,
            embedder=embedder,
            queries=queries,
            count=args.queries,
            chunk=1000,
        )
    return {
        "rows": layout.rows,
        "tenants": args.tenants,
        "put_batch_rows_per_s": layout.rows / put_seconds,
        "copy_rows_per_s": layout.rows / copy_seconds,
        "search": ours,
        "search_many": many,
        "langgraph": theirs,
    }


def report(result: dict[str, Any]) -> None:
    put, copy = result["put_batch_rows_per_s"], result["copy_rows_per_s"]
    print(f"\n{result['rows']:,} rows, {result['tenants']:,} tenants, {DIM}-d vectors")
    print(
        f"put_batch {put:,.0f} rows/s; binary COPY {copy:,.0f} rows/s; "
        f"COPY/put_batch = {copy / put:.2f}x"
    )
    theirs = result["langgraph"]
    if theirs is None:
        for label, mine in result["search"].items():
            print(
                f"{label}: p50 {fmt_ms(mine['p50'])} p95 {fmt_ms(mine['p95'])} "
                f"recall {mine['recall']}"
            )
        return
    lg_put = theirs["rows"] / theirs["put_seconds"]
    print(
        f"LangGraph put ({theirs['rows']:,} rows): {lg_put:,.0f} rows/s; "
        f"ours/theirs = {put / lg_put:.2f}x"
    )
    side_by_side(
        result["search"],
        theirs["searches"],
        ("ours", "LG", "p95 ours/LG"),
        lambda a, b: a["p95"] / b["p95"],
    )
    many = result["search_many"]
    print(
        f"search_many over 4 namespaces p50 {fmt_ms(many['search_many_p50'])}; "
        f"4 searches p50 {fmt_ms(many['four_searches_p50'])}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--tenants", type=int, default=1_000)
    parser.add_argument("--chunk", type=int, default=5_000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--skip-langgraph", action="store_true")
    parser.add_argument("--quantisation", action="store_true")
    parser.add_argument(
        "--citus",
        nargs="?",
        const=Path(__file__).resolve().parents[2] / "shared" / "citus" / "build.sh",
        type=Path,
        metavar="BUILD_SCRIPT",
    )
    add_prepare_threshold(parser)
    args = parser.parse_args()
    if args.quantisation:
        layout = Layout.build(args.rows, args.tenants)
        quantisation_recall(layout, *generate(layout), args.queries)
        return
    with embedded_workdir("tulip-bench-pg-") as tmp:
        # Sync, before the event loop: Django refuses to set itself up inside one.
        db = setup_django(
            Path(tmp),
            prepare_threshold=args.prepare_threshold,
            citus_build=args.citus,
            VECTOR_DIMENSIONS=DIM,
        )
        result = asyncio.run(run_citus(args, db) if args.citus else run(args, db.admin))
    (report_citus if args.citus else report)(result)
    print(json.dumps(result, indent=1, default=float))


if __name__ == "__main__":
    main()
