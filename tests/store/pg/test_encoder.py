"""PgMemory's encoder choice: the configured TULIP_MEMORY["EMBEDDER"], or HRR on request.

The configured embedder in these tests is ``HRREmbedding(dim=512)``: a real embedder of
the column's width (1024) whose source (``embedder:...HRREmbedding``) differs from the
store's own HRR encoding (``hrr``), so a change of embedder is seen without a model.
"""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import async_to_sync
from django.db import connection
from django.test import override_settings

from tests.store.concepts import ConceptEmbedding
from tulip_memory.embeddings import HRR, HRREmbedding
from tulip_memory.exceptions import ConfigurationError
from tulip_memory.manager.factory import (
    build_memory_manager_from_settings,
    build_store_from_settings,
)
from tulip_memory.models.store import MemoryItem
from tulip_memory.store import PgMemory
from tulip_memory.store.pg.reembed import Reembedder, foreign_sources
from tulip_memory.tenancy import tenant_atomic

sync = async_to_sync
CONFIGURED = {"EMBEDDER": "tulip_memory.embeddings.HRREmbedding", "EMBEDDER_OPTIONS": {"dim": 512}}
CONFIGURED_SOURCE = "embedder:tulip_memory.embeddings.hrr.HRREmbedding"


def test_without_embedder_the_configured_one_is_used():
    assert PgMemory().encoder.source == "hrr"  # nothing configured: HRR
    with override_settings(TULIP_MEMORY=CONFIGURED):
        store = PgMemory()
        assert isinstance(store.encoder.embedder, HRREmbedding)
        assert store.encoder.source == CONFIGURED_SOURCE
        forced = PgMemory(embedder=HRR)
        assert forced.encoder.embedder is None and forced.encoder.source == "hrr"
        given = HRREmbedding(dim=512)
        assert PgMemory(embedder=given).encoder.embedder is given


def test_bad_embedder_arguments_and_settings_are_refused():
    with pytest.raises(ValueError, match="got the string 'wordllama'"):
        PgMemory(embedder="wordllama")
    with pytest.raises(ValueError, match="must be a BaseEmbedding, None or 'hrr', got int"):
        PgMemory(embedder=42)
    narrow = {**CONFIGURED, "EMBEDDER_OPTIONS": {"dim": 64}}
    with (
        override_settings(TULIP_MEMORY=narrow),
        pytest.raises(ConfigurationError, match=r"VECTOR_DIMENSIONS'] is 1024.*128 dimensions"),
    ):
        PgMemory()
    missing = {"EMBEDDER": "tulip_memory.nowhere.Embedder"}
    with override_settings(TULIP_MEMORY=missing), pytest.raises(ImportError):
        PgMemory()


@pytest.mark.django_db
def test_items_written_before_the_embedder_changed_keep_their_source_and_are_found():
    ns = ("acme", "notes")
    sync(PgMemory(embedder=HRR).put)(ns, "old", {"text": "likes green tea"})
    with override_settings(TULIP_MEMORY=CONFIGURED):
        store = PgMemory()
        sync(store.put)(ns, "new", {"text": "prefers dark mode"})
        with tenant_atomic("acme"):
            sources = dict(MemoryItem.objects.values_list("key", "embedding_source"))
        assert sources == {"old": "hrr", "new": CONFIGURED_SOURCE}
        found = [item.key for item in sync(store.search)(ns, query="green tea")]
        assert "old" in found


class StoreTakingAnEmbedder:
    """A store class of the settings that takes ``embedder=`` (like InMemoryStore may)."""

    def __init__(self, *, embedder=None, label="x"):
        self.embedder = embedder
        self.label = label


def test_stores_built_from_settings_get_the_configured_embedder():
    path = f"{__name__}.StoreTakingAnEmbedder"
    with override_settings(TULIP_MEMORY={**CONFIGURED, "STORE": path}):
        assert isinstance(build_store_from_settings().embedder, HRREmbedding)
    with override_settings(
        TULIP_MEMORY={**CONFIGURED, "STORE": path, "STORE_OPTIONS": {"embedder": None}}
    ):
        assert build_store_from_settings().embedder is None  # STORE_OPTIONS wins
    with override_settings(TULIP_MEMORY={"STORE": path}):
        assert build_store_from_settings().embedder is None  # nothing configured
    with override_settings(TULIP_MEMORY=CONFIGURED):
        store = build_memory_manager_from_settings().store
        assert isinstance(store, PgMemory) and store.encoder.source == CONFIGURED_SOURCE


