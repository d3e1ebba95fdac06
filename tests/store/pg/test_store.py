"""PgMemory on the embedded PostgreSQL, as the application role (not owner, no BYPASSRLS).

Most tests are sync and drive the async API through ``async_to_sync``: the store's ORM
calls then run on the test's own thread and connection, inside the test's transaction,
so ``CaptureQueriesContext`` sees every statement. The concurrency test uses real
separate connections (one thread each) and a transactional database.
"""

import hashlib
import json
import logging
import math
import threading
import warnings

import numpy as np
import pytest
from asgiref.sync import async_to_sync
from django.db import connection, connections
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from tests.processes import run_in_threads
from tests.store.pg_statements import executions, explain, search_statements
from tulip_memory.embeddings.base import BaseEmbedding
from tulip_memory.exceptions import ConfigurationError, TenantError
from tulip_memory.models.store import MemoryItem, UpsertRow
from tulip_memory.store import PGVECTOR_ANN_MAX_DIM, PgMemory
from tulip_memory.store.pg.search import search_paths
from tulip_memory.tenancy import tenant_atomic, tenant_context
from tulip_memory.tenancy.cluster import REGISTER, REGISTERED, is_citus

sync = async_to_sync


class SeededEmbedding(BaseEmbedding):
    """Deterministic in-process embedder (no network): a vector seeded by the text's hash.

    Counts its calls, so that tests can see what the encoding cache saves.
    """

    def __init__(self, dimension: int = 1024) -> None:
        self._dimension = dimension
        self.calls: list[str] = []

    @property
    def dimension(self) -> int:
        return self._dimension

    async def embed_batch(self, texts):
        self.calls.extend(texts)
        out = []
        for text in texts:
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
            out.append(np.random.default_rng(seed).standard_normal(self._dimension).tolist())
        return out


# How the statements registering a tenant on Citus begin (as logged, parameters filled).
REGISTRY = tuple(statement.split("%s")[0] for statement in (REGISTERED, REGISTER))


def _statements(captured):
    """The statements a store sent, without transaction plumbing (savepoints, tenant pin,
    on Citus the tenant's registering)."""
    return [
        q["sql"]
        for q in captured.captured_queries
        if not q["sql"].startswith(("SET LOCAL", "SELECT current_setting(", *REGISTRY))
        and "SAVEPOINT" not in q["sql"].upper()
    ]


# --- construction -----------------------------------------------------------------------


def test_construction_checks_width_and_arguments():
    assert PGVECTOR_ANN_MAX_DIM == 2000
    store = PgMemory()
    assert store.capabilities.embedding_dimension == 1024
    with pytest.raises(ValueError, match=r"2·1001 = 2002 wide"):
        PgMemory(dim=1001)
    with pytest.raises(ValueError, match="dim must be"):
        PgMemory(dim=0)
    with pytest.raises(ValueError, match="encoding_cache"):
        PgMemory(encoding_cache=-1)
    with pytest.raises(ConfigurationError, match=r"VECTOR_DIMENSIONS.*1024.*2·dim = 512"):
        PgMemory(dim=256)
    with pytest.raises(ConfigurationError, match="embedder is 384 dimensions wide"):
        PgMemory(embedder=SeededEmbedding(384))
    with override_settings(TULIP_MEMORY={"VECTOR_DIMENSIONS": 512}):
        assert PgMemory(dim=256).capabilities.embedding_dimension == 512


def test_wide_embedder_warns_that_there_is_no_ann_index():
    with (
        override_settings(TULIP_MEMORY={"VECTOR_DIMENSIONS": 3072}),
        warnings.catch_warnings(record=True) as caught,
    ):
        warnings.simplefilter("always")
        store = PgMemory(embedder=SeededEmbedding(3072))
    assert store.capabilities.embedding_dimension == 3072
    assert any(
        issubclass(w.category, RuntimeWarning) and "no ANN index" in str(w.message) for w in caught
    )


