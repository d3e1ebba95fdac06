"""Scratch measure for issue 12 item 4: what the compact pass would cost the writes.

Not the package's design: the schema of ``compact_pass_50k.py`` added by hand to
PgMemory's own table, to measure what it costs ``put_batch`` before building it. Each round
empties the table, loads ``--rows`` rows of ``bench/pg_store.py``'s layout (384-d seeded
Gaussian vectors, 20 tenants) through ``PgMemory.put_batch`` as the application role
(row-level security forced), then puts the same rows again (every row an update, same
text), then loads them with a raw binary ``COPY`` into a twin table (``LIKE ... INCLUDING
ALL``: generated columns and indexes, no trigger, no row-level security), as
``bench/pg_store.py`` does. Rounds alternate between:

* ``plain``: the table as migrated;
* ``codes``, ``postings``: one of the two parts the compact pass reads instead of the heap;
* ``compact``: both;
* ``gin``: a GIN index over ``(tenant, namespace, search_vector)`` (the trusted
  ``btree_gin`` extension), which the application role can only read through a
  ``SECURITY DEFINER`` function (docs/pg_store.md, "Lexical candidates from an index");
* ``codes+gin``: the codes and that index, no postings:

  - ``codes``: a stored generated ``bit varying`` column, the unit vector thermometer
    coded in two bits a dimension (three planes: above ``-t``, above 0, above ``t``, ``t =
    0.6745 / sqrt(d)``), from pgvector's ``binary_quantize``; and a covering btree
    ``(tenant, namespace) INCLUDE (search_length, id, expires_at, embedding_source,
    codes)``;
  - ``posting (tenant, namespace, lexeme, item_id, tf)``, a row per lexeme of each item's
    ``search_vector``, with row-level security, kept by three statement-level triggers
    with transition tables (insert; update when the tsvector changed; delete).

``--texts bench`` writes two lexemes a row, as ``bench/pg_store.py``'s ``"doc <i>"``;
``--texts locomo`` the LoCoMo dev turns (``bench/recall.py`` reads them from
``../shared/data/locomo-dev``), repeated: a dialogue turn's length of words.

    .venv/bin/python bench/recall_prototypes/compact_writes.py [--rows 100000]
        [--texts bench|locomo] [--rounds 2] [--modes plain gin ...]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from embedded_django import embedded_workdir, setup_django
from pg_store import DIM, Layout, SeededEmbedding, _item_table, load_copy
from recall import load_conversations

TENANTS = 20
MODES = ("plain", "codes", "postings", "compact", "gin", "codes+gin")

CODES = """
CREATE FUNCTION bench_codes(v vector) RETURNS bit varying
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT binary_quantize(u - t)::bit varying || binary_quantize(u)::bit varying
       || binary_quantize(u + t)::bit varying
FROM (SELECT l2_normalize(v) AS u,
             array_fill(0.6745 / sqrt(vector_dims(v)), ARRAY[vector_dims(v)])::vector AS t) s
$$"""

# The statements run through EXECUTE: planned at each run. A cached plan is made at the
# function's first run in the connection, which INSERT ... ON CONFLICT DO UPDATE gives the
# update trigger too (both statement triggers fire), on the first batch, when the postings
# table is still empty: a re-put of 100k rows in the same connection then took 301 s
# against 15 s in a new one.
POSTING_TRIGGERS = """
CREATE FUNCTION bench_posting_insert() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  EXECUTE 'INSERT INTO bench_posting
  SELECT n.tenant, n.namespace, l.lexeme, n.id, coalesce(array_length(l.positions, 1), 1)
  FROM new_rows n, unnest(n.search_vector) l';
  RETURN NULL;
END $$;
CREATE FUNCTION bench_posting_update() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  EXECUTE 'DELETE FROM bench_posting p USING old_rows o JOIN new_rows n ON n.id = o.id
  WHERE p.item_id = o.id AND o.search_vector IS DISTINCT FROM n.search_vector';
  EXECUTE 'INSERT INTO bench_posting
  SELECT n.tenant, n.namespace, l.lexeme, n.id, coalesce(array_length(l.positions, 1), 1)
  FROM old_rows o JOIN new_rows n ON n.id = o.id, unnest(n.search_vector) l
  WHERE o.search_vector IS DISTINCT FROM n.search_vector';
  RETURN NULL;
END $$;
CREATE FUNCTION bench_posting_delete() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  EXECUTE 'DELETE FROM bench_posting p USING old_rows o WHERE p.item_id = o.id';
  RETURN NULL;
