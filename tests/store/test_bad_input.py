"""Bad input gets one clear ValueError in every store, naming the argument; nothing is written.

Runs over every backend of the contract suite (``store`` fixture): deeply nested JSON,
limits beyond any database integer, and lone surrogates in every text argument.
"""

from __future__ import annotations

import pytest

from tulip_memory.core.paging import MAX_LIMIT
from tulip_memory.store.validation import MAX_JSON_DEPTH


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


async def _snapshot(store, ns):
    keys = await store.list_keys(ns)
    return {key: await store.get_item(ns, key) for key in keys}


async def test_json_nested_deeper_than_the_bound_is_refused_and_writes_nothing(store, root):
    ns = (root, "deep")
    await store.put(ns, "kept", {"v": 1})
    before = await _snapshot(store, ns)
    for depth in (MAX_JSON_DEPTH + 1, 1_000, 5_000):
        with pytest.raises(ValueError, match=r"value is nested more than 128 levels deep"):
            await store.put(ns, "kept", _nested(depth))
        with pytest.raises(ValueError, match=r"metadata is nested more than"):
            await store.put(ns, "new", 1, metadata={"m": _nested(depth)})
        with pytest.raises(ValueError, match=r"items\[0\].*nested more than"):
            await store.put_batch([(ns, "new", _nested(depth))])
    assert await _snapshot(store, ns) == before


async def test_json_nested_exactly_at_the_bound_is_stored(store, root):
    ns = (root, "deep")
    await store.put(ns, "edge", _nested(MAX_JSON_DEPTH))
    assert await store.get(ns, "edge") == _nested(MAX_JSON_DEPTH)


@pytest.mark.parametrize("limit", [2**63, 2**100])
async def test_huge_limits_are_clamped_in_every_read(store, root, limit):
    ns = (root, "limits")
    await store.put(ns, "a", {"text": "tulips in spring"})
    assert await store.list_keys(ns, limit=limit) == ["a"]
    if store.capabilities.search:
        assert [item.key for item in await store.search(ns, "tulips", limit=limit)] == ["a"]
    if store.capabilities.list_namespaces:
        assert (root, "limits") in await store.list_namespaces(limit=limit)
    assert MAX_LIMIT == 2**31 - 1


SURROGATE = "\ud800"


async def test_lone_surrogates_are_refused_naming_the_argument(store, root):
    ns = (root, "text")
    await store.put(ns, "kept", {"text": "ok"})
    before = await _snapshot(store, ns)
    cases = [
        (lambda: store.put(ns, f"k{SURROGATE}", 1), r"key must be valid Unicode"),
        (lambda: store.put((root, SURROGATE), "k", 1), r"namespace\[1\] must be valid Unicode"),
        (lambda: store.put(ns, "kept", {"text": SURROGATE}), r"value must be valid Unicode"),
        (lambda: store.put(ns, "kept", {SURROGATE: 1}), r"value must be valid Unicode"),
        (lambda: store.put(ns, "kept", 1, metadata={"m": SURROGATE}), "metadata must be valid"),
    ]
    if store.capabilities.search:
        cases.append(
            (lambda: store.search(ns, f"tulips {SURROGATE}"), r"query must be valid Unicode")
        )
    for call, match in cases:
        with pytest.raises(ValueError, match=match):
            await call()
    assert await _snapshot(store, ns) == before


@pytest.mark.parametrize(
    ("metadata_filter", "problem"),
    [
        ({"score": float("nan")}, "not JSON-serialisable"),
        ({"score": float("inf")}, "not JSON-serialisable"),
        ({"tag": "a\x00b"}, "NUL"),
        ({1: "a"}, "key"),
        ({"tag": "\ud800"}, "lone surrogate"),
        ({"tag": _nested(MAX_JSON_DEPTH + 1)}, "nested more than"),
    ],
    ids=["nan", "infinity", "nul", "non-string-key", "surrogate", "too-deep"],
)
async def test_a_bad_metadata_filter_is_refused_by_name(store, root, metadata_filter, problem):
    if not store.capabilities.semantic_search:
        return  # search_by_embedding raises StoreCapabilityError (the contract tests it)
    ns = (root, "filter")
    width = store.capabilities.embedding_dimension or 4
    await store.put_with_embedding(ns, "k", {"v": 1}, [1.0] * width, metadata={"tag": "a"})
    with pytest.raises(ValueError, match=rf"metadata_filter.*{problem}") as caught:
        await store.search_by_embedding(ns, [1.0] * width, metadata_filter=metadata_filter)
    assert "metadata_filter" in str(caught.value)
    assert [hit.item.key for hit in await store.search_by_embedding(ns, [1.0] * width)] == ["k"]


async def test_a_value_with_a_megabyte_of_distinct_words_is_stored_whole_and_found(store, root):
    """Over PostgreSQL's 1 MB tsvector limit if every word were indexed: PgMemory keeps the
    value whole and indexes the words of its first 256 KiB (SEARCH_TEXT_MAX_BYTES)."""
    ns = (root, "big")
    text = " ".join(f"w{i}" for i in range(150_000))  # 1.09 MB, 150,000 distinct words
    await store.put(ns, "big", {"text": text})
    await store.put(ns, "small", {"text": "w7 again"})
    assert (await store.get(ns, "big")) == {"text": text}
    if store.capabilities.search:
        assert {item.key for item in await store.search(ns, "w7", limit=5)} == {"big", "small"}
    await store.put(ns, "big", {"text": text + " tail"})  # an update of such a value
    assert (await store.get(ns, "big"))["text"].endswith(" tail")