def test_refuses_databases_that_are_not_postgresql():
    with pytest.raises(ConfigurationError, match=r"needs PostgreSQL.*'mysql' is mysql"):
        PgMemory("mysql")
    with pytest.raises(ConfigurationError, match="no such alias"):
        PgMemory("nope")


# --- the contract, through the ORM ----------------------------------------------------


@pytest.mark.django_db
def test_versions_timestamps_and_reads():
    store = PgMemory()
    ns = ("acme", "users", "u1")
    sync(store.put)(ns, "k", {"text": "likes green tea"}, {"source": "chat"})
    first = sync(store.get_item)(ns, "k")
    sync(store.put)(ns, "k", {"text": "likes black tea"})
    second = sync(store.get_item)(ns, "k")
    assert (first.version, second.version) == (1, 2)
    assert second.created_at == first.created_at and second.updated_at > first.updated_at
    assert second.updated_at.utcoffset().total_seconds() == 0
    assert second.metadata == {} and first.metadata == {"source": "chat"}
    assert sync(store.get)(ns, "k") == {"text": "likes black tea"}
    assert sync(store.exists)(ns, "k") and not sync(store.exists)(ns, "other")
    assert sync(store.delete)(ns, "k") and not sync(store.delete)(ns, "k")
    sync(store.put)(ns, "k", 1)
    assert sync(store.get_item)(ns, "k").version == 1


@pytest.mark.django_db
def test_namespaces_are_prefix_safe():
    store = PgMemory()
    odd = ("acme", "a/b", "c\\d")
    sync(store.put)(odd, "k", 1)
    sync(store.put)(("acme", "a"), "k", 2)
    sync(store.put)(("acme", "a", "b"), "k", 3)
    sync(store.put)(("acme", "ab"), "k", 4)
    assert sync(store.get)(odd, "k") == 1
    assert sync(store.list_namespaces)(("acme", "a")) == [("acme", "a"), ("acme", "a", "b")]
    assert sync(store.list_namespaces)(("acme",), limit=2) == [("acme", "a"), ("acme", "a", "b")]
    # Tuple order, not string order: ("acme", "a", "b") < ("acme", "a-b") < ("acme", "a/b", ...).
    sync(store.put)(("acme", "a-b"), "k", 5)
    sync(store.put)(("acme", "a b"), "k", 6)
    assert sync(store.list_namespaces)(("acme",), limit=6) == sorted(
        [("acme", "a"), ("acme", "a", "b"), ("acme", "a b"), ("acme", "a-b"), odd, ("acme", "ab")]
    )
    with pytest.raises(TenantError):
        sync(store.list_namespaces)()
    with tenant_context("acme"):
        assert len(sync(store.list_namespaces)()) == 6


@pytest.mark.django_db
def test_put_batch_is_one_upsert_and_counts_repeated_keys():
    store = PgMemory()
    ns = ("acme", "batch")
    items = [(ns, f"k{i}", {"n": i, "text": f"item {i}"}, None) for i in range(50)]
    with CaptureQueriesContext(connection) as captured:
        sync(store.put_batch)(items)
    # On Citus the clock is read first: its DO UPDATE takes no timestamp arithmetic.
    clock = ["SELECT clock_timestamp()"] if is_citus(connection) else []
    *first, upsert = _statements(captured)
    assert first == clock and upsert.startswith("INSERT INTO")
    sync(store.put_batch)([(ns, "k1", "a", None), (ns, "k1", "b", None), (ns, "k1", "c", None)])
    item = sync(store.get_item)(ns, "k1")
    assert (item.value, item.version) == ("c", 4)


def test_a_big_batch_gets_a_work_mem_of_its_own_within_bounds():
    from tulip_memory.models.store import BATCH_WORK_MEM_MAX_KB, UpsertRow, _batch_work_mem

    def rows(count, width):
        vector = np.ones(width, np.float32)
        return [
            UpsertRow("t", "t", f"k{i}", "{}", "{}", "words", vector, "x") for i in range(count)
        ]

    assert _batch_work_mem(rows(10, 384)) is None  # the server's work_mem
    assert _batch_work_mem(rows(5000, 384)) == f"{3 * 5000 * (4 + 1536 + 5) // 1024}kB"
    assert _batch_work_mem(rows(100_000, 384)) == f"{BATCH_WORK_MEM_MAX_KB}kB"


