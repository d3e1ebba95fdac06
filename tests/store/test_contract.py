"""The store contract, run on every backend of ``STORE_FACTORIES`` (see conftest.py).

Capability tests run the feature on stores that advertise it and assert
StoreCapabilityError on the others (an assertion, not a skip).
"""

from __future__ import annotations

import asyncio
import json
import math
import random
from datetime import UTC, timedelta

import pytest

from tulip_memory.store import (
    NamespacedStore,
    SemanticSearchResult,
    StoreCapabilities,
    StoreCapabilityError,
    StoreContext,
    StoreItem,
)

JSON_VALUES = [
    "plain text",
    "",
    0,
    -17,
    3.25,
    True,
    None,
    [1, "two", [3.0]],
    {"nested": {"list": [1, 2, {"deep": "é 東京"}], "flag": False}},
    "unicode ✓ 東京 Straße",
    "a literal backslash-u0000 \\u0000 is text, not NUL",
]


async def _snapshot(store, ns):
    """Everything visible in ``ns``: used to prove that bad input wrote nothing."""
    keys = await store.list_keys(ns)
    return {key: await store.get_item(ns, key) for key in keys}


# --- basics -------------------------------------------------------------------------


async def test_capabilities_is_a_store_capabilities(store):
    assert isinstance(store.capabilities, StoreCapabilities)


@pytest.mark.parametrize("value", JSON_VALUES, ids=repr)
async def test_put_get_round_trips_json(store, root, value):
    ns = (root, "values")
    await store.put(ns, "k", value)
    assert await store.get(ns, "k") == value
    item = await store.get_item(ns, "k")
    assert item.value == value
    assert await store.exists(ns, "k")


async def test_tuples_come_back_as_lists(store, root):
    await store.put((root,), "k", {"pair": (1, 2)})
    assert await store.get((root,), "k") == {"pair": [1, 2]}


async def test_missing_key(store, root):
    ns = (root, "missing")
    assert await store.get(ns, "nope") is None
    assert await store.get_item(ns, "nope") is None
    assert not await store.exists(ns, "nope")
    assert not await store.delete(ns, "nope")


async def test_stored_none_exists(store, root):
    await store.put((root,), "k", None)
    assert await store.exists((root,), "k")
    assert (await store.get_item((root,), "k")).value is None


async def test_values_are_copies(store, root):
    value = {"list": [1, 2]}
    await store.put((root,), "k", value)
    value["list"].append(3)
    first = await store.get((root,), "k")
    assert first == {"list": [1, 2]}
    first["list"].append(4)
    assert await store.get((root,), "k") == {"list": [1, 2]}


async def test_version_and_timestamps(store, root):
    ns = (root, "versions")
    await store.put(ns, "k", "one", {"a": 1})
    created = await store.get_item(ns, "k")
    assert created.version == 1
    assert created.created_at == created.updated_at
    assert created.created_at.tzinfo is not None
    assert created.created_at.utcoffset() == UTC.utcoffset(None)
    assert created.metadata == {"a": 1}
    assert (created.namespace, created.key) == (ns, "k")

    await store.put(ns, "k", "two")
    updated = await store.get_item(ns, "k")
    assert updated.version == 2
    assert updated.created_at == created.created_at
    assert updated.updated_at > created.updated_at
    assert updated.metadata == {}
    assert updated.value == "two"

    await store.put(ns, "k", "three", {"b": 2})
    third = await store.get_item(ns, "k")
    assert third.version == 3
    assert third.updated_at > updated.updated_at

    assert await store.delete(ns, "k")
    await store.put(ns, "k", "reborn")
    reborn = await store.get_item(ns, "k")
    assert reborn.version == 1
    assert reborn.created_at > created.created_at


async def test_store_item_round_trips_through_json(store, root):
    await store.put((root,), "k", {"x": [1, "y"]}, {"m": True})
    item = await store.get_item((root,), "k")
    again = StoreItem.from_dict(json.loads(json.dumps(item.to_dict())))
    assert again == item


