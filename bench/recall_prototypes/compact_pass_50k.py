"""Scratch measure for issue 12 item 4: a compact first pass for the 50k-row namespace.

Not the package's design: a raw table built by hand to measure a design before building
it. The rows are ``bench/pg_store.py``'s (``--rows 100000 --tenants 20``: the same seeded
384-d Gaussian vectors, tenant ``t0000``'s namespaces of 100 to 50,000 rows, the rest
spread over 19 tenants), in a table with row-level security forced, read as the
application role of ``tulip_memory.testing.postgres``. Each row also carries:

* ``codes bit(1152)``: its unit vector quantised to two bits a dimension, thermometer
  coded (three planes: value above ``-t``, above 0, above ``t``, ``t = 0.6745 / sqrt(384)``,
  the quartiles of a unit Gaussian vector's coordinates) and ``codes_count``, their number
  of set bits;
* a posting per lexeme of its text (``tenant, namespace, lexeme, item, tf``; a btree
  lookup by text equality, which row-level security lets the application role use, unlike
  ``@@`` on a GIN index).

A covering btree ``(tenant, namespace) INCLUDE (search_length, codes_count, id, codes)``
gives an index-only pass over the namespace. The query is quantised to ``--query-bits``
bits a dimension (three or four: evenly spaced levels; two: a Gaussian's Lloyd-Max
levels; ``u2``: two bits at uniform steps of one standard deviation, against the codes
stored three times over, so that the rank is one Hamming distance a row); its inner
product with a row's levels is computed from Hamming distances (one ``<~>`` per query bit
plane: ``|Q and R| = (|Q| + |R| - hamming(Q, R)) / 2``).
The pass keeps the best ``--pool`` rows, which are re-ranked by their exact cosine
distance.

Printed, for the 50k-row and 10k-row namespaces (``--queries`` queries each), p50 / p95
and recall@10 against the exact top 10 (numpy):

* ``recall of the pool`` (numpy, no database) for 1- and 2-bit rows and 2-, 3- and
  4-bit queries, and ternary queries (``t<threshold>``) of the 2-bit rows; with
  ``--locomo``, only that, then again for WordLlama's vectors of the LoCoMo dev turns
  (each question asked of its conversation);
* the parts of the pass (visiting the index entries, one Hamming distance, all planes);
* the vector part (pass + exact re-rank) and the whole hybrid statement (postings BM25
  fused with it) against the exact distance of every row; the queries share no word with
  the rows, as in ``bench/pg_store.py``, except in "one query word found", whose query
  names a row of the namespace (so BM25 reads the namespace's length statistics);
* the same hybrid statement with its lexical part from a GIN index over ``(tenant,
  namespace, search_vector)`` (``btree_gin``), read through a ``SECURITY DEFINER``
  function (``LEXICAL`` below) instead of the postings;
* pgvector's HNSW index with iterative scans (``relaxed_order``), as the application role,
  in the namespace and over the whole table (against the whole table's exact top 10). Each
  of these statements is planned with its own parameters (``prepare=False``): a prepared
  statement's generic plan does not know the namespace, and after a few runs PostgreSQL
  switched to the btree and an exact sort, which reported the exact scan's recall and time
  under the index's name.

    .venv/bin/python bench/recall_prototypes/compact_pass_50k.py [--pool 1000]
        [--query-bits 2|3|4|u2] [--queries 50] [--workers 0] [--locomo]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from embedded_django import embedded_workdir
from pg_store import DIM, FOCUS_TENANT, Layout, exact_top10, percentile

ROWS, TENANTS = 100_000, 20
# The one-distance code (``--query-bits u2``): a uniform two-bit query against the row
# codes stored three times over, ranked by one Hamming distance a row.
ONE_DISTANCE = "u2"


def copies(bits: int | str) -> int:
    """How many times a row's codes are stored for this query code."""
    return 3 if bits == ONE_DISTANCE else 1


def plane(bits: int | str) -> str:
    return f"bit({3 * DIM * copies(bits)})"


def plain_codes(bits: int | str) -> str:
    """Codes stored three times over make index entries of over 512 bytes, which
    PostgreSQL compresses unless the column's storage is PLAIN."""
    return "ALTER TABLE item ALTER COLUMN codes SET STORAGE PLAIN;" if copies(bits) > 1 else ""