@pytest.mark.django_db
def test_a_batch_over_a_megabyte_is_stored_whole_and_its_work_mem_ends_with_its_statement():
    store = PgMemory(embedder=SeededEmbedding())
    with connection.cursor() as cursor:
        cursor.execute("SHOW work_mem")
        before = cursor.fetchone()[0]
    items = [(("acme", "big"), f"k{i}", f"note {i} " + "word " * 40, None) for i in range(400)]
    with executions() as calls:
        sync(store.put_batch)(items)  # 400 vectors of 4 KB: 1.6 MB
    settings = [params for sql, params in calls if "set_config('work_mem'" in sql]
    # Three times the batch's bytes (of which the 400 vectors' 1.6 MB) for the statement,
    # then back to what the transaction had.
    assert len(settings) == 2 and settings[1] == [before]
    assert 3 * 400 * 4096 // 1024 < int(settings[0][0].removesuffix("kB")) < 8 * 1024
    with tenant_atomic("acme"):
        assert MemoryItem.objects.filter(namespace="acme/big").count() == 400
    with connection.cursor() as cursor:
        cursor.execute("SHOW work_mem")
        assert cursor.fetchone()[0] == before


@pytest.mark.django_db
def test_get_batch_is_one_query_and_clear_namespace_one_statement():
    store = PgMemory()
    ns, child = ("acme", "g"), ("acme", "g", "child")
    sync(store.put_batch)([(ns, f"k{i}", i, None) for i in range(20)] + [(child, "c", 0, None)])
    keys = [(ns, f"k{i}") for i in range(0, 25, 2)]
    with CaptureQueriesContext(connection) as captured:
        found = sync(store.get_batch)(keys)
    assert len(_statements(captured)) == 1
    assert found == {(ns, f"k{i}"): i for i in range(0, 20, 2)}
    with CaptureQueriesContext(connection) as captured:
        assert sync(store.clear_namespace)(ns) == 20
    statements = _statements(captured)
    assert len(statements) == 1 and statements[0].startswith("DELETE")
    assert sync(store.list_keys)(child) == ["c"]


@pytest.mark.django_db
def test_search_many_is_one_statement_and_equals_searches():
    embedder = SeededEmbedding()
    store = PgMemory(embedder=embedder)
    namespaces = [("acme", "s", str(i)) for i in range(4)]
    sync(store.put_batch)(
        [
            (ns, f"k{j}", f"note {j} about topic {j % 3}", None)
            for ns in namespaces
            for j in range(8)
        ]
    )
    embedder.calls.clear()
    with CaptureQueriesContext(connection) as captured:
        together = sync(store.search_many)(namespaces, "topic 1", limit=3)
    statements = _statements(captured)
    assert len(statements) == 1 and "LATERAL" in statements[0]
    assert embedder.calls == ["topic 1"]
    assert together == [sync(store.search)(ns, "topic 1", limit=3) for ns in namespaces]
    with pytest.raises(ValueError, match="spans the tenants"):
        sync(store.search_many)([("acme", "s"), ("globex", "s")], "x")


@pytest.mark.django_db(transaction=True, databases=["default", "prepared"])
def test_an_alias_allowing_prepared_statements_prepares_the_search_and_plans_it_once():
    plain, prepared = (
        PgMemory(embedder=SeededEmbedding()),
        PgMemory("prepared", embedder=SeededEmbedding()),
    )
    acme, globex = ("acme", "p"), ("globex", "p")
    sync(plain.put_batch)(
        [(acme, f"k{j}", f"note {j} about topic {j % 3}", None) for j in range(12)]
        + [(globex, "theirs", "topic 1 of another tenant", None)]
    )
    for query in ["topic 1", "note 4", "about", None] * 2:
        assert sync(prepared.search)(acme, query, limit=5) == sync(plain.search)(
            acme, query, limit=5
        )
    assert [item.key for item in sync(prepared.search)(globex, "topic 1")] == ["theirs"]
    assert "theirs" not in {item.key for item in sync(prepared.search)(acme, "topic 1", limit=20)}
    with connections["prepared"].cursor() as cursor:
        cursor.execute("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")
        plans = [
            (generic, custom) for sql, generic, custom in cursor.fetchall() if "LATERAL" in sql
        ]
    # One server plans the search once (generic plans); Citus plans it at each call for
    # the tenant's value (custom plans), which routes it to the tenant's shard.
    citus = is_citus(connection)
    assert plans and all(
        (generic == 0 and custom >= 1) if citus else (custom == 0 and generic >= 1)
        for generic, custom in plans
    ), plans
    # The default alias (Django's default: prepare_threshold None) prepares nothing.
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements")
        assert cursor.fetchone()[0] == 0