async def test_delete(store, root):
    a, b = (root, "a"), (root, "b")
    await store.put(a, "k", 1)
    await store.put(b, "k", 2)
    assert await store.delete(a, "k")
    assert not await store.delete(a, "k")
    assert await store.get(a, "k") is None
    assert await store.get(b, "k") == 2


async def test_namespaces_are_isolated(store, root):
    parent, child, other = (root, "p"), (root, "p", "c"), (root, "o")
    await store.put(parent, "k", "parent")
    await store.put(child, "k", "child")
    await store.put(other, "k2", "other")
    assert await store.get(parent, "k") == "parent"
    assert await store.get(child, "k") == "child"
    assert await store.list_keys(parent) == ["k"]
    assert await store.list_keys(child) == ["k"]
    assert await store.get(other, "k") is None


async def test_list_keys_newest_first_with_limit(store, root):
    ns = (root, "list")
    for key in ["a", "b", "c", "d"]:
        await store.put(ns, key, key)
    await store.put(ns, "b", "updated")
    assert await store.list_keys(ns) == ["b", "d", "c", "a"]
    assert await store.list_keys(ns, limit=2) == ["b", "d"]
    assert await store.list_keys((root, "empty")) == []


async def test_get_batch(store, root):
    a, b = (root, "a"), (root, "b")
    await store.put(a, "x", 1)
    await store.put(b, "y", None)
    found = await store.get_batch([(a, "x"), (b, "y"), (a, "missing")])
    assert found == {(a, "x"): 1, (b, "y"): None}
    assert await store.get_batch([]) == {}


async def test_put_batch(store, root):
    a, b = (root, "a"), (root, "b")
    await store.put(a, "existing", "old")
    await store.put_batch(
        [(a, "existing", "new", {"m": 1}), (a, "fresh", [1], None), (b, "other", "x", None)]
    )
    assert await store.get(a, "existing") == "new"
    assert (await store.get_item(a, "existing")).version == 2
    assert (await store.get_item(a, "existing")).metadata == {"m": 1}
    assert (await store.get_item(a, "fresh")).version == 1
    assert await store.get(b, "other") == "x"
    await store.put_batch([])


async def test_batches_may_be_generators(store, root):
    """A generator of items is read once: every item is validated and written."""
    ns = (root, "generated")
    await store.put_batch((ns, f"k{i}", i, None) for i in range(3))
    assert await store.get_batch([(ns, f"k{i}") for i in range(3)]) == {
        (ns, f"k{i}"): i for i in range(3)
    }
    if store.capabilities.ttl:
        await store.put_batch(((ns, f"t{i}", i, None) for i in range(2)), ttl=timedelta(minutes=5))
        assert await store.get(ns, "t1") == 1
    written = await store.compare_and_put_batch(
        ((ns, "k0", "cas", None) for _ in range(1)), {(ns, "k0"): 1}
    )
    assert written and await store.get(ns, "k0") == "cas"


async def test_put_batch_validates_everything_first(store, root):
    ns = (root, "batch")
    await store.put(ns, "existing", "old")
    before = await _snapshot(store, ns)
    with pytest.raises(ValueError, match=r"items\[2\] value is not JSON-serialisable"):
        await store.put_batch(
            [
                (ns, "existing", "new", None),
                (ns, "fresh", "x", None),
                (ns, "bad", float("nan"), None),
            ]
        )
    assert await _snapshot(store, ns) == before
    with pytest.raises(ValueError, match=r"items\[1\] key must not be empty"):
        await store.put_batch([(ns, "fresh", 1, None), (ns, "", 2, None)])
    assert await _snapshot(store, ns) == before


async def test_clear_namespace(store, root):
    ns, child, other = (root, "c"), (root, "c", "child"), (root, "d")
    for key in ["a", "b", "c"]:
        await store.put(ns, key, key)
    await store.put(child, "k", 1)
    await store.put(other, "k", 1)
    assert await store.clear_namespace(ns) == 3
    assert await store.list_keys(ns) == []
    assert await store.get(child, "k") == 1
    assert await store.get(other, "k") == 1
    assert await store.clear_namespace(ns) == 0