def schema(bits: int | str) -> str:
    return f"""
CREATE TABLE item (
    id bigint PRIMARY KEY, tenant text NOT NULL, namespace text NOT NULL, key text NOT NULL,
    value jsonb NOT NULL, search_text text NOT NULL,
    search_vector tsvector GENERATED ALWAYS AS (to_tsvector('english', search_text)) STORED,
    search_length int NOT NULL, embedding vector({DIM}) NOT NULL,
    codes {plane(bits)} NOT NULL, codes_count int NOT NULL);
{plain_codes(bits)}
CREATE TABLE posting (
    tenant text NOT NULL, namespace text NOT NULL, lexeme text NOT NULL,
    item_id bigint NOT NULL, tf int NOT NULL,
    PRIMARY KEY (tenant, namespace, lexeme, item_id))
"""


TENANT = "(SELECT NULLIF(current_setting('tulip.tenant', true), ''))"
AFTER_LOAD = [
    "INSERT INTO posting SELECT tenant, namespace, l.lexeme, id, "
    "coalesce(array_length(l.positions, 1), 1) FROM item, unnest(search_vector) l",
    "CREATE INDEX item_key ON item (tenant, namespace, key)",
    "CREATE INDEX item_pass ON item (tenant, namespace) "
    "INCLUDE (search_length, codes_count, id, codes)",
    "SET maintenance_work_mem = '1GB'",
    "CREATE INDEX item_hnsw ON item USING hnsw (embedding vector_cosine_ops)",
    *(
        statement
        for table in ("item", "posting")
        for statement in (
            f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY",
            f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY",
            f"CREATE POLICY tenant ON {table} USING (tenant = {TENANT})",
            f"GRANT SELECT ON {table} TO tulip_app",
        )
    ),
]

NAMESPACE = "tenant = %(t)s AND namespace = %(ns)s"


def score(planes: int | str) -> str:
    """The rank of a row's levels against the query's planes (higher is nearer)."""
    if planes == ONE_DISTANCE:
        return f"-(codes <~> %(q0)s::{plane(planes)})"
    distances = " + ".join(
        f"%(c{k})s * (codes <~> %(q{k})s::{plane(planes)})" for k in range(int(planes))
    )
    return f"codes_count * %(w)s - ({distances})"


def pool(planes: int | str) -> str:
    return f"SELECT id FROM item WHERE {NAMESPACE} ORDER BY {score(planes)} DESC LIMIT %(pool)s"


def vector_part(planes: int | str) -> str:
    return (
        f"SELECT key FROM item WHERE id IN ({pool(planes)}) ORDER BY embedding <=> %(v)s LIMIT 10"
    )


def hybrid(planes: int | str) -> str:
    """Postings BM25 (k1 1.2, b 0.75) and the vector part, fused as PgMemory fuses them."""
    return f"""
WITH vec AS MATERIALIZED (
    SELECT id, embedding <=> %(v)s AS distance FROM item WHERE id IN ({pool(planes)})
    ORDER BY distance LIMIT 50),
df AS MATERIALIZED (
    SELECT lexeme, count(*) AS df FROM posting
    WHERE {NAMESPACE} AND lexeme = ANY(%(lexemes)s) GROUP BY lexeme),
stats AS MATERIALIZED (
    SELECT count(*) AS n, avg(search_length) AS average FROM item
    WHERE {NAMESPACE} AND EXISTS (SELECT FROM df)),
lex AS MATERIALIZED (
    SELECT p.item_id AS id, sum(ln(1 + (s.n - df.df + 0.5) / (df.df + 0.5)) * p.tf * 2.2
        / (p.tf + 1.2 * (0.25 + 0.75 * i.search_length / s.average))) AS bm25
    FROM posting p JOIN df USING (lexeme) JOIN item i ON i.id = p.item_id, stats s
    WHERE p.tenant = %(t)s AND p.namespace = %(ns)s AND p.lexeme = ANY(%(lexemes)s)
    GROUP BY p.item_id ORDER BY bm25 DESC LIMIT 50),
fused AS (
    SELECT id, coalesce(lex.bm25 / nullif(max(lex.bm25) OVER (), 0), 0)
        + 0.5 * (1 - coalesce(vec.distance, 1)) AS fused
    FROM lex FULL JOIN vec USING (id))
SELECT i.key FROM fused JOIN item i USING (id) ORDER BY fused DESC, i.key LIMIT 10"""