@pytest.mark.django_db
def test_search_without_query_is_newest_first():
    store = PgMemory()
    ns = ("acme", "recent")
    for key in ("a", "b", "c"):
        sync(store.put)(ns, key, f"value {key}")
    sync(store.put)(ns, "a", "value a again")
    for query in (None, "", "  ", "?!"):
        assert [i.key for i in sync(store.search)(ns, query)] == ["a", "c", "b"]


def _insert(rows):
    """``rows`` written by PgMemory's upsert, a thousand a statement (its parameters'
    bound; on Citus an ``INSERT ... SELECT`` reaches the shards by COPY, which RLS refuses)."""
    rows = list(rows)
    with tenant_atomic("acme"):
        for start in range(0, len(rows), 1000):
            MemoryItem.objects.upsert(rows[start : start + 1000])


def _exact_top_k(matrix, keys, query, k):
    norms = np.linalg.norm(matrix, axis=1) * np.linalg.norm(query)
    distance = 1 - matrix @ query / norms
    order = np.lexsort((keys, distance))
    return [keys[i] for i in order[:k]]


@pytest.mark.django_db
def test_search_is_exact_top_k_by_the_btree_on_a_big_table():
    """12,000 rows in 120 namespaces: the (tenant, namespace) btree, then an exact sort."""
    rng = np.random.default_rng(42)
    _insert(
        UpsertRow(
            "acme",
            f"acme/ns{g % 120}",
            f"k{g}",
            "1",
            "{}",
            " ",
            rng.random(1024, np.float32) - 0.5,
            "hrr",
        )
        for g in range(1, 12001)
    )
    with tenant_atomic("acme"):
        members = list(
            MemoryItem.objects.for_namespace(("acme", "ns7")).values_list("key", "embedding")
        )
    assert len(members) == 100
    keys = np.array([key for key, _ in members])
    matrix = np.array([vector for _, vector in members], dtype=np.float64)
    query = np.random.default_rng(7).standard_normal(1024)
    expected = _exact_top_k(matrix, keys, query, 10)
    with tenant_atomic("acme"), executions() as calls:
        hits = search_paths(
            MemoryItem.objects,
            "acme",
            ["acme/ns7"],
            10,
            vector=query.astype(np.float32),
            source="hrr",
        )
        # pgvector's text form of the vector ranks the same.
        as_text = search_paths(
            MemoryItem.objects,
            "acme",
            ["acme/ns7"],
            10,
            vector="[" + ",".join(map(str, query.tolist())) + "]",
            source="hrr",
        )
        plan = explain(*search_statements(calls)[0])
    assert [h.key for h in hits] == [h.key for h in as_text] == expected
    assert "Seq Scan on tulip_memory_store_item" not in plan and "tulip_store_item_" in plan, plan