async def test_close_is_idempotent(store_factory):
    store = store_factory()
    await store.close()
    await store.close()


async def test_async_context_manager_closes(store_factory, root):
    async with store_factory() as store:
        await store.put((root,), "k", 1)
        assert await store.get((root,), "k") == 1


async def test_concurrent_updates_count_every_write(store, root):
    ns = (root, "race")
    await asyncio.gather(*(store.put(ns, "k", i) for i in range(20)))
    assert (await store.get_item(ns, "k")).version == 20


# --- search (capability) ------------------------------------------------------------


async def _seed_search(store, ns):
    await store.put(ns, "tea", {"text": "The user drinks green TEA every morning"})
    await store.put(ns, "car", {"text": "The user drives a red car"})
    await store.put(ns, "city", "Lives in München near the Straße station")
    await store.put(ns, "jp", "東京タワーに行った")


async def test_search(store, root):
    ns, other = (root, "search"), (root, "other")
    if not store.capabilities.search:
        with pytest.raises(StoreCapabilityError) as caught:
            await store.search(ns, "tea")
        assert caught.value.capability == "search"
        assert caught.value.store_class == type(store).__name__
        with pytest.raises(StoreCapabilityError):
            await store.search_many([ns], "tea")
        return
    await _seed_search(store, ns)
    await store.put(other, "tea", "tea tea tea")
    results = await store.search(ns, "tea")
    assert results[0].key == "tea"
    assert all(item.namespace == ns for item in results)
    assert results[0].version == 1
    assert results[0].value == {"text": "The user drinks green TEA every morning"}
    assert (await store.search(ns, "Tea MORNING"))[0].key == "tea"
    assert (await store.search(ns, "red car"))[0].key == "car"
    assert (await store.search(ns, "STRASSE münchen"))[0].key == "city"
    assert (await store.search(ns, "東京"))[0].key == "jp"
    assert len(await store.search(ns, "the user", limit=1)) == 1


async def test_search_without_query_is_newest_first(store, root):
    ns = (root, "recent")
    if not store.capabilities.search:
        with pytest.raises(StoreCapabilityError):
            await store.search(ns)
        return
    await _seed_search(store, ns)
    await store.put(ns, "car", {"text": "The user sold the red car"})
    expected = ["car", "jp", "city", "tea"]
    assert [item.key for item in await store.search(ns)] == expected
    assert [item.key for item in await store.search(ns, "   ")] == expected
    assert [item.key for item in await store.search(ns, "?!")] == expected
    assert [item.key for item in await store.search(ns, None, limit=2)] == expected[:2]
    assert await store.search((root, "nothing-here")) == []


async def test_search_many(store, root):
    a, b, empty = (root, "a"), (root, "b"), (root, "empty")
    if not store.capabilities.search:
        with pytest.raises(StoreCapabilityError):
            await store.search_many([a, b], "tea")
        return
    await _seed_search(store, a)
    await store.put(b, "tea2", "more tea please")
    many = await store.search_many([b, empty, a], "tea", limit=3)
    assert many == [
        await store.search(b, "tea", limit=3),
        [],
        await store.search(a, "tea", limit=3),
    ]
    assert await store.search_many([], "tea") == []
    assert await store.search_many([a]) == [await store.search(a)]


# --- list_namespaces (capability) ---------------------------------------------------


async def test_list_namespaces(store, root):
    if not store.capabilities.list_namespaces:
        with pytest.raises(StoreCapabilityError) as caught:
            await store.list_namespaces((root,))
        assert caught.value.capability == "list_namespaces"
        return
    for ns in [(root, "users", "u1"), (root, "users", "u2"), (root, "usersx"), (root,)]:
        await store.put(ns, "k", 1)
    assert await store.list_namespaces((root,)) == [
        (root,),
        (root, "users", "u1"),
        (root, "users", "u2"),
        (root, "usersx"),
    ]
    assert await store.list_namespaces((root, "users")) == [
        (root, "users", "u1"),
        (root, "users", "u2"),
    ]
    assert await store.list_namespaces((root, "us")) == []
    assert await store.list_namespaces((root,), limit=2) == [(root,), (root, "users", "u1")]
    everything = await store.list_namespaces(limit=1000)
    assert (root, "usersx") in everything
    await store.delete((root, "usersx"), "k")
    assert (root, "usersx") not in await store.list_namespaces((root,))


