"""The stores that take ``embedder=`` (InMemoryStore, HolographicStore): BM25 fused with
the embedder's cosine, so a query finds an item by a word or by its meaning."""

from __future__ import annotations

import pytest

from tests.store.concepts import ConceptEmbedding
from tulip_memory.embeddings import HRREmbedding
from tulip_memory.exceptions import EmbeddingError
from tulip_memory.store import HolographicStore, InMemoryStore

NS = ("t", "notes")

STORES = {
    "memory": lambda embedder: InMemoryStore(embedder=embedder),
    "holographic": lambda embedder: HolographicStore(embedder=embedder),
}


@pytest.fixture(params=sorted(STORES))
def make(request):
    return STORES[request.param]


async def _hybrid_store(make, embedder=None):
    store = make(embedder or ConceptEmbedding(64))
    await store.put_batch(
        [(NS, f"filler{i}", f"note {i} about weather and trains", None) for i in range(60)]
    )
    await store.put(NS, "meaning", "Luna is my cat")  # no word of the query below
    await store.put(NS, "word", "the zebra crossing by the station")
    return store


async def test_with_an_embedder_a_word_only_and_a_meaning_only_match_are_both_found(make):
    store = await _hybrid_store(make)
    found = [i.key for i in await store.search(NS, "kitten zebra", limit=2)]
    assert sorted(found) == ["meaning", "word"]
    [many] = await store.search_many([NS], "kitten zebra", limit=2)
    assert sorted(i.key for i in many) == ["meaning", "word"]
    # Without the embedder only the word match can be found.
    lexical = make(None)
    await lexical.put(NS, "meaning", "Luna is my cat")
    await lexical.put(NS, "word", "the zebra crossing by the station")
    assert [i.key for i in await lexical.search(NS, "kitten zebra")] == ["word"]


async def test_with_an_embedder_a_stop_word_query_ranks_by_meaning_and_bad_embedders_are_refused(
    make,
):
    store = await _hybrid_store(make)
    # "what is it" has no term; its vector is near nothing in particular, so the search
    # still answers (no error) with `limit` items.
    assert len(await store.search(NS, "what is it?", limit=5)) == 5
    assert [i.key for i in await store.search(NS, "a feline?", limit=1)] == ["meaning"]
    with pytest.raises(TypeError, match="embedder must be a BaseEmbedding"):
        make("wordllama")


async def test_a_word_match_outside_the_nearest_pool_still_counts_its_meaning(make):
    """Each candidate is fused with both its scores: two items with the same BM25 that are
    not among the embedder's nearest ``max(50, 5 * limit)`` are ordered by their cosine,
    not left tied at a vector part of 0 (which would put the newer one first)."""
    store = make(ConceptEmbedding(64))
    # 60 items nearer to the query by meaning than either word match, sharing no word.
    await store.put_batch([(NS, f"feline{i}", "feline feline", None) for i in range(60)])
    await store.put(NS, "cat", "zebra cat alpha beta gamma")  # cosine 0.63 to the query
    await store.put(NS, "dog", "zebra dog alpha beta gamma")  # 0.32, same BM25, newer
    found = [i.key for i in await store.search(NS, "zebra kitten", limit=2)]
    assert found == ["cat", "dog"]


async def test_an_embedder_that_fails_on_a_query_leaves_the_search_to_words(make, caplog):
    """An embedding service that is down (EmbeddingError) does not fail a search: it ranks
    by BM25 alone, with a warning; once back, by meaning too."""
    embedder = FailingConcepts(64)
    store = await _hybrid_store(make, embedder)
    embedder.down = True
    with caplog.at_level("WARNING", logger="tulip_memory.store"):
        found = [i.key for i in await store.search(NS, "kitten zebra", limit=2)]
        [many] = await store.search_many([NS], "kitten zebra", limit=2)
    assert found == ["word"] and [i.key for i in many] == ["word"]
    assert "the embedder failed on a query (service down)" in caplog.text
    embedder.down = False
    assert sorted(i.key for i in await store.search(NS, "kitten zebra", limit=2)) == [
        "meaning",
        "word",
    ]


class FailingConcepts(ConceptEmbedding):
    """ConceptEmbedding whose queries fail while ``down`` (its writes are done before)."""

    down = False

    async def embed_batch(self, texts: list[str]) -> list[list[float]]:
        if self.down:
            raise EmbeddingError("service down", kind="server_error")
        return await super().embed_batch(texts)


async def test_values_and_queries_without_words_need_no_vector(make):
    """HRR encodes words only: a value of punctuation or emoji is stored without a vector
    (found by its key, never by a query), and such a query lists the newest items."""
    store = make(HRREmbedding(64))
    await store.put(NS, "words", "the zebra crossing")
    await store.put(NS, "bang", "!!!")
    await store.put_batch([(NS, "smile", "🙂 🙂", None), (NS, "more", "zebra stripes", None)])
    assert await store.get(NS, "bang") == "!!!"
    if store.capabilities.semantic_search:
        assert await store.get_embedding(NS, "bang") is None
    assert [i.key for i in await store.search(NS, "zebra")][:2] in (
        ["words", "more"],
        ["more", "words"],
    )
    assert [i.key for i in await store.search(NS, "?!", limit=2)] == ["more", "smile"]
    await store.close()