@pytest.mark.django_db
def test_search_by_embedding_is_the_exact_top_k_with_filters_before_the_limit():
    """Same statement as search: ids and distances first, threshold and metadata before k."""
    # 3,000 rows in 3 namespaces; every source counts (HRR, an embedder's, external);
    # a row without a vector is never returned.
    rng = np.random.default_rng(17)
    _insert(
        UpsertRow(
            "acme",
            f"acme/sbe{g % 3}",
            f"k{g}",
            str(g),
            json.dumps({"kind": g % 4, "tag": f"t{g % 2}"}),
            " ",
            None if g % 50 == 0 else rng.random(1024, np.float32) - 0.5,
            ("hrr", "external", "embedder:x")[g % 3],
        )
        for g in range(1, 3001)
    )
    with tenant_atomic("acme"):
        members = list(
            MemoryItem.objects.for_namespace(("acme", "sbe1"))
            .filter(embedding__isnull=False)
            .values_list("key", "embedding", "metadata")
        )
    keys = np.array([key for key, _, _ in members])
    matrix = np.array([vector for _, vector, _ in members], dtype=np.float64)
    query = np.random.default_rng(3).standard_normal(1024)
    store = PgMemory()

    with CaptureQueriesContext(connection) as captured:
        hits = sync(store.search_by_embedding)(("acme", "sbe1"), query.tolist(), limit=10)
    assert len(_statements(captured)) == 1
    assert [h.item.key for h in hits] == _exact_top_k(matrix, keys, query, 10)
    distance = 1 - matrix @ query / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(query))
    by_key = dict(zip(keys, distance, strict=True))
    for hit in hits:
        assert hit.distance == pytest.approx(by_key[hit.item.key], abs=1e-5)
        assert hit.score == pytest.approx(1 - hit.distance)
        assert hit.item.value == int(hit.item.key[1:])

    # The filter and the threshold narrow the candidates before the cut to `limit`.
    wanted = [m["kind"] == 2 and m["tag"] == "t0" for _, _, m in members]
    threshold = float(np.sort(1 - distance[wanted])[-25])  # 25 rows pass both
    hits = sync(store.search_by_embedding)(
        ("acme", "sbe1"),
        query.tolist(),
        limit=20,
        threshold=threshold,
        metadata_filter={"kind": 2, "tag": "t0"},
    )
    expected = _exact_top_k(matrix[wanted], keys[wanted], query, 25)
    assert [h.item.key for h in hits] == expected[:20]
    assert all(h.item.metadata == {"kind": 2, "tag": "t0"} for h in hits)
    assert all(h.score >= threshold - 1e-6 for h in hits)
    nothing = sync(store.search_by_embedding)(
        ("acme", "sbe1"), query.tolist(), metadata_filter={"kind": 9}
    )
    assert nothing == []


@pytest.mark.django_db
def test_search_by_embedding_ties_are_newest_first():
    store = PgMemory()
    ns = ("acme", "ties")
    vector = [1.0] + [0.0] * 1023
    for key in ("b", "a", "c"):
        sync(store.put_with_embedding)(ns, key, key, vector)
    sync(store.put_with_embedding)(ns, "b", "b again", vector)
    hits = sync(store.search_by_embedding)(ns, vector)
    assert [h.item.key for h in hits] == ["b", "c", "a"]
    assert all(h.distance == pytest.approx(0.0, abs=1e-6) for h in hits)


@pytest.mark.django_db
def test_vectors_stay_in_the_heap_row_not_in_toast():
    """A 1024-d vector (4 KB) and the small columns stay inline; what cannot fit moves out."""
    store = PgMemory()
    sync(store.put)(("acme", "toast"), "small", "a short fact about tea")
    noise = np.random.default_rng(0).bytes(3000).hex()  # 6,000 incompressible characters
    sync(store.put)(("acme", "toast"), "big", {"text": "tea", "noise": noise})
    with tenant_atomic("acme"), connection.cursor() as cursor:
        cursor.execute(
            "SELECT a.attstorage, c.reloptions FROM pg_attribute a "
            "JOIN pg_class c ON c.oid = a.attrelid "
            "WHERE a.attrelid = 'tulip_memory_store_item'::regclass AND a.attname = 'embedding'"
        )
        assert cursor.fetchone() == ("m", ["toast_tuple_target=8160"])
        cursor.execute(
            "SELECT key, pg_column_size(embedding), pg_column_toast_chunk_id(embedding), "
            "pg_column_toast_chunk_id(value) IS NOT NULL, "
            "pg_column_toast_chunk_id(search_text) IS NOT NULL FROM tulip_memory_store_item "
            "WHERE tenant = 'acme' AND namespace = 'acme/toast' ORDER BY key"
        )
        rows = cursor.fetchall()
    # Vectors inline (no TOAST chunk) and uncompressed: 8 header bytes + 1024 floats. The
    # row that cannot fit a page moves its big value (and its words) out, not its vector.
    assert rows == [("big", 4104, None, True, True), ("small", 4104, None, False, False)]