END $$
"""


def codes_schema(table: str) -> list[str]:
    return [
        CODES,
        f"ALTER TABLE {table} ADD COLUMN codes bit varying "
        "GENERATED ALWAYS AS (bench_codes(embedding)) STORED",
        f"CREATE INDEX bench_pass ON {table} (tenant, namespace) "
        "INCLUDE (search_length, id, expires_at, embedding_source, codes)",
    ]


def posting_schema(table: str, app_role: str, policy: str) -> list[str]:
    return [
        "CREATE TABLE bench_posting (tenant text NOT NULL, namespace text NOT NULL, "
        "lexeme text NOT NULL, item_id bigint NOT NULL, tf int NOT NULL, "
        "PRIMARY KEY (tenant, namespace, lexeme, item_id))",
        "CREATE INDEX bench_posting_item ON bench_posting (item_id)",
        "ALTER TABLE bench_posting ENABLE ROW LEVEL SECURITY",
        "ALTER TABLE bench_posting FORCE ROW LEVEL SECURITY",
        f"CREATE POLICY tenant ON bench_posting USING ({policy}) WITH CHECK ({policy})",
        f"GRANT SELECT, INSERT, DELETE ON bench_posting TO {app_role}",
        POSTING_TRIGGERS,
        f"CREATE TRIGGER bench_posting_insert AFTER INSERT ON {table} "
        "REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT "
        "EXECUTE FUNCTION bench_posting_insert()",
        f"CREATE TRIGGER bench_posting_update AFTER UPDATE ON {table} "
        "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT "
        "EXECUTE FUNCTION bench_posting_update()",
        f"CREATE TRIGGER bench_posting_delete AFTER DELETE ON {table} "
        "REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT "
        "EXECUTE FUNCTION bench_posting_delete()",
    ]


def gin_schema(table: str) -> list[str]:
    return [
        "CREATE EXTENSION IF NOT EXISTS btree_gin",
        f"CREATE INDEX bench_lexical ON {table} USING gin (tenant, namespace, search_vector)",
    ]


def plain_schema(table: str) -> list[str]:
    return [
        "DROP INDEX IF EXISTS bench_lexical",
        f"DROP TRIGGER IF EXISTS bench_posting_insert ON {table}",
        f"DROP TRIGGER IF EXISTS bench_posting_update ON {table}",
        f"DROP TRIGGER IF EXISTS bench_posting_delete ON {table}",
        "DROP TABLE IF EXISTS bench_posting",
        "DROP FUNCTION IF EXISTS bench_posting_insert, bench_posting_update, bench_posting_delete",
        "DROP INDEX IF EXISTS bench_pass",
        f"ALTER TABLE {table} DROP COLUMN IF EXISTS codes",
        "DROP FUNCTION IF EXISTS bench_codes",
    ]


def locomo_texts() -> list[str]:
    return [
        value["text"] for conversation in load_conversations() for _, value in conversation.items
    ]


class FirstWordEmbedding(SeededEmbedding):
    """Row i's text is ``"<i> <words>"``: its vector is row i of the seeded matrix."""

    def __init__(self, vectors: np.ndarray) -> None:
        super().__init__(vectors, vectors)

    def vector(self, text: str) -> np.ndarray:
        return self.vectors[int(text.split(" ", 1)[0]) % len(self.vectors)]


def items(layout: Layout, texts: list[str] | None) -> Iterator[tuple[Any, ...]]:
    source = itertools.cycle(texts) if texts else None
    for tenant, label, first, count in layout.spans:
        namespace = layout.namespace(tenant, label)
        for i in range(first, first + count):
            words = next(source) if source else "doc"
            yield namespace, f"k{i}", {"text": f"{i} {words}"}, None


async def put_all(store: Any, rows: list[tuple[Any, ...]], chunk: int) -> float:
    started = time.perf_counter()
    for at in range(0, len(rows), chunk):
        await store.put_batch(rows[at : at + chunk])
    return time.perf_counter() - started


async def run(args: argparse.Namespace, urls: Any) -> dict[str, list[dict[str, float]]]:
    import psycopg

    from tulip_memory.postgres.rls import policy_expression
    from tulip_memory.store import PgMemory

    layout = Layout.build(args.rows, TENANTS)
    vectors = np.random.default_rng(42).standard_normal((layout.rows, DIM), dtype=np.float32)
    store = PgMemory(embedder=FirstWordEmbedding(vectors))
    rows = list(items(layout, locomo_texts() if args.texts == "locomo" else None))
    table = _item_table()
    app_role = psycopg.conninfo.conninfo_to_dict(urls.app)["user"]
    results: dict[str, list[dict[str, float]]] = {mode: [] for mode in args.modes}
    for _ in range(args.rounds):
        for mode in args.modes:
            with psycopg.connect(urls.admin, autocommit=True) as conn:
                for statement in plain_schema(table):
                    conn.execute(statement)
                conn.execute(f"TRUNCATE {table}")
                if mode in ("codes", "compact", "codes+gin"):
                    for statement in codes_schema(table):
                        conn.execute(statement)
                if mode in ("postings", "compact"):
                    for statement in posting_schema(table, app_role, policy_expression()):
                        conn.execute(statement)
                if mode in ("gin", "codes+gin"):
                    for statement in gin_schema(table):
                        conn.execute(statement)
                conn.execute(f"VACUUM ANALYZE {table}")
            put = await put_all(store, rows, args.chunk)
            reput = await put_all(store, rows, args.chunk)
            copy = load_copy(urls.admin, rows, vectors)
            figures = {
                "put_batch": len(rows) / put,
                "re-put": len(rows) / reput,
                "copy": len(rows) / copy,
            }
            if mode in ("postings", "compact"):
                with psycopg.connect(urls.admin) as conn:
                    postings = conn.execute("SELECT count(*) FROM bench_posting").fetchone()[0]
                figures["postings per row"] = postings / len(rows)
            results[mode].append(figures)
            print(mode, {k: round(v, 1) for k, v in figures.items()}, flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--chunk", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--texts", choices=("bench", "locomo"), default="bench")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    args = parser.parse_args()
    with embedded_workdir("tulip-bench-compact-writes-") as tmp:
        urls = setup_django(Path(tmp), VECTOR_DIMENSIONS=DIM)
        results = asyncio.run(run(args, urls))
    print(f"\n{args.rows:,} rows, texts {args.texts}, rows/s (median of {args.rounds} rounds)")
    print(f"{'schema':>8} {'put_batch':>10} {'re-put':>10} {'COPY':>10} {'COPY/put':>9}")
    for mode, rounds in results.items():
        put = statistics.median(r["put_batch"] for r in rounds)
        reput = statistics.median(r["re-put"] for r in rounds)
        copy = statistics.median(r["copy"] for r in rounds)
        print(f"{mode:>8} {put:>10,.0f} {reput:>10,.0f} {copy:>10,.0f} {copy / put:>8.2f}x")


if __name__ == "__main__":
    main()
