"""PgMemory's text search from the indexes (tulip_memory.postgres.search_index) against the
statement that reads every row of a namespace: the same results whenever a namespace has at most
``pass_pool`` rows; over it, the vector pass keeps the exact top 10."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from tests.store.pg_statements import executions, explain_analyze, search_statements
from tulip_memory.models.store import MemoryItem, UpsertRow
from tulip_memory.postgres.search_index import QUERY_LEVEL_OFFSET, QUERY_WEIGHTS, query_planes
from tulip_memory.store.pg.search import search_paths
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
        return search_paths(
            MemoryItem.objects,
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
        texts = {
            path: [
                value["text"]
                for value in items.filter(namespace=path).values_list("value", flat=True)
            ]
            for path in paths
        }
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
                # The vector only re-ranking the word matches (HRR): the same both ways,
                # and every row found matches a word.
                worded = _search(paths, terms, given, limit, vector_candidates=False)
                _same(
                    worded,
                    _search(paths, terms, given, limit, use_indexes=False, vector_candidates=False),
                )
                words = {term for term in terms if term.startswith("word")}  # not stop words
                assert all(words & set(row.value["text"].split()) for row in worded), terms
                for i, path in enumerate(paths):
                    matching = [t for t in texts[path] if words & set(t.split())]
                    found_here = [row for row in worded if row.position == i]
                    assert len(found_here) == min(limit, len(matching)), (terms, path)
                # Chosen path by path: acme/a from the indexes, acme/b from its rows.
                mixed = _search(
                    paths, terms, given, limit, use_indexes=[True, False, True], count_rows=True
                )
                _same(mixed, expected)
                # A namespace read says how many live rows it has, with a hit or not
                # (the empty one: 0); from the indexes, no count (it would read them).
                counts = {i: live[path] for i, path in enumerate(paths)}
                assert expected.namespace_rows == counts
                assert found.namespace_rows == {}
                uncounted = _search(paths, terms, given, limit, use_indexes=False)
                _same(uncounted, expected)
                assert uncounted.namespace_rows == {}
                assert mixed.namespace_rows == {1: live["acme/b"]}
                # Without a word found (HRR: no vector candidates), no hit, still counted.
                none = _search(
                    paths,
                    terms,
                    given,
                    limit,
                    use_indexes=False,
                    count_rows=True,
                    vector_candidates=False,
                )
                assert none.namespace_rows == counts
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


@pytest.mark.django_db(transaction=True)  # EXPLAIN ANALYZE on Citus: see explain_analyze
def test_the_pass_cut_sorts_fewer_rows_and_keeps_the_same_best():
    rng = np.random.default_rng(12)
    vectors = rng.standard_normal((3000, DIM)).astype(np.float32)
    rows = [
        UpsertRow("acme", path, f"k{i:04d}", "1", "{}", " note ", vector, SOURCE)
        for path, count in (("acme/big", 3000), ("acme/small", 300))
        for i, vector in enumerate(vectors[:count])
    ]
    with tenant_atomic("acme"):
        MemoryItem.objects.upsert(rows, NOW)
    paths = ["acme/big", "acme/small"]
    for _ in range(6):
        query = rng.standard_normal(DIM).astype(np.float32)
        whole = _search(paths, ["zzzunknown"], query, 10, pass_pool=100)
        assert [len([r for r in whole if r.position == i]) for i in (0, 1)] == [10, 10]
        # 3,000 rows known with a pass of 100: only the rows ranking with the best 546 of
        # the first 2,048 are sorted (~800), the best 100 among them: the same. A namespace
        # holding fewer rows than the sample is not cut, whatever its count; a count far
        # too large (the namespace shrank since) lets too few rows through, and the pass
        # runs again without the cut: the same.
        for known in ([3000, None], [None, 10**6], [10**9, 10**9]):
            _same(_search(paths, ["zzzunknown"], query, 10, pass_pool=100, known_rows=known), whole)
    with executions() as calls:
        _search(["acme/big"], ["zzzunknown"], query, 10, pass_pool=100, known_rows=[3000])
    [(sql, params)] = search_statements(calls)
    plan = explain_analyze("acme", sql, params)
    # The pass's scan of the 3,000 entries keeps those passing the cut only.
    scan = plan[plan.index("CTE cut_pass") :]
    removed = int(re.search(r"Rows Removed by Filter: (\d+)", scan)[1])
    assert 1500 <= removed <= 2900, plan
    # A limit over the sample with a count far too large: all the rows still.
    many = _search(["acme/big"], ["zzzunknown"], query, 2100, pass_pool=100)
    assert len(many) == 2100
    _same(
        _search(["acme/big"], ["zzzunknown"], query, 2100, pass_pool=100, known_rows=[10**9]), many
    )


@pytest.mark.django_db
def test_rows_tied_past_the_pools_come_newest_first_from_both_plans():
    # 200 rows of equal BM25 (more than a pool of 50), 80 of them written again later.
    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((200, DIM)).astype(np.float32)

    def row(i):
        text = f" coffee other{i} "
        return UpsertRow(
            "acme", "acme/n", f"k{i:04d}", json.dumps({"t": i}), "{}", text, vectors[i], SOURCE
        )

    with tenant_atomic("acme"):
        MemoryItem.objects.upsert([row(i) for i in range(200)], NOW)
        updated = [int(i) for i in rng.permutation(200)[:80]]
        for i in updated:
            MemoryItem.objects.upsert([row(i)], NOW)
    newest = [f"k{i:04d}" for i in reversed(updated[-10:])]
    query = rng.standard_normal(DIM).astype(np.float32)
    for vector in (None, query):
        for candidates in (True, False):
            ranked = [
                [
                    r.key
                    for r in _search(
                        ["acme/n"],
                        ["coffee"],
                        vector,
                        10,
                        use_indexes=indexes,
                        vector_candidates=candidates,
                    )
                ]
                for indexes in (False, True)
            ]
            assert ranked[0] == ranked[1], (vector is None, candidates)
            if vector is None:  # every row ties: newest-updated first
                assert ranked[0] == newest


@pytest.mark.django_db
def test_row_counts_must_name_each_path():
    with pytest.raises(ValueError, match="1 row counts for the 2 paths of the search"):
        _search(["acme/a", "acme/b"], ["word1"], None, 5, known_rows=[10])


def test_the_query_planes_are_its_three_bit_levels_repeated_over_the_row_planes():
    vector = np.array([2.0, -2.0, 0.1, -0.1, 0.02, 1.0, -1.0, 0.3, 0.6, -0.6])
    planes = query_planes(vector)
    assert len(planes) == len(QUERY_WEIGHTS) == 3
    assert all(len(plane) == 3 * len(vector) for plane in planes)
    assert all(plane == plane[: len(vector)] * 3 for plane in planes)
    # Each coordinate's level number (bit0 + 2 * bit1 + 4 * bit2) names the level nearest
    # to it, in the unit vector's standard deviations.
    unit = vector / np.linalg.norm(vector)
    numbers = [
        sum(int(plane[i]) << k for k, plane in enumerate(planes)) for i in range(len(vector))
    ]
    levels = [
        QUERY_LEVEL_OFFSET + sum(w * ((n >> k) & 1) for k, w in enumerate(QUERY_WEIGHTS))
        for n in range(8)
    ]
    sigma = unit.std()
    nearest = [int(np.argmin([abs(x / sigma - level) for level in levels])) for x in unit]
    assert numbers == nearest
    assert numbers == [7, 0, 4, 3, 4, 5, 2, 4, 5, 2]
    # Symmetric about 0: the row's bit count drops out of the rank.
    assert levels == pytest.approx([-level for level in reversed(levels)])


def test_the_rank_of_the_query_planes_is_the_inner_product_with_the_row_levels():
    rng = np.random.default_rng(5)
    query, rows = rng.standard_normal(64), rng.standard_normal((200, 64))
    planes = [np.array([c == "1" for c in plane]) for plane in query_planes(query)]
    unit = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    t = 0.6745 / np.sqrt(64)
    codes = np.concatenate([unit > -t, unit > 0, unit > t], axis=1)
    hamming = sum(
        w * (codes != plane).sum(axis=1) for w, plane in zip(QUERY_WEIGHTS, planes, strict=True)
    )
    # The query's levels (one copy of each plane) against the rows' levels (0-3).
    number = sum(plane[:64].astype(int) << k for k, plane in enumerate(planes))
    levels = np.array(
        [
            QUERY_LEVEL_OFFSET + sum(w * ((n >> k) & 1) for k, w in enumerate(QUERY_WEIGHTS))
            for n in number
        ]
    )
    inner = codes.reshape(200, 3, 64).sum(axis=1) @ levels
    assert np.argsort(hamming, kind="stable").tolist() == np.argsort(-inner, kind="stable").tolist()