# --- the encoding cache and the lexical fallback ------------------------------------------


@pytest.mark.django_db
def test_encoding_cache_is_keyed_by_tenant_and_bounded():
    embedder = SeededEmbedding()
    store = PgMemory(embedder=embedder, encoding_cache=2)
    for tenant in ("acme", "globex"):
        sync(store.put)((tenant, "n"), "k", f"secret of {tenant}")
    embedder.calls.clear()
    sync(store.search)(("acme", "n"), "secret")
    sync(store.search)(("acme", "n"), "secret")
    assert embedder.calls == ["secret"]
    sync(store.search)(("globex", "n"), "secret")
    assert embedder.calls == ["secret", "secret"]  # never served across tenants
    assert set(store.encoder.cached_keys()) == {("acme", "secret"), ("globex", "secret")}
    sync(store.search)(("acme", "n"), "other")
    assert store.encoder.cached_keys() == [("globex", "secret"), ("acme", "other")]
    uncached = PgMemory(embedder=embedder, encoding_cache=0)
    embedder.calls.clear()
    sync(uncached.search)(("acme", "n"), "secret")
    sync(uncached.search)(("acme", "n"), "secret")
    assert embedder.calls == ["secret", "secret"]


@pytest.mark.django_db
def test_rows_written_before_an_embedder_are_found_lexically_with_one_warning(caplog):
    ns = ("acme", "migrating")
    sync(PgMemory().put)(ns, "old", {"text": "prefers window seats"})
    store = PgMemory(embedder=SeededEmbedding())
    sync(store.put)(ns, "new", {"text": "orders vegetarian meals"})
    with caplog.at_level(logging.WARNING, logger="tulip_memory.store.pg.store"):
        first = sync(store.search)(ns, "window seats", limit=5)
        sync(store.search)(ns, "window", limit=5)
    assert first[0].key == "old" and {i.key for i in first} == {"old", "new"}
    assert sum("by their words only" in r.getMessage() for r in caplog.records) == 1


