"""Embedders: the HRR embedder, WordLlama (real weights, no network), selection by settings."""

from __future__ import annotations

import math

import pytest
from django.test import override_settings

from tulip_memory.embeddings import BaseEmbedding, HRREmbedding, get_embedder, load_embedder
from tulip_memory.exceptions import ConfigurationError
from tulip_memory.store import HolographicStore


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


async def test_hrr_embedding_is_deterministic_and_lexical():
    embedder = HRREmbedding(dim=128)
    assert embedder.dimension == 256
    a, b, c = await embedder.embed_batch(["green tea", "tea, GREEN", "red car"])
    assert len(a) == 256
    assert a == b
    assert cosine(a, c) < 0.2
    assert await embedder.embed("green tea") == a


@pytest.mark.parametrize(
    ("texts", "message"),
    [(["ok", ""], r"texts\[1\] is empty"), (["  "], "is empty"), ([3], "must be a str")],
)
async def test_unusable_texts_are_refused(texts, message):
    with pytest.raises(ValueError, match=message):
        await HRREmbedding(dim=8).embed_batch(texts)


async def test_hrr_embedding_refuses_text_without_words():
    with pytest.raises(ValueError, match="no word"):
        await HRREmbedding(dim=8).embed("?!")
    with pytest.raises(ValueError, match="dim must be"):
        HRREmbedding(dim=0)


@pytest.fixture
def offline_wordllama(monkeypatch):
    """Any attempt to download from the model hub fails the test (a guard, not a double)."""
    import wordllama.wordllama as module

    from tulip_memory.embeddings import wordllama as ours

    def no_network(*args, **kwargs):
        raise AssertionError(f"WordLlama tried to download: {args}")

    monkeypatch.setattr(module.requests, "get", no_network)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    ours._load_model.cache_clear()
    yield ours.WordLlamaEmbedding
    ours._load_model.cache_clear()


async def test_wordllama_ranks_a_paraphrase_above_an_unrelated_text(offline_wordllama):
    embedder = offline_wordllama()
    assert isinstance(embedder, BaseEmbedding)
    assert embedder.dimension == 256
    query, paraphrase, unrelated = await embedder.embed_batch(
        [
            "The user prefers a dark colour scheme",
            "Likes dark mode in the interface",
            "The quarterly tax report is due in April",
        ]
    )
    assert len(query) == 256
    assert math.isclose(sum(x * x for x in query), 1.0, rel_tol=1e-4)
    assert cosine(query, paraphrase) > cosine(query, unrelated) + 0.2


async def test_wordllama_in_a_store_finds_paraphrases(offline_wordllama):
    embedder = offline_wordllama()
    store = HolographicStore()
    ns = ("t", "memories")
    texts = {
        "theme": "User likes dark mode in the interface",
        "tax": "The quarterly tax report is due in April",
        "pet": "The user has a cat named Miso",
    }
    vectors = await embedder.embed_batch(list(texts.values()))
    for (key, text), vector in zip(texts.items(), vectors, strict=True):
        await store.put_with_embedding(ns, key, {"text": text}, vector)
    query = await embedder.embed("which colour scheme does the user prefer")
    results = await store.search_by_embedding(ns, query)
    assert results[0].item.key == "theme"
    big_batch = await embedder.embed_batch(["a kitten"] * 300)  # runs in a worker thread
    assert len(big_batch) == 300
    await store.close()


def test_wordllama_needs_known_weights(offline_wordllama):
    with pytest.raises(ValueError, match="dimension"):
        offline_wordllama(dim=333)


def test_no_embedder_configured_means_none():
    assert get_embedder() is None


@override_settings(
    TULIP_MEMORY={
        "EMBEDDER": "tulip_memory.embeddings.HRREmbedding",
        "EMBEDDER_OPTIONS": {"dim": 16},
    }
)
def test_embedder_from_settings():
    embedder = get_embedder()
    assert isinstance(embedder, HRREmbedding)
    assert embedder.dimension == 32


@override_settings(TULIP_MEMORY={"EMBEDDER": "tulip_memory.store.InMemoryStore"})
def test_embedder_setting_must_build_an_embedder():
    with pytest.raises(ConfigurationError, match="not a BaseEmbedding"):
        get_embedder()


@override_settings(
    TULIP_MEMORY={"EMBEDDER": "tulip_memory.embeddings.HRREmbedding", "EMBEDDER_OPTIONS": [1]}
)
def test_embedder_options_must_be_a_dict():
    with pytest.raises(ConfigurationError, match="EMBEDDER_OPTIONS"):
        get_embedder()


def test_load_embedder_accepts_a_factory():
    assert load_embedder(lambda: HRREmbedding(dim=4)).dimension == 8
    with pytest.raises(ConfigurationError, match="not a class or a factory"):
        load_embedder(42)