# --- semantic search (capability) ---------------------------------------------------


async def test_search_by_embedding_breaks_ties_newest_first_then_key(store, root):
    ns = (root, "semantic-ties")
    if not store.capabilities.semantic_search:
        return  # test_semantic_search asserts the capability error
    width = store.capabilities.embedding_dimension or 4
    same = [1.0, *([0.0] * (width - 1))]
    for key in ("k2", "k0", "k3", "k1", "k0"):  # k0 written again: the newest
        await store.put_with_embedding(ns, key, {"k": key}, same)
    ranked = await store.search_by_embedding(ns, same, limit=3)
    assert [result.item.key for result in ranked] == ["k0", "k1", "k3"]


async def test_semantic_search(store, root):
    ns = (root, "semantic")
    if not store.capabilities.semantic_search:
        for call in (
            store.put_with_embedding(ns, "k", "v", [1.0, 0.0]),
            store.search_by_embedding(ns, [1.0, 0.0]),
            store.get_embedding(ns, "k"),
        ):
            with pytest.raises(StoreCapabilityError) as caught:
                await call
            assert caught.value.capability == "semantic_search"
        assert await store.get(ns, "k") is None
        return
    width = store.capabilities.embedding_dimension or 4

    def vector(*head: float) -> list[float]:
        return [*head, *([0.0] * (width - len(head)))]

    await store.put_with_embedding(ns, "x", {"t": "x"}, vector(1, 0), {"kind": "a"})
    await store.put_with_embedding(ns, "xy", {"t": "xy"}, vector(1, 1), {"kind": "b"})
    await store.put_with_embedding(ns, "y", {"t": "y"}, vector(0, 1), {"kind": "a"})
    await store.put_with_embedding((root, "elsewhere"), "x", "x", vector(1, 0))

    results = await store.search_by_embedding(ns, vector(1, 0.1))
    assert [r.item.key for r in results] == ["x", "xy", "y"]
    assert all(isinstance(r, SemanticSearchResult) for r in results)
    assert results[0].item.value == {"t": "x"}
    assert results[0].score == pytest.approx(1 / math.sqrt(1.01), abs=1e-5)
    assert results[0].distance == pytest.approx(1 - results[0].score, abs=1e-6)
    assert [r.item.key for r in await store.search_by_embedding(ns, vector(1, 0), limit=1)] == ["x"]
    strong = await store.search_by_embedding(ns, vector(1, 0), threshold=0.5)
    assert [r.item.key for r in strong] == ["x", "xy"]
    filtered = await store.search_by_embedding(ns, vector(1, 0), metadata_filter={"kind": "a"})
    assert [r.item.key for r in filtered] == ["x", "y"]
    assert await store.search_by_embedding((root, "none"), vector(1, 0)) == []

    stored = await store.get_embedding(ns, "xy")
    assert stored == pytest.approx(vector(1, 1))
    assert await store.get_embedding(ns, "missing") is None

    await store.put_with_embedding(ns, "x", {"t": "x2"}, vector(0, 1))
    assert (await store.get_item(ns, "x")).version == 2
    assert await store.get_embedding(ns, "x") == pytest.approx(vector(0, 1))


