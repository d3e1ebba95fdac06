"""The contract of a store built with ``embedder=``, on every backend taking one.

What an embedder answers is checked as a caller's vector is: a vector of the wrong width
or with NaN refuses the write (``ValueError``, nothing stored) and, for a query, leaves the
search to words with a warning, as an ``EmbeddingError`` does; an all-zero vector means
"no vector" (the item is stored and ranked by its words, the query ranks by words); an
``embed_batch`` answering another number of vectors than texts is named as such.
"""

from __future__ import annotations

import math

import pytest

from tests.store.concepts import ConceptEmbedding
from tests.store.conftest import STORE_FACTORIES

# The backends whose store takes ``embedder=`` (MinimalStore does not).
EMBEDDER_BACKENDS = ["holographic-file", "holographic-memory", "memory", "pg", "pg-prepared"]

WIDTH = 1024  # PgMemory's column (VECTOR_DIMENSIONS) in the test settings

WRONG_VECTORS = [
    ([1.0] * 3, f"the embedder's vector has 3 dimensions, the store expects {WIDTH}"),
    ([math.nan] * WIDTH, r"the embedder's vector\[0\] must be finite, got nan"),
]


class ScriptedEmbedding(ConceptEmbedding):
    """ConceptEmbedding, except for the texts of ``script``: their vector is given."""

    def __init__(self, script: dict[str, list[float]]) -> None:
        super().__init__(WIDTH)
        self.script = script

    async def embed_batch(self, texts: list[str]) -> list[list[float]]:
        return [self.script.get(text) or self.vector(text) for text in self.check_texts(texts)]


class ShortEmbedding(ConceptEmbedding):
    """An embedder answering one vector fewer than it was given texts."""

    async def embed_batch(self, texts: list[str]) -> list[list[float]]:
        return [self.vector(text) for text in self.check_texts(texts)][:-1]


@pytest.fixture(params=EMBEDDER_BACKENDS)
async def make_store(request):
    """Builds a store of the parametrised backend with the given embedder (closed after)."""
    stores = []

    def make(embedder):
        stores.append(STORE_FACTORIES[request.param](request, embedder=embedder))
        return stores[-1]

    yield make
    for store in stores:
        await store.close()


async def _keys(results):
    return [item.key for item in await results]


@pytest.mark.parametrize(("vector", "message"), WRONG_VECTORS)
async def test_an_embedder_vector_of_the_wrong_width_or_not_finite_refuses_the_write(
    make_store, root, vector, message
):
    store = make_store(ScriptedEmbedding({"broken words": vector}))
    ns = (root, "notes")
    await store.put(ns, "tea", "green tea")
    with pytest.raises(ValueError, match=message):
        await store.put(ns, "bad", "broken words")
    with pytest.raises(ValueError, match=message):
        await store.put_batch([(ns, "more", "more tea", None), (ns, "bad", "broken words", None)])
    assert await store.list_keys(ns) == ["tea"]
    # The namespace still answers searches.
    assert await _keys(store.search(ns, "tea")) == ["tea"]


async def test_an_all_zero_embedder_vector_stores_the_item_without_a_vector(make_store, root):
    store = make_store(ScriptedEmbedding({"zzz unknown": [0.0] * WIDTH}))
    ns = (root, "notes")
    await store.put(ns, "odd", "zzz unknown")
    await store.put_batch([(ns, "odd2", "zzz unknown", None), (ns, "tea", "green tea", None)])
    assert await store.get(ns, "odd") == "zzz unknown"
    if store.capabilities.semantic_search:
        assert await store.get_embedding(ns, "odd") is None
        assert await store.get_embedding(ns, "odd2") is None
        assert await store.get_embedding(ns, "tea") is not None
    assert sorted(await _keys(store.search(ns, "unknown", limit=2))) == ["odd", "odd2"]


async def test_an_all_zero_query_vector_ranks_by_words(make_store, root):
    zeros = [0.0] * WIDTH
    store = make_store(ScriptedEmbedding({"tea": zeros, "what is it?": zeros}))
    ns = (root, "notes")
    await store.put(ns, "tea", "green tea")
    await store.put(ns, "car", "red car")
    assert await _keys(store.search(ns, "tea")) == ["tea"]
    [many] = await store.search_many([ns], "tea")
    assert [item.key for item in many] == ["tea"]
    # No vector and no word to rank by: the newest items, as a query without words.
    assert await _keys(store.search(ns, "what is it?")) == ["car", "tea"]


@pytest.mark.parametrize(("vector", "message"), WRONG_VECTORS)
async def test_a_query_vector_of_the_wrong_width_or_not_finite_ranks_by_words_with_a_warning(
    make_store, root, caplog, vector, message
):
    store = make_store(ScriptedEmbedding({"tea": vector}))
    ns = (root, "notes")
    await store.put(ns, "tea", "green tea")
    await store.put(ns, "car", "red car")
    with caplog.at_level("WARNING", logger="tulip_memory.store"):
        assert await _keys(store.search(ns, "tea")) == ["tea"]
        [many] = await store.search_many([ns], "tea")
    assert [item.key for item in many] == ["tea"]
    assert "the embedder failed on a query (the embedder's vector" in caplog.text
    assert "this search ranks by words only" in caplog.text


async def test_an_embedder_answering_too_few_vectors_is_named(make_store, root, caplog):
    store = make_store(ShortEmbedding(WIDTH))
    ns = (root, "notes")
    with pytest.raises(ValueError, match="the embedder ShortEmbedding returned 1 vectors for 2"):
        await store.put_batch([(ns, "tea", "green tea", None), (ns, "car", "red car", None)])
    with pytest.raises(ValueError, match="the embedder ShortEmbedding returned 0 vectors for 1"):
        await store.put(ns, "tea", "green tea")
    assert await store.list_keys(ns) == []
    with caplog.at_level("WARNING", logger="tulip_memory.store"):
        assert await store.search(ns, "tea") == []
    assert "returned 0 vectors for 1 texts); this search ranks by words only" in caplog.text