# Lexical candidates from a GIN index for the application role: under row-level security
# the planner uses an index only for a leakproof operator, and ``@@`` is not one; inside a
# SECURITY DEFINER function owned by a NOLOGIN role whose own policy is ``USING (true)``,
# no security qual is left, so the GIN index is used. The function applies the tenant
# itself, read from the very setting the tenant policy reads.
LEXICAL_ROLE = "tulip_lexical"
LEXICAL = [
    "CREATE EXTENSION IF NOT EXISTS btree_gin",
    "CREATE INDEX item_lexical ON item USING gin (tenant, namespace, search_vector)",
    f"DO $$ BEGIN CREATE ROLE {LEXICAL_ROLE} NOLOGIN; "
    "EXCEPTION WHEN duplicate_object THEN NULL; END $$",
    f"GRANT USAGE, CREATE ON SCHEMA public TO {LEXICAL_ROLE}",
    f"GRANT SELECT ON item TO {LEXICAL_ROLE}",
    f"CREATE POLICY lexical_reader ON item FOR SELECT TO {LEXICAL_ROLE} USING (true)",
    f"""CREATE FUNCTION lexical_bm25(ns text, q tsquery, lexemes text[], pool int)
RETURNS TABLE (id bigint, bm25 float8)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public AS $$
WITH hits AS MATERIALIZED (
    SELECT h.id, h.search_length, (h.u).lexeme AS lexeme,
        array_length((h.u).positions, 1) AS tf
    FROM (SELECT i.id, i.search_length,
            unnest(ts_filter(setweight(i.search_vector, 'A', lexemes), '{{a}}')) AS u
        FROM item i WHERE i.tenant = {TENANT} AND i.namespace = ns
        AND i.search_vector @@ q) h),
df AS (SELECT lexeme, count(*)::float8 AS df FROM hits GROUP BY lexeme),
stats AS MATERIALIZED (
    SELECT count(*)::float8 AS n, avg(i.search_length)::float8 AS average FROM item i
    WHERE i.tenant = {TENANT} AND i.namespace = ns AND EXISTS (SELECT FROM hits))
SELECT h.id, sum(ln(1 + (s.n - df.df + 0.5) / (df.df + 0.5)) * h.tf * 2.2
    / (h.tf + 1.2 * (0.25 + 0.75 * h.search_length / s.average)))
FROM hits h JOIN df USING (lexeme) CROSS JOIN stats s
GROUP BY h.id ORDER BY 2 DESC LIMIT pool
$$""",
    f"ALTER FUNCTION lexical_bm25(text, tsquery, text[], int) OWNER TO {LEXICAL_ROLE}",
    "REVOKE ALL ON FUNCTION lexical_bm25(text, tsquery, text[], int) FROM PUBLIC",
    "GRANT EXECUTE ON FUNCTION lexical_bm25(text, tsquery, text[], int) TO tulip_app",
]


def hybrid_gin(planes: int | str) -> str:
    """:func:`hybrid` with the lexical part from the GIN index, through ``lexical_bm25``."""
    return f"""
WITH vec AS MATERIALIZED (
    SELECT id, embedding <=> %(v)s AS distance FROM item WHERE id IN ({pool(planes)})
    ORDER BY distance LIMIT 50),
lex AS MATERIALIZED (
    SELECT id, bm25 FROM lexical_bm25(%(ns)s, %(tsq)s::tsquery, %(lexemes)s, 50)),
fused AS (
    SELECT id, coalesce(lex.bm25 / nullif(max(lex.bm25) OVER (), 0), 0)
        + 0.5 * (1 - coalesce(vec.distance, 1)) AS fused
    FROM lex FULL JOIN vec USING (id))
SELECT i.key FROM fused JOIN item i USING (id) ORDER BY fused DESC, i.key LIMIT 10"""


def unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=-1, keepdims=True)


def levels(rows: np.ndarray) -> np.ndarray:
    """Two bits a dimension, thermometer coded: (rows, 3 * d) booleans.

    The thresholds are the quartiles of a d-dimensional unit Gaussian vector's coordinates.
    """
    u = unit(rows)
    threshold = 0.6745 / np.sqrt(rows.shape[1])
    return np.concatenate([u > -threshold, u > 0, u > threshold], axis=1)


# Lloyd-Max levels of a Gaussian coordinate in four steps (in standard deviations), its
# first threshold, and the levels as offset + w0 * bit0 + w1 * bit1.
LLOYD_MAX = (-1.510, -0.4528, 0.4528, 1.510)
LLOYD_MAX_THRESHOLD = 0.9816


def query_code(query: np.ndarray, bits: int) -> tuple[list[np.ndarray], list[float], float]:
    """The unit query as ``offset + sum_k weights[k] * planes[k]`` (planes of 0/1 a dimension).

    Three or four bits: evenly spaced levels between the query's extremes. Two bits: the
    Lloyd-Max levels of a Gaussian (evenly spaced, two bits keep too few neighbours).
    """
    q = unit(query.astype(np.float64))
    if bits == 2:
        sigma = q.std()
        index = np.digitize(q, [-LLOYD_MAX_THRESHOLD * sigma, 0, LLOYD_MAX_THRESHOLD * sigma])
        low = LLOYD_MAX[0] * sigma
        weights = [(LLOYD_MAX[1] - LLOYD_MAX[0]) * sigma, (LLOYD_MAX[2] - LLOYD_MAX[0]) * sigma]
    else:
        low, step = q.min(), (q.max() - q.min()) / ((1 << bits) - 1)
        index = np.round((q - low) / step).astype(int)
        weights = [step * (1 << k) for k in range(bits)]
    planes = [(index >> k) & 1 for k in range(bits)]
    return planes, weights, low


# Ternary queries (-1, 0, 1 at these thresholds, in the query's standard deviations):
# against codes stored twice they would rank by ONE Hamming distance a row.
TERNARY = ("t0.4", "t0.5", "t0.6", "t0.7", "t0.8")
# The uniform two-bit query's step, in the query's standard deviations (0.9-1.1 keep the
# same pool recall as the Lloyd-Max levels on bench/pg_store.py's vectors).
UNIFORM_STEP = 1.0


def uniform_level(query: np.ndarray) -> np.ndarray:
    """0..3 a coordinate: thresholds at -step, 0 and step."""
    q = unit(query.astype(np.float64))
    return np.clip(np.floor(q / (UNIFORM_STEP * q.std())) + 2, 0, 3).astype(int)


def query_value(query: np.ndarray, bits: int | str) -> np.ndarray:
    """The query's quantised coordinates: ``query_code``'s, ternary (``"t<threshold>"``)
    or the one-distance code's (``"u2"``)."""
    if bits == ONE_DISTANCE:
        return uniform_level(query) - 1.5
    if isinstance(bits, str):
        q = unit(query.astype(np.float64))
        threshold = float(bits[1:]) * q.std()
        return np.where(q > threshold, 1.0, np.where(q < -threshold, -1.0, 0.0))
    planes, weights, low = query_code(query, bits)
    return low + sum(w * p for w, p in zip(weights, planes, strict=True))


def bit_string(bits: np.ndarray) -> str:
    return "".join("1" if b else "0" for b in bits)