async def test_a_threshold_of_one_keeps_exact_duplicates(store, root):
    ns = (root, "semantic-duplicates")
    if not store.capabilities.semantic_search:
        with pytest.raises(StoreCapabilityError):
            await store.search_by_embedding(ns, [1.0], threshold=1.0)
        return
    width = store.capabilities.embedding_dimension or 4
    rng = random.Random(7)
    vectors = [[rng.uniform(-1, 1) for _ in range(width)] for _ in range(10)]
    for i, vector in enumerate(vectors):
        await store.put_with_embedding(ns, f"k{i}", i, vector)
    for i, vector in enumerate(vectors):
        hits = await store.search_by_embedding(ns, vector, threshold=1.0)
        assert [hit.item.key for hit in hits] == [f"k{i}"]
        assert hits[0].score == pytest.approx(1.0)


async def test_metadata_filters_compare_as_json(store, root):
    """``true`` is not ``1`` (as in JSON and PostgreSQL), ``1`` is ``1.0``, and nested
    values must be equal, not contained."""
    ns = (root, "semantic-filter")
    if not store.capabilities.semantic_search:
        with pytest.raises(StoreCapabilityError):
            await store.search_by_embedding(ns, [1.0], metadata_filter={"flag": True})
        return
    width = store.capabilities.embedding_dimension or 4
    vector = [1.0] + [0.0] * (width - 1)
    for key, flag in (("bool", True), ("int", 1), ("float", 1.0), ("zero", 0), ("false", False)):
        await store.put_with_embedding(ns, key, key, vector, {"flag": flag, "tags": ["a", "b"]})

    async def keys(wanted):
        hits = await store.search_by_embedding(ns, vector, metadata_filter=wanted)
        return sorted(hit.item.key for hit in hits)

    assert await keys({"flag": True}) == ["bool"]
    assert await keys({"flag": 1}) == ["float", "int"]
    assert await keys({"flag": False}) == ["false"]
    assert await keys({"flag": 0.0}) == ["zero"]
    assert await keys({"tags": ["a"]}) == []
    assert len(await keys({"tags": ["a", "b"]})) == 5


async def test_semantic_search_bad_embeddings(store, root):
    ns = (root, "semantic-bad")
    if not store.capabilities.semantic_search:
        with pytest.raises(StoreCapabilityError):
            await store.put_with_embedding(ns, "k", "v", [float("nan")])
        return
    width = store.capabilities.embedding_dimension or 3
    await store.put_with_embedding(ns, "ok", "v", [1.0] * width)
    width = store.capabilities.embedding_dimension
    before = await _snapshot(store, ns)
    bad = [
        ([float("nan")] * width, "must be finite"),
        ([1.0, float("inf"), *([0.0] * (width - 2))], "must be finite"),
        ([1.0] * (width + 1), f"has {width + 1} dimensions"),
        ([0.0] * width, "all zeros"),
        ([], "must not be empty"),
        ("not a vector", "must be a sequence"),
        (["1", *([0.0] * (width - 1))], "must be a number"),
    ]
    for embedding, message in bad:
        with pytest.raises(ValueError, match=message):
            await store.put_with_embedding(ns, "new", "v", embedding)
        with pytest.raises(ValueError, match=message):
            await store.search_by_embedding(ns, embedding)
    with pytest.raises(ValueError, match="threshold"):
        await store.search_by_embedding(ns, [1.0] * width, threshold=2)
    with pytest.raises(ValueError, match="metadata_filter"):
        await store.search_by_embedding(ns, [1.0] * width, metadata_filter=["kind"])
    assert await _snapshot(store, ns) == before


# --- bad input ----------------------------------------------------------------------

BAD_NAMESPACES = [
    (["users"], "must be a tuple"),
    ("users", "must be a tuple"),
    ((), "must not be an empty tuple"),
    (("users", ""), r"namespace\[1\] must not be empty"),
    (("users", 3), r"namespace\[1\] must be a str"),
    (("us\x00ers",), "NUL"),
    (None, "must be a tuple"),
]
BAD_KEYS = [
    ("", "key must not be empty"),
    (3, "key must be a str"),
    (None, "key must be a str"),
    ("a\x00b", "NUL"),
]
BAD_VALUES = [
    (float("nan"), "not JSON-serialisable"),
    (float("inf"), "not JSON-serialisable"),
    ({"x": [1, float("-inf")]}, "not JSON-serialisable"),
    ({1, 2}, "not JSON-serialisable"),
    (object(), "not JSON-serialisable"),
    (b"bytes", "not JSON-serialisable"),
    ("nul \x00 inside", "must not contain a NUL"),
    ({"deep": ["\x00"]}, "must not contain a NUL"),
    ({"key\x00": 1}, "must not contain a NUL"),
]
BAD_METADATA = [
    ("text", "metadata must be a dict"),
    ({"x": float("nan")}, "metadata is not JSON-serialisable"),
    ({1: "int key"}, "metadata keys must be strings"),
    ({"x": "a\x00"}, "metadata must not contain a NUL"),
]