# --- bad input: ValueError before the database, nothing changes --------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda s, ns: s.put(ns, "k", {"t": "a\x00b"}), "value must not contain a NUL"),
        (lambda s, ns: s.put(ns, "k", 1, {"m": "\x00"}), "metadata must not contain a NUL"),
        (lambda s, ns: s.put(ns, "k\x00", 1), "key must not contain a NUL"),
        (lambda s, ns: s.put(("acme", "a\x00"), "k", 1), "NUL"),
        (lambda s, ns: s.put((" ", "x"), "k", 1), r"namespace\[0\] must not be only whitespace"),
        (lambda s, ns: s.put(ns, "k", float("nan")), "JSON"),
        (lambda s, ns: s.put_with_embedding(ns, "k", 1, [1.0] * 10), "1024"),
        (lambda s, ns: s.put_with_embedding(ns, "k", 1, [math.inf] + [1.0] * 1023), "finite"),
        (lambda s, ns: s.search_by_embedding(ns, [0.5] * 3), "1024"),
        (lambda s, ns: s.put_batch([(ns, "k", 2, None), (ns, "j", "\x00", None)]), r"items\[1\]"),
        (lambda s, ns: s.search(ns, "x", limit=0), "limit"),
        # Finite as float64 but not as float32 (pgvector's type): a DataError from
        # PostgreSQL before, or an all-zero vector stored and ranked with NaN scores.
        (
            lambda s, ns: s.put_with_embedding(ns, "k", 1, [1.0] * 1023 + [1e39]),
            r"embedding\[1023\] overflows float32",
        ),
        (
            lambda s, ns: s.put_with_embedding(ns, "k", 1, [1e-46] + [0.0] * 1023),
            "all zeros once stored as float32",
        ),
        (lambda s, ns: s.search_by_embedding(ns, [1e39] * 1024), "overflows float32"),
        # Each number fits float32 but the sum of their squares does not (or is zero):
        # pgvector's distances to such a vector are NaN.
        (lambda s, ns: s.put_with_embedding(ns, "k", 1, [1e30] * 1024), "too long for pgvector"),
        (lambda s, ns: s.search_by_embedding(ns, [1e-30] * 1024), "too short for pgvector"),
        # Over the unique btree's entry size: an OperationalError from PostgreSQL before.
        (lambda s, ns: s.put(ns, "é" * 1300, 1), "too long for PgMemory: .* 2612 bytes"),
        (lambda s, ns: s.put_with_embedding(ns, "x" * 2600, 1, [1.0] * 1024), "too long"),
        (
            lambda s, ns: s.put_batch([(ns, "j", 2, None), (("acme", "n" * 2600), "k", 1, None)]),
            r"items\[1\] namespace and key are too long",
        ),
    ],
)
def test_bad_input_is_refused_before_the_database(call, match):
    store = PgMemory()
    ns = ("acme", "bad")
    sync(store.put)(ns, "k", "kept")

    async def attempt():
        await call(store, ns)

    with CaptureQueriesContext(connection) as captured, pytest.raises(ValueError, match=match):
        sync(attempt)()
    assert captured.captured_queries == []
    item = sync(store.get_item)(ns, "k")
    assert (item.value, item.version) == ("kept", 1)


class BrokenEmbedding(SeededEmbedding):
    """In-process embedder double returning unusable vectors (NaN, or the wrong width)."""

    def __init__(self, vector):
        super().__init__(1024)
        self.vector = vector

    async def embed_batch(self, texts):
        return [list(self.vector) for _ in texts]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("vector", "match"),
    [
        ([math.nan] * 1024, r"the embedder's vector\[0\] must be finite"),
        ([1.0] * 3, "the embedder's vector has 3 dimensions, the store expects 1024"),
    ],
)
def test_bad_embedder_output_is_refused_before_the_database(vector, match):
    store = PgMemory(embedder=BrokenEmbedding(vector))
    with CaptureQueriesContext(connection) as captured, pytest.raises(ValueError, match=match):
        sync(store.put_batch)([(("acme", "e"), "k", "some words", None)])
    assert captured.captured_queries == []


class OneBadVectorEmbedding(SeededEmbedding):
    """Good vectors, but the one of the text "bad" is ``bad``."""

    def __init__(self, bad):
        super().__init__(1024)
        self.bad = bad

    async def embed_batch(self, texts):
        good = await super().embed_batch(texts)
        return [
            self.bad if text == "bad" else vector for text, vector in zip(texts, good, strict=True)
        ]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ([1.0] * 1023 + [math.inf], r"the embedder's vector\[1023\] must be finite"),
        ([1.0] * 3, "has 3 dimensions, the store expects 1024"),
        ([[1.0] * 1024], r"has shape \(1, 1024\), the store expects \(1024,\)"),
        (["x"] * 1024, "not a sequence of numbers"),
    ],
)
def test_one_bad_vector_in_a_batch_is_named_and_nothing_is_stored(bad, match):
    store = PgMemory(embedder=OneBadVectorEmbedding(bad))
    items = [
        (("acme", "b"), f"k{i}", text, None)
        for i, text in enumerate(["alpha", "beta", "bad", "gamma"])
    ]
    with CaptureQueriesContext(connection) as captured, pytest.raises(ValueError, match=match):
        sync(store.put_batch)(items)
    assert captured.captured_queries == []
    # The same batch without the bad one is stored, each vector as the embedder gave it.
    sync(store.put_batch)([item for item in items if item[2] != "bad"])
    with tenant_atomic("acme"):
        stored = dict(MemoryItem.objects.values_list("key", "embedding"))
    expected = sync(SeededEmbedding().embed_batch)(["alpha", "beta", "gamma"])
    for key, vector in zip(["k0", "k1", "k3"], expected, strict=True):
        assert np.allclose(np.asarray(stored[key], np.float32), np.float32(vector))