def query_arguments(query: np.ndarray, bits: int | str) -> dict[str, Any]:
    """``%(q<k>)s`` planes (repeated over the three row planes), ``%(c<k>)s`` and ``%(w)s``.

    rank = sum_i v_i * level_i with v = offset + sum_k w_k Q_k, and
    |Q_k and R| = (|Q_k| + |R| - hamming(Q_k, R)) / 2, so up to a positive factor and a
    per-query constant rank = (2 * offset + sum_k w_k) |R| - sum_k w_k hamming(Q_k, R).

    The one-distance code: levels -1.5, -0.5, 0.5, 1.5 steps (no offset term) as
    ``bit0 + 2 * bit1``, so rank = -(hamming(Q0, R) + 2 hamming(Q1, R)), which is ONE
    Hamming distance of ``Q0 Q1 Q1`` to the row's codes stored three times, ``R R R``.
    """
    if bits == ONE_DISTANCE:
        level = uniform_level(query)
        low, high = level % 2, level // 2
        code = np.concatenate([np.tile(low, 3), np.tile(high, 3), np.tile(high, 3)])
        return {"q0": bit_string(code.astype(bool))}
    planes, weights, low = query_code(query, int(bits))
    arguments: dict[str, Any] = {
        f"q{k}": bit_string(np.tile(plane, 3).astype(bool)) for k, plane in enumerate(planes)
    }
    arguments |= {f"c{k}": weight for k, weight in enumerate(weights)}
    arguments["w"] = 2 * low + sum(weights)
    return arguments


def pool_recall(
    blocks: list[np.ndarray], queries: list[np.ndarray], pools: tuple[int, ...], title: str
) -> None:
    """recall@10 of the pass's best N rows against the exact top 10; ``queries[i]`` (one
    query a row) are asked of ``blocks[i]``."""
    print(f"recall of the pool (the exact top 10 among the pass's best N), {title}")
    print(f"{'rows':>6} {'query':>6} " + " ".join(f"{n:>7,}" for n in pools))
    for name in ("1 bit", "2 bits"):
        extra = (ONE_DISTANCE, *TERNARY) if name == "2 bits" else ()
        for bits in (2, 3, 4, *extra):
            found: dict[int, list[float]] = {n: [] for n in pools}
            for block, asked in zip(blocks, queries, strict=True):
                size, width = block.shape
                if name == "1 bit":
                    codes = (block > 0).astype(float)
                else:
                    codes = levels(block).reshape(size, 3, width).sum(axis=1).astype(float)
                for query in asked:
                    exact = set(np.argsort(-(unit(block) @ unit(query)))[:10].tolist())
                    value = query_value(query, bits)
                    order = np.argsort(-(codes @ value))
                    for n in pools:
                        found[n].append(len(exact & set(order[:n].tolist())) / 10)
            row = " ".join(f"{statistics.mean(found[n]):>7.3f}" for n in pools)
            label = f"{bits:>4} b" if isinstance(bits, int) else f"{bits:>6}"
            print(f"{name:>6} {label} {row}")


def locomo_pool_recall() -> None:
    """The same for WordLlama's vectors of the LoCoMo dev turns, each question asked of
    its conversation (a few hundred turns: small pools)."""
    import asyncio

    from recall import load_conversations

    from tulip_memory.embeddings import WordLlamaEmbedding

    embedder = WordLlamaEmbedding()

    def embed(texts: list[str]) -> np.ndarray:
        return np.array(asyncio.run(embedder.embed_batch(texts)), dtype=np.float64)

    conversations = load_conversations()
    blocks = [embed([value["text"] for _key, value in c.items]) for c in conversations]
    asked = [embed([question for question, _evidence in c.questions]) for c in conversations]
    sizes = " and ".join(f"{len(block)}" for block in blocks)
    title = f"WordLlama ({blocks[0].shape[1]}-d), LoCoMo dev: {sizes} turns"
    pool_recall(blocks, asked, (20, 50, 100, 200), title)


def load(admin: Any, layout: Layout, vectors: np.ndarray, bits: int | str) -> None:
    for statement in schema(bits).split(";"):
        admin.execute(statement)
    started = time.perf_counter()
    columns = "id, tenant, namespace, key, value, search_text, search_length, embedding, codes"
    with admin.cursor() as cur, cur.copy(f"COPY item ({columns}, codes_count) FROM STDIN") as cp:
        for tenant, label, first, count in layout.spans:
            codes = levels(vectors[first : first + count])
            for i in range(count):
                row = first + i
                vector = "[" + ",".join(f"{x:.6g}" for x in vectors[row]) + "]"
                value = f'{{"text": "doc {row}", "padding": "{"x" * 200}"}}'
                cp.write_row(
                    (
                        row,
                        tenant,
                        f"memories.{label}",
                        f"k{row}",
                        value,
                        f"doc {row}",
                        2,
                        vector,
                        bit_string(codes[i]) * copies(bits),
                        int(codes[i].sum()),
                    )
                )
    for statement in AFTER_LOAD:
        admin.execute(statement)
    for statement in LEXICAL:
        admin.execute(statement)
    admin.execute("VACUUM ANALYZE item")
    admin.execute("VACUUM ANALYZE posting")
    print(f"loaded and indexed {layout.rows:,} rows in {time.perf_counter() - started:.0f} s")