@pytest.mark.parametrize(("namespace", "message"), BAD_NAMESPACES)
async def test_bad_namespace(store, root, namespace, message):
    good = (root, "good")
    await store.put(good, "k", 1)
    before = await _snapshot(store, good)
    with pytest.raises(ValueError, match=message):
        await store.put(namespace, "k", 1)
    for call in (
        store.get(namespace, "k"),
        store.get_item(namespace, "k"),
        store.delete(namespace, "k"),
        store.exists(namespace, "k"),
        store.list_keys(namespace),
        store.clear_namespace(namespace),
        store.put_batch([(namespace, "k", 1, None)]),
        store.get_batch([(namespace, "k")]),
    ):
        with pytest.raises(ValueError, match=message):
            await call
    if store.capabilities.search:
        with pytest.raises(ValueError, match=message):
            await store.search(namespace, "x")
        in_list = message.replace("namespace", r"namespaces\[1\]")
        with pytest.raises(ValueError, match=in_list):
            await store.search_many([good, namespace], "x")
    assert await _snapshot(store, good) == before


@pytest.mark.parametrize(("key", "message"), BAD_KEYS)
async def test_bad_key(store, root, key, message):
    ns = (root, "keys")
    with pytest.raises(ValueError, match=message):
        await store.put(ns, key, 1)
    for call in (store.get(ns, key), store.delete(ns, key), store.get_item(ns, key)):
        with pytest.raises(ValueError, match=message):
            await call
    assert await store.list_keys(ns) == []


@pytest.mark.parametrize(("value", "message"), BAD_VALUES, ids=lambda v: type(v).__name__)
async def test_bad_value(store, root, value, message):
    ns = (root, "values")
    await store.put(ns, "k", "before")
    with pytest.raises(ValueError, match=message):
        await store.put(ns, "k", value)
    with pytest.raises(ValueError, match=message):
        await store.put(ns, "other", value)
    item = await store.get_item(ns, "k")
    assert (item.value, item.version) == ("before", 1)
    assert await store.list_keys(ns) == ["k"]


@pytest.mark.parametrize(("metadata", "message"), BAD_METADATA, ids=repr)
async def test_bad_metadata(store, root, metadata, message):
    ns = (root, "meta")
    with pytest.raises(ValueError, match=message):
        await store.put(ns, "k", 1, metadata)
    assert await store.list_keys(ns) == []


# Dicts two of whose keys JSON writes as one key: stored, one entry would be lost.
COLLIDING_KEYS = [
    ({1: "a", "1": "b"}, r"value has the keys 1 and '1', which are both '1' in JSON"),
    ({True: 1, "true": 2}, r"value has the keys True and 'true', which are both 'true'"),
    ({"notes": [{"x": {None: 1, "null": 2}}]}, r"value\['notes'\]\[0\]\['x'\] has the keys None"),
]


