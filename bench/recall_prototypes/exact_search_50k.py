"""Scratch measure for issue 12 item 4: fast exact-quality search in one namespace of 50k rows.

An embedded PostgreSQL 18 + pgvector; a table of ``--rows`` 384-d rows in the target
namespace plus as many in another namespace (so that a namespace filter matters); seeded
Gaussian vectors (``numpy`` PCG64, seed 42, as ``bench/pg_store.py``: no cluster structure,
the hardest case for quantisation and graphs). For each method: p50 / p95 of ``--queries``
searches (limit 10) and recall@10 against the exact top 10 (numpy, cosine). Every
statement is planned with its own parameters (``prepare=False``): a prepared statement's
generic plan left the HNSW index for the btree after a few runs, so the exact scan's
recall and time were reported under the index's name.

    .venv/bin/python bench/recall_prototypes/exact_search_50k.py [--rows 50000] [--queries 50]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from embedded_django import embedded_workdir

DIM = 384

METHODS = {
    "exact vector": "SELECT id FROM items WHERE ns = 'a' ORDER BY embedding <=> %(q)s LIMIT 10",
    "exact halfvec": (
        "SELECT id FROM items WHERE ns = 'a' ORDER BY half <=> %(q)s::halfvec LIMIT 10"
    ),
    "binary 400 + exact re-rank": """
        SELECT id FROM (
            SELECT id, embedding FROM items WHERE ns = 'a'
            ORDER BY bits <~> binary_quantize(%(q)s::vector)::bit(384) LIMIT 400
        ) candidates ORDER BY embedding <=> %(q)s LIMIT 10""",
    "binary 400 + halfvec re-rank": """
        SELECT id FROM (
            SELECT id, half FROM items WHERE ns = 'a'
            ORDER BY bits <~> binary_quantize(%(q)s::vector)::bit(384) LIMIT 400
        ) candidates ORDER BY half <=> %(q)s::halfvec LIMIT 10""",
    "hnsw iterative (ef 100)": "SELECT id FROM items WHERE ns = 'a' "
    "ORDER BY embedding <=> %(q)s LIMIT 10",
    "hnsw iterative (ef 400)": "SELECT id FROM items WHERE ns = 'a' "
    "ORDER BY embedding <=> %(q)s LIMIT 10",
}
# The HNSW rows forbid the other plans: with half the table in the namespace the planner
# would rather scan exactly.
HNSW_ONLY = "SET enable_seqscan = off; SET enable_bitmapscan = off; "
SETTINGS = {
    "hnsw iterative (ef 100)": HNSW_ONLY
    + "SET hnsw.iterative_scan = relaxed_order; SET hnsw.ef_search = 100",
    "hnsw iterative (ef 400)": HNSW_ONLY
    + "SET hnsw.iterative_scan = relaxed_order; SET hnsw.ef_search = 400",
}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args()

    import psycopg

    from tulip_memory.testing.postgres import start_embedded

    rng = np.random.default_rng(42)
    vectors = rng.standard_normal((2 * args.rows, DIM), dtype=np.float32)
    queries = rng.standard_normal((args.queries, DIM), dtype=np.float32)
    target = vectors[: args.rows] / np.linalg.norm(vectors[: args.rows], axis=1, keepdims=True)
    with embedded_workdir("tulip-bench-exact-") as tmp:
        url = start_embedded(Path(tmp) / "pgdata", cleanup="delete")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute(
                f"CREATE TABLE items (id int PRIMARY KEY, ns text NOT NULL, "
                f"embedding vector({DIM}) NOT NULL, half halfvec({DIM}) NOT NULL, "
                f"bits bit({DIM}) GENERATED ALWAYS AS "
                f"(binary_quantize(embedding)::bit({DIM})) STORED)"
            )
            conn.execute("ALTER TABLE items ALTER COLUMN embedding SET STORAGE MAIN")
            started = time.perf_counter()
            with (
                conn.cursor() as cur,
                cur.copy("COPY items (id, ns, embedding, half) FROM STDIN") as copy,
            ):
                for i, row in enumerate(vectors):
                    text = "[" + ",".join(f"{x:.6g}" for x in row) + "]"
                    copy.write_row((i, "a" if i < args.rows else "b", text, text))
            print(f"loaded {2 * args.rows:,} rows in {time.perf_counter() - started:.0f} s")
            conn.execute("CREATE INDEX items_ns ON items (ns)")
            conn.execute("SET maintenance_work_mem = '1GB'")
            started = time.perf_counter()
            conn.execute(
                "CREATE INDEX items_hnsw ON items USING hnsw (embedding vector_cosine_ops)"
            )
            print(f"HNSW built in {time.perf_counter() - started:.0f} s")
            conn.execute("VACUUM ANALYZE items")
            exact = []
            for q in queries:
                similarity = target @ (q / np.linalg.norm(q))
                exact.append(set(np.argsort(-similarity)[:10].tolist()))
            print(f"{'method':<30} {'p50 ms':>8} {'p95 ms':>8} {'recall@10':>10}")
            for name, sql in METHODS.items():
                conn.execute("RESET ALL")
                conn.execute("SET enable_indexscan = off" if "hnsw" not in name else "SELECT 1")
                for statement in SETTINGS.get(name, "").split(";"):
                    if statement.strip():
                        conn.execute(statement)
                first = "[" + ",".join(map(repr, queries[0].tolist())) + "]"
                plan = conn.execute("EXPLAIN " + sql, {"q": first}, prepare=False).fetchall()
                scans = [r[0].strip() for r in plan if "Scan" in r[0]]
                print(f"  plan of {name}: {' / '.join(scans)}")
                timings, recalls = [], []
                for j, q in enumerate(queries):
                    literal = "[" + ",".join(map(repr, q.tolist())) + "]"
                    started = time.perf_counter()
                    rows = conn.execute(sql, {"q": literal}, prepare=False).fetchall()
                    timings.append(time.perf_counter() - started)
                    recalls.append(len(exact[j] & {r[0] for r in rows}) / 10)
                print(
                    f"{name:<30} {statistics.median(timings) * 1000:>8.2f} "
                    f"{percentile(timings, 0.95) * 1000:>8.2f} {statistics.mean(recalls):>10.3f}"
                )


if __name__ == "__main__":
    main()