def measure(
    conn: Any,
    name: str,
    sql: str,
    *,
    arguments: Callable[[int], dict[str, Any]],
    expected: Callable[[int], list[str]] | None,
    queries: int,
    prepare: bool | None = None,
) -> None:
    conn.execute(sql, arguments(0), prepare=prepare).fetchall()  # warm-up
    timings, recalls = [], []
    for j in range(1, queries + 1):
        given = arguments(j)
        started = time.perf_counter()
        rows = conn.execute(sql, given, prepare=prepare).fetchall()
        timings.append(time.perf_counter() - started)
        if expected is not None:
            recalls.append(len({r[0] for r in rows} & set(expected(j))) / 10)
    recall = f"{statistics.mean(recalls):>10.3f}" if recalls else f"{'':>10}"
    print(
        f"  {name:<44} {statistics.median(timings) * 1000:>8.2f} "
        f"{percentile(timings, 0.95) * 1000:>8.2f} {recall}"
    )


def measure_namespace(
    conn: Any, layout: Layout, vectors: np.ndarray, queries: np.ndarray, *, label: str, args: Any
) -> None:
    """Every statement over one namespace of tenant ``t0000``."""
    first, size = layout.span(label)
    bits = args.query_bits

    def arguments(j: int, found: bool = False) -> dict[str, Any]:
        # "query <j>" shares no word with the namespace's "doc <i>" texts, as in
        # bench/pg_store.py; with ``found``, the query names a row of the namespace.
        text = f"query {first + j if found else j}"
        lexemes = conn.execute(
            "SELECT tsvector_to_array(to_tsvector('english', %s))", (text,)
        ).fetchone()[0]
        return {
            "t": FOCUS_TENANT,
            "ns": f"memories.{label}",
            "v": queries[j],
            "pool": args.pool,
            "lexemes": lexemes,
            "tsq": " | ".join("'" + lexeme.replace("'", "''") + "'" for lexeme in lexemes),
            **query_arguments(queries[j], bits),
        }

    def expected(j: int) -> list[str]:
        return exact_top10(vectors, first, size, queries[j])

    def whole_table(j: int) -> list[str]:
        return exact_top10(vectors, 0, len(vectors), queries[j])

    def run(
        name: str,
        sql: str,
        *,
        checked: bool = True,
        found: bool = False,
        expect: Callable[[int], list[str]] = expected,
        prepare: bool | None = None,
    ) -> None:
        measure(
            conn,
            name,
            sql,
            arguments=functools.partial(arguments, found=found),
            expected=expect if checked else None,
            queries=args.queries,
            prepare=prepare,
        )

    code = "one-distance query (u2)" if bits == ONE_DISTANCE else f"{bits}-bit query"
    print(f"\n{label} ({size:,} rows), pool {args.pool:,}, {code}")
    print(f"  {'statement':<44} {'p50 ms':>8} {'p95 ms':>8} {'recall@10':>10}")
    run(
        "visit the index entries (count)",
        f"SELECT count(*) FROM item WHERE {NAMESPACE}",
        checked=False,
    )
    one = f"SELECT id FROM item WHERE {NAMESPACE} ORDER BY codes <~> %(q0)s::{plane(bits)}"
    run(
        "one Hamming distance, best N",
        f"SELECT count(*) FROM ({one} LIMIT %(pool)s) p",
        checked=False,
    )
    if bits != ONE_DISTANCE:
        passed = f"SELECT count(*) FROM ({pool(bits)}) p"
        run(f"the pass ({bits} planes), best N", passed, checked=False)
    # "+ 0": an expression no index orders by, so every distance is computed.
    nearest = f"SELECT key FROM item WHERE {NAMESPACE} ORDER BY "
    run("exact vector top 10 (every distance)", nearest + "(embedding <=> %(v)s) + 0 LIMIT 10")
    run("pass + exact re-rank", vector_part(bits))
    run("hybrid: postings BM25 + pass + re-rank", hybrid(bits))
    # A word of the query in the namespace: BM25 needs the namespace's length statistics.
    run("hybrid, one query word found", hybrid(bits), checked=False, found=True)
    run("hybrid: GIN BM25 (definer) + pass + re-rank", hybrid_gin(bits))
    run("  the same, one query word found", hybrid_gin(bits), checked=False, found=True)
    # Relaxed order: the index's candidates come roughly sorted, so 50 are sorted again
    # ("+ 0": without it the planner takes them as sorted already and sorts nothing).
    hnsw = (
        f"WITH n AS MATERIALIZED (SELECT key, embedding <=> %(v)s AS d FROM item "
        f"WHERE {NAMESPACE} ORDER BY embedding <=> %(v)s LIMIT 50) "
        "SELECT key FROM n ORDER BY d + 0 LIMIT 10"
    )
    anywhere = "SELECT key FROM item ORDER BY embedding <=> %(v)s LIMIT 10"
    for setting in ("hnsw.iterative_scan = relaxed_order", "enable_seqscan = off"):
        conn.execute(f"SET {setting}")
    conn.execute("SET enable_bitmapscan = off")
    for ef in (40, 100, 400):
        conn.execute(f"SET hnsw.ef_search = {ef}")
        plan = " ".join(r[0] for r in conn.execute("EXPLAIN " + hnsw, arguments(0)))
        via = "HNSW" if "item_hnsw" in plan else "btree: planner's choice"
        run(f"HNSW iterative, ef_search {ef} ({via})", hnsw, prepare=False)
        run("  the same, whole table, no filter", anywhere, expect=whole_table, prepare=False)
    conn.execute("RESET ALL")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool", type=int, default=1_000)
    parser.add_argument(
        "--query-bits",
        type=lambda v: v if v == ONE_DISTANCE else int(v),
        choices=(2, 3, 4, ONE_DISTANCE),
        default=3,
        help="u2: a uniform two-bit query ranked by one Hamming distance a row",
    )
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument(
        "--locomo",
        action="store_true",
        help="only the recall of the pool, also for WordLlama's vectors of LoCoMo's dev turns",
    )
    parser.add_argument(
        "--workers", type=int, default=0, help="max_parallel_workers_per_gather (default 0)"
    )
    args = parser.parse_args()

    import psycopg
    from pgvector.psycopg import register_vector

    from tulip_memory.testing.postgres import bootstrap_database, start_embedded

    layout = Layout.build(ROWS, TENANTS)
    rng = np.random.default_rng(42)
    vectors = rng.standard_normal((layout.rows, DIM), dtype=np.float32)
    queries = rng.standard_normal((2000, DIM), dtype=np.float32)
    first, size = layout.span("ns50k")
    block = vectors[first : first + size].astype(np.float64)
    asked = queries[1 : args.queries + 1].astype(np.float64)
    pool_recall([block], [asked], (300, 500, 1_000, 2_000), f"{size:,} rows")
    if args.locomo:
        locomo_pool_recall()
        return

    with embedded_workdir("tulip-bench-compact-") as tmp:
        url = start_embedded(Path(tmp) / "pgdata", cleanup="delete")
        urls = bootstrap_database(url, "compact")
        with psycopg.connect(url, dbname="compact", autocommit=True) as admin:
            admin.execute("CREATE EXTENSION IF NOT EXISTS vector")
            load(admin, layout, vectors, args.query_bits)
        with psycopg.connect(urls.app, autocommit=True) as conn:
            register_vector(conn)
            for label in ("ns50k", "ns10k"):
                # measure_namespace ends with RESET ALL, which clears both.
                conn.execute("SELECT set_config('tulip.tenant', %s, false)", (FOCUS_TENANT,))
                conn.execute(f"SET max_parallel_workers_per_gather = {args.workers:d}")
                measure_namespace(conn, layout, vectors, queries, label=label, args=args)


if __name__ == "__main__":
    main()