@pytest.mark.django_db(transaction=True)
def test_an_embedding_outage_ranks_queries_by_words_and_refuses_writes(caplog):
    """OpenAIEmbedding against the embeddings TEST DOUBLE (tests/embeddings), answering 503
    while "down": a search still answers, by words; a write fails and stores nothing."""
    from tests.embeddings.embeddings_server import EmbeddingServerDouble
    from tests.llm.chat_server import Reply
    from tulip_memory.embeddings import OpenAIEmbedding
    from tulip_memory.exceptions import EmbeddingError

    ns = ("acme", "notes")
    with EmbeddingServerDouble(width=1024) as server:
        embedder = OpenAIEmbedding(
            "test-embed", 1024, base_url=server.url, max_retries=0, retry_backoff=0.01
        )
        store = PgMemory(embedder=embedder, encoding_cache=0)
        sync(store.put)(ns, "tea", {"text": "likes green tea"})
        sync(store.put)(ns, "mode", {"text": "prefers dark mode"})
        server.add(Reply(status=503), Reply(status=503))
        with caplog.at_level("WARNING", logger="tulip_memory.store"):
            found = [item.key for item in sync(store.search)(ns, query="green tea")]
        assert found == ["tea"]
        assert "the embedder failed on a query" in caplog.text and "HTTP 503" in caplog.text
        assert "re-put them" not in caplog.text  # not the warning about rows without vectors
        with pytest.raises(EmbeddingError, match="HTTP 503"):
            sync(store.put)(ns, "tea", {"text": "likes black tea"})
        assert sync(store.get)(ns, "tea") == {"text": "likes green tea"}
        # Back up: ranked by words and vectors again (both items, the second by vector).
        caplog.clear()
        assert [item.key for item in sync(store.search)(ns, query="green tea")] == ["tea", "mode"]
        assert "the embedder failed" not in caplog.text


class ZerosForUnknownWords(ConceptEmbedding):
    """An embedder that finds nothing in a text holding "unknown": an all-zero vector
    (what a model gives a text of tokens it does not know)."""

    def __init__(self) -> None:
        super().__init__(1024)

    async def embed_batch(self, texts: list[str]) -> list[list[float]]:
        return [
            [0.0] * 1024 if "unknown" in text else self.vector(text)
            for text in self.check_texts(texts)
        ]


@pytest.mark.django_db
def test_rows_the_embedder_gives_all_zeros_have_no_vector_and_are_never_reembedded():
    """Stored without a vector and source '': not another encoder's rows (W020) and not
    selected by tulip_memory_reembed, which writes such a row the same way."""
    ns = ("acme", "notes")
    sync(PgMemory(embedder=HRR).put)(ns, "old", "unknown old glyphs")  # HRR: a vector
    store = PgMemory(embedder=ZerosForUnknownWords(), encoding_cache=0)
    sync(store.put)(ns, "odd", "unknown glyphs")
    sync(store.put_batch)([(ns, "odd2", "unknown words", None), (ns, "tea", "green tea", None)])
    source = store.encoder.source
    reembedder = Reembedder(store.encoder, loop=(loop := asyncio.new_event_loop()))
    try:
        with tenant_atomic("acme"):
            assert foreign_sources(connection, source) == {"hrr": 1}
        assert reembedder.counts("acme") == (1, 1)
        report = reembedder.run("acme", lambda report: None)
        assert (report.reembedded, report.without_words) == (0, 1)
        assert reembedder.counts("acme") == (0, 1)
    finally:
        loop.close()
    with tenant_atomic("acme"):
        assert foreign_sources(connection, source) == {}
        rows = MemoryItem.objects.values_list("key", "embedding_source", "embedding")
        stored = {key: (source, vector is None) for key, source, vector in rows}
    assert stored == {
        "old": ("", True),
        "odd": ("", True),
        "odd2": ("", True),
        "tea": (source, False),
    }
    assert [item.key for item in sync(store.search)(ns, "glyphs", limit=2)] == ["odd", "old"]