@pytest.mark.parametrize(("value", "message"), COLLIDING_KEYS, ids=["int", "bool", "nested"])
async def test_keys_json_writes_as_one_are_refused_naming_them(store, root, value, message):
    ns = (root, "collide")
    await store.put(ns, "k", {"1": "kept"}, {"tag": "kept"})
    before = await _snapshot(store, ns)
    calls = [
        (store.put(ns, "k", value), f"^{message}"),
        (store.put(ns, "new", value), f"^{message}"),
        (
            store.put(ns, "k", 1, {"m": value}),
            "^" + message.replace("value", r"metadata\['m'\]", 1),
        ),
        (store.put_batch([(ns, "new", 1), (ns, "k", value)]), rf"^items\[1\] {message}"),
        (
            store.compare_and_put_batch([(ns, "k", value)], {(ns, "k"): 1}),
            rf"^items\[0\] {message}",
        ),
    ]
    if store.capabilities.semantic_search:
        width = store.capabilities.embedding_dimension or 4
        calls.append((store.put_with_embedding(ns, "k", value, [1.0] * width), f"^{message}"))
    for call, pattern in calls:
        with pytest.raises(ValueError, match=pattern):
            await call
    assert await _snapshot(store, ns) == before


@pytest.mark.parametrize("limit", [0, -1, 1.5, "10", True])
async def test_bad_limit(store, root, limit):
    with pytest.raises(ValueError, match="limit"):
        await store.list_keys((root,), limit=limit)
    if store.capabilities.search:
        with pytest.raises(ValueError, match="limit"):
            await store.search((root,), "x", limit=limit)


async def test_bad_query_and_prefix(store, root):
    if store.capabilities.search:
        with pytest.raises(ValueError, match="query must be a str"):
            await store.search((root,), 42)
        with pytest.raises(ValueError, match="sequence of namespace tuples"):
            await store.search_many((root, "a"), "x")
    if store.capabilities.list_namespaces:
        with pytest.raises(ValueError, match="prefix must be a tuple"):
            await store.list_namespaces(["users"])
        with pytest.raises(ValueError, match="NUL"):
            await store.list_namespaces(("a\x00",))


async def test_bad_batches(store, root):
    with pytest.raises(ValueError, match=r"items\[0\] must be a"):
        await store.put_batch([("not", "a", "batch", "item", "at all")])
    with pytest.raises(ValueError, match="items must be a list"):
        await store.put_batch("nope")
    with pytest.raises(ValueError, match=r"keys\[0\] must be a \(namespace, key\) pair"):
        await store.get_batch([(root,)])


# --- wrappers over every store ------------------------------------------------------


async def test_namespaced_store(store, root):
    users = NamespacedStore(store, (root, "users"))
    alice = users.scoped("alice")
    assert alice.namespace == (root, "users", "alice")
    await alice.put("theme", {"mode": "dark"}, {"src": "test"})
    assert await store.get((root, "users", "alice"), "theme") == {"mode": "dark"}
    assert await alice.get("theme") == {"mode": "dark"}
    assert (await alice.get_item("theme")).metadata == {"src": "test"}
    assert await alice.exists("theme")
    assert await alice.list_keys() == ["theme"]
    assert await users.list_keys() == []
    if store.capabilities.search:
        assert [item.key for item in await alice.search("dark")] == ["theme"]
    assert await alice.clear() == 1
    assert not await alice.delete("theme")
    with pytest.raises(ValueError, match="must not be empty"):
        users.scoped("")


async def test_store_context(store, root):
    # On a tenant-isolated store every namespace starts with the context's tenant.
    tenant = root if store.capabilities.tenant_isolated else None
    t = () if tenant is None else (tenant,)
    context = StoreContext(store, user_id=root, session_id="s1", tenant=tenant)
    await context.remember("food", "likes ramen")
    assert await context.get_user_memory("food") == "likes ramen"
    assert await store.get((*t, "users", root, "memories"), "food") == "likes ramen"
    if store.capabilities.search:
        assert [item.key for item in await context.search_memories("ramen")] == ["food"]
    assert await context.forget("food")
    await context.for_session().put("step", 3)
    assert await store.get((*t, "sessions", "s1"), "step") == 3
    await context.for_user().put("name", "A")
    assert await store.get((*t, "users", root), "name") == "A"
    await context.set_global(f"{root}-flag", True)
    assert await context.get_global(f"{root}-flag") is True
    assert await store.delete((*t, "global"), f"{root}-flag")
    await store.delete((*t, "sessions", "s1"), "step")

    anonymous = StoreContext(store, tenant=tenant)
    assert await anonymous.get_user_memory("food") is None
    assert await anonymous.search_memories("ramen") == []
    assert not await anonymous.forget("food")
    with pytest.raises(ValueError, match="no user_id"):
        await anonymous.remember("food", "x")
    with pytest.raises(ValueError, match="user_id must be given"):
        anonymous.for_user()
    with pytest.raises(ValueError, match="session_id must be given"):
        anonymous.for_session()


