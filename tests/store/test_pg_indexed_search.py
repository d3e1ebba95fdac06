"""PgMemory's text search from the indexes (tulip_memory.search_index) against the statement
that reads every row of a namespace: the same results whenever a namespace has at most
``pass_pool`` rows; over it, the vector pass keeps the exact top 10."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from tulip_memory.models.store import MemoryItem, UpsertRow, query_planes
from tulip_memory.tenancy import tenant_atomic

DIM = 1024  # the test settings' VECTOR_DIMENSIONS
SOURCE = "embedder:test"
WORDS = [f"word{i}" for i in range(40)]
NOW = datetime(2026, 12, 5, tzinfo=UTC)


def _corpus(rng: np.random.Generator, namespace: str, count: int) -> list[UpsertRow]:
    """``count`` rows of up to four words (a few only stop words, or none), most with a
    vector of ``SOURCE``, some of another encoder or without one, some expired."""
    rows = []
    for i in range(count):
        words = list(rng.choice(WORDS, size=int(rng.integers(0, 5))))
        if i % 13 == 0:
            words = ["the", "of"]
        kind = i % 10
        vector = rng.standard_normal(DIM).astype(np.float32) if kind < 9 else None
        source = "hrr" if kind == 8 else (SOURCE if vector is not None else "")
        expires = None if kind % 4 else NOW + timedelta(days=-1 if i % 8 == 0 else 1)
        text = " ".join(words)
        rows.append(
            UpsertRow(
                "acme",
                namespace,
                f"k{i:04d}",
                json.dumps({"text": text}),
                "{}",
                f" {text} ",
                vector,
                source,
                expires,
            )
        )
    return rows


def _search(paths, terms, vector, limit, **options):
    with tenant_atomic("acme"):
        return MemoryItem.objects.search_paths(
            "acme",
            paths,
            limit,
            vector=vector,
            source=SOURCE,
            terms=terms,
            config="english",
            weight=0.5,
            bm25=(1.2, 0.75),
            now=NOW,
            **options,
        )


def _same(found, expected) -> None:
    assert [(r.position, r.key, r.lexical) for r in found] == [
        (r.position, r.key, r.lexical) for r in expected
    ]
    assert [r.rank for r in found] == pytest.approx([r.rank for r in expected], abs=1e-9)


@pytest.mark.django_db
def test_the_indexes_rank_as_the_statement_reading_every_row():
    rng = np.random.default_rng(7)
    with tenant_atomic("acme"):
        MemoryItem.objects.upsert(_corpus(rng, "acme/a", 300), NOW)
        MemoryItem.objects.upsert(_corpus(rng, "acme/b", 90), NOW)
    paths = ["acme/a", "acme/b", "acme/empty"]
    with tenant_atomic("acme"):
        items = MemoryItem.objects.live(NOW)
        live = {path: items.filter(namespace=path).count() for path in paths}
    queries = [
        ["word3"],
        ["word3", "word17", "word30"],
        ["what", "is", "the", "word5", "of", "it"],
        ["the", "of"],  # stop words only: no lexeme
        ["zzzunknown"],  # no word found
    ]
    for terms in queries:
        vector = rng.standard_normal(DIM).astype(np.float32)
        for limit in (10, 60):
            for given in (vector, None):
                expected = _search(paths, terms, given, limit, use_indexes=False, count_rows=True)
                found = _search(paths, terms, given, limit)
                assert expected or given is None, terms
                _same(found, expected)
                # Chosen path by path: acme/a from the indexes, acme/b from its rows.
                mixed = _search(
                    paths, terms, given, limit, use_indexes=[True, False, True], count_rows=True
                )
                _same(mixed, expected)
                # A namespace read says how many live rows it has; from the indexes, no
                # count (it would read them).
                assert [r.namespace_rows for r in expected] == [
                    live[paths[r.position]] for r in expected
                ]
                assert {r.namespace_rows for r in found} <= {None}
                uncounted = _search(paths, terms, given, limit, use_indexes=False)
                _same(uncounted, expected)
                assert {r.namespace_rows for r in uncounted} <= {None}
                assert [r.namespace_rows for r in mixed] == [
                    live[paths[r.position]] if r.position == 1 else None for r in mixed
                ]
    # A pass pool smaller than the namespace still ranks the rows it keeps exactly.
    narrow = _search(["acme/b"], ["zzzunknown"], vector, 5, pass_pool=60)
    _same(narrow, _search(["acme/b"], ["zzzunknown"], vector, 5, use_indexes=False))


@pytest.mark.django_db
def test_the_vector_pass_keeps_the_exact_top_10_over_its_pool():
    rng = np.random.default_rng(11)
    vectors = rng.standard_normal((3000, DIM)).astype(np.float32)
    rows = [
        UpsertRow("acme", "acme/big", f"k{i:04d}", "1", "{}", " note ", vector, SOURCE)
        for i, vector in enumerate(vectors)
    ]
    with tenant_atomic("acme"):
        MemoryItem.objects.upsert(rows, NOW)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    recalls = []
    for _ in range(20):
        query = rng.standard_normal(DIM).astype(np.float32)
        exact = {f"k{i:04d}" for i in np.argsort(-(unit @ query))[:10]}
        found = _search(["acme/big"], ["zzzunknown"], query, 10, pass_pool=300)
        recalls.append(len(exact & {row.key for row in found}) / 10)
    assert np.mean(recalls) >= 0.99, recalls


def test_the_query_planes_are_its_two_bit_levels_repeated_over_the_row_planes():
    vector = np.array([2.0, -2.0, 0.1, -0.1, 0.0, 1.0, -1.0, 0.3])
    low, high = query_planes(vector)
    assert len(low) == len(high) == 3 * len(vector)
    assert low == low[:8] * 3 and high == high[:8] * 3
    # Levels 0-3 (bit0 + 2 * bit1) by the thresholds -0.9816 sigma, 0, 0.9816 sigma.
    unit = vector / np.linalg.norm(vector)
    step = 0.9816 * unit.std()
    levels = [int(b) + 2 * int(h) for b, h in zip(low[:8], high[:8], strict=True)]
    assert levels == [int(np.digitize(x, [-step, 0.0, step])) for x in unit]
    assert levels[:5] == [3, 0, 2, 1, 2]