@pytest.mark.django_db
def test_longest_indexable_key_is_stored():
    store = PgMemory()
    ns = ("acme", "long")
    # Incompressible (PostgreSQL compresses long index entries), as long as allowed.
    key = np.random.default_rng(7).choice(list("abcdefghijklmnopqrstuvwxyz"), 2600 - 14)
    key = "".join(key)
    sync(store.put)(ns, key, "v")
    assert sync(store.get)(ns, key) == "v"


# --- concurrency ---------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_concurrent_batches_over_the_same_keys_in_opposite_orders_do_not_deadlock():
    # Each batch used to lock its rows in batch order: two batches over the same keys in
    # opposite orders deadlocked ("deadlock detected") and one of them was lost.
    store = PgMemory()
    ns = ("acme", "deadlock")
    keys = [f"k{i:05d}" for i in range(3000)]
    sync(store.put_batch)([(ns, k, "v", None) for k in keys])
    rounds = 4
    barrier = threading.Barrier(2, timeout=60)

    def writer(n):
        try:
            order = keys if n == 0 else keys[::-1]
            for _ in range(rounds):
                barrier.wait()
                sync(store.put_batch)([(ns, k, {"writer": n}, None) for k in order])
        finally:
            connections.close_all()

    assert run_in_threads(writer, 2) == []
    with tenant_atomic("acme"):
        versions = set(MemoryItem.objects.for_namespace(ns).values_list("version", flat=True))
    assert versions == {1 + 2 * rounds}


@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_puts_from_separate_connections():
    store = PgMemory()
    ns = ("acme", "race")
    barrier = threading.Barrier(20)
    backend_pids = set()

    def writer(n):
        try:
            barrier.wait()
            sync(store.put)(ns, "counter", {"writer": n})
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                backend_pids.add(cursor.fetchone()[0])
        finally:
            connections.close_all()

    assert run_in_threads(writer, 20) == []
    assert len(backend_pids) == 20
    with tenant_atomic("acme"):
        rows = list(MemoryItem.objects.for_namespace(ns))
    assert len(rows) == 1 and rows[0].version == 20


class _PutAfterTheCheck(PgMemory):
    """Commits a plain ``put`` of each compared key from another connection right after
    compare-and-put has read the versions (once per key: the widest possible window)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.interleaved: set = set()

    def _live_values(self, keys, column):
        found = super()._live_values(keys, column)
        if column != "version":
            return found
        for namespace, key in [k for k in keys if k not in self.interleaved]:
            self.interleaved.add((namespace, key))
            thread = threading.Thread(target=self._plain_put, args=(namespace, key))
            thread.start()
            thread.join()
        return found

    def _plain_put(self, namespace, key):
        try:
            sync(PgMemory().put)(namespace, key, "a concurrent put")
        finally:
            connections.close_all()


@pytest.mark.django_db(transaction=True)
def test_compare_and_put_does_not_overwrite_a_put_that_lands_after_its_check():
    store = _PutAfterTheCheck()
    ns = ("acme", "cas-race")
    sync(store.put)(ns, "existing", "v1")
    # An existing key, and one the batch expects absent: the concurrent put lands on both.
    batch = [(ns, "existing", "based on v1", None), (ns, "new", "based on nothing", None)]
    assert not sync(store.compare_and_put_batch)(batch, {(ns, "existing"): 1, (ns, "new"): None})
    assert sync(store.get_batch)([(ns, "existing"), (ns, "new")]) == {
        (ns, "existing"): "a concurrent put",
        (ns, "new"): "a concurrent put",
    }
    assert sync(store.get_item)(ns, "existing").version == 2
    # With nothing in between, the same call writes.
    assert sync(store.compare_and_put_batch)(batch, {(ns, "existing"): 2, (ns, "new"): 1})
    assert sync(store.get)(ns, "existing") == "based on v1"