async def test_compare_and_put_batch(store, root):
    ns = (root, "cas")
    assert await store.compare_and_put_batch([(ns, "k", "v1", None)], {(ns, "k"): None})
    version = (await store.get_item(ns, "k")).version
    # A stale expectation writes nothing, not even the batch's other items.
    stale = [(ns, "other", 1, None), (ns, "k", "stale", None)]
    assert not await store.compare_and_put_batch(stale, {(ns, "k"): version + 1})
    assert not await store.compare_and_put_batch(stale, {(ns, "k"): None})
    assert await store.get(ns, "k") == "v1" and await store.get(ns, "other") is None
    assert await store.compare_and_put_batch([(ns, "k", "v2", None)], {(ns, "k"): version})
    assert await store.get(ns, "k") == "v2"
    with pytest.raises(ValueError, match="must be a version"):
        await store.compare_and_put_batch([(ns, "k", "v3", None)], {(ns, "k"): "1"})
    with pytest.raises(ValueError, match="expected_versions must be a dict"):
        await store.compare_and_put_batch([(ns, "k", "v3", None)], [(ns, "k")])
    assert await store.get(ns, "k") == "v2"


async def test_search_ranking_stems_drops_stop_words_and_weighs_rare_words(store, root):
    ns = (root, "ranking")
    if not store.capabilities.search:
        with pytest.raises(StoreCapabilityError):
            await store.search(ns, "likes")
        return
    await store.put(ns, "pottery", {"text": "Melanie liked pottery classes"})
    await store.put(ns, "kitten", {"text": "Caroline adopted a kitten"})
    await store.put(ns, "hiking", {"text": "Caroline went hiking"})
    await store.put(ns, "paint", {"text": "Caroline painted a lake"})
    # Stemming: "likes" finds "liked".
    assert (await store.search(ns, "who likes pottery?"))[0].key == "pottery"
    # IDF: the rare word outweighs the name in three items.
    assert (await store.search(ns, "Caroline's kitten"))[0].key == "kitten"
    # Stop words only: no term to rank by, the newest items as without a query.
    newest = [i.key for i in await store.search(ns)]
    assert [i.key for i in await store.search(ns, "what is it?")] == newest


async def test_search_ties_are_newest_first_then_key_before_the_limit(store, root):
    ns = (root, "ties")
    if not store.capabilities.search:
        return  # test_search asserts the capability error
    for index in range(6):
        await store.put(ns, f"k{index}", "green tea")
    assert [i.key for i in await store.search(ns, "tea", limit=2)] == ["k5", "k4"]
    assert [i.key for i in await store.search(ns, "green tea", limit=3)] == ["k5", "k4", "k3"]


async def test_a_query_word_missing_from_a_large_namespace_leaves_the_others(
    store, root, monkeypatch
):
    """HolographicStore prunes the common words of a query in a namespace over its row
    budget (made 10 here, so that the namespace is small): a word matching nothing must
    not take the place of the word that matches."""
    monkeypatch.setattr("tulip_memory.store.holographic.fts.ROW_BUDGET", 10)
    ns = (root, "large")
    if not store.capabilities.search:
        return  # test_search asserts the capability error
    await store.put_batch([(ns, f"k{i:02}", {"t": f"apple note {i}"}, None) for i in range(12)])
    found = await store.search(ns, "apple zzzz", limit=3)
    assert len(found) == 3 and all("apple" in item.value["t"] for item in found)
    [many] = await store.search_many([ns], "zzzz apple", limit=3)
    assert len(many) == 3 and all("apple" in item.value["t"] for item in many)
