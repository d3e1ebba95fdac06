"""HolographicStore beyond the contract: the file, threads and loops, ranking."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from tests.processes import run_in_threads
from tests.store.concepts import ConceptEmbedding
from tulip_memory.core import hrr
from tulip_memory.core.text import tokenize, value_text
from tulip_memory.store import HolographicStore, StoreCapabilityError

NS = ("t", "notes")
CORPUS = {
    "tea": "green tea with jasmine every morning",
    "coffee": "black coffee every morning before work",
    "jasmine": "jasmine flowers in the garden",
    "garden": "the garden needs water every evening",
    "rare": "oolong",
    "mix": "oolong tea in the garden every morning",
}


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "memory.sqlite3"


async def test_file_is_in_wal_mode(path):
    store = HolographicStore(path)
    await store.put(NS, "k", "v")
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    await store.close()


async def test_data_persists_across_instances(path):
    first = HolographicStore(path)
    await first.put(NS, "k", {"text": "likes tulips"}, {"src": "chat"})
    item = await first.get_item(NS, "k")
    await first.close()

    second = HolographicStore(path)
    assert await second.get_item(NS, "k") == item
    assert [i.key for i in await second.search(NS, "tulips")] == ["k"]
    assert await second.list_namespaces() == [NS]
    await second.put(NS, "k", {"text": "likes roses"})
    assert (await second.get_item(NS, "k")).version == 2
    assert await second.search(NS, "tulips") == []
    await second.close()


async def test_two_open_instances_share_the_file(path):
    writer, reader = HolographicStore(path), HolographicStore(path)
    await writer.put(NS, "k", 1)
    assert await reader.get(NS, "k") == 1
    await reader.put(NS, "k", 2)
    assert (await writer.get_item(NS, "k")).version == 2
    await writer.close()
    await reader.close()


async def test_close_releases_the_file(path):
    store = HolographicStore(path)
    await store.put(NS, "k", "v")
    await store.close()
    assert not Path(f"{path}-wal").exists()  # the last connection checkpointed and left
    with pytest.raises(RuntimeError, match="closed"):
        await store.get(NS, "k")
    path.unlink()
    assert not path.exists()


def test_a_path_that_is_not_one_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for bad in (None, "", 42):
        with pytest.raises(ValueError, match="path must be a file path or ':memory:'"):
            HolographicStore(bad)
    assert list(tmp_path.iterdir()) == []  # no file named "None" or "42"


async def test_dims_are_checked_and_remembered(path):
    with pytest.raises(ValueError, match="dim must be an int >= 1"):
        HolographicStore(path, dim=0)
    with pytest.raises(ValueError, match="embedding_dim"):
        HolographicStore(path, embedding_dim=-3)
    store = HolographicStore(path, dim=64)
    await store.put_with_embedding(NS, "k", "v", [1.0, 2.0, 3.0])
    assert store.capabilities.embedding_dimension == 3
    await store.close()
    with pytest.raises(ValueError, match="dim=64"):
        HolographicStore(path, dim=128)
    with pytest.raises(ValueError, match="embeddings of width 3"):
        HolographicStore(path, dim=64, embedding_dim=4)
    reopened = HolographicStore(path, dim=64)
    assert reopened.capabilities.embedding_dimension == 3
    with pytest.raises(ValueError, match="has 2 dimensions, the store expects 3"):
        await reopened.put_with_embedding(NS, "k2", "v", [1.0, 2.0])
    await reopened.close()


async def test_put_batch_is_one_transaction():
    store = HolographicStore()
    statements: list[str] = []
    store._connection().set_trace_callback(statements.append)
    await store.put_batch([(NS, f"k{i}", i, None) for i in range(10)])
    assert statements.count("BEGIN IMMEDIATE") == 1
    assert statements.count("COMMIT") == 1
    assert len(await store.list_keys(NS)) == 10
    await store.close()


def test_threads_with_their_own_event_loops(path):
    store = HolographicStore(path)

    async def worker(n: int) -> None:
        for i in range(25):
            await store.put(NS, "shared", {"writer": n, "i": i})
            await store.put(("t", f"w{n}"), f"k{i}", f"note {i} from writer {n}")
            await store.search(NS, "writer")

    assert run_in_threads(lambda n: asyncio.run(worker(n)), 4) == []

    async def check() -> None:
        assert (await store.get_item(NS, "shared")).version == 100
        for n in range(4):
            assert len(await store.list_keys(("t", f"w{n}"))) == 25
        await store.close()

    asyncio.run(check())


async def _corpus_store() -> HolographicStore:
    store = HolographicStore(dim=256)
    for key, text in CORPUS.items():
        await store.put(NS, key, {"text": text})
    return store


async def test_default_ranking_is_bm25_and_fused_rescores_its_candidates_with_hrr():
    store = await _corpus_store()
    query = "oolong tea garden morning"
    lexical = [item.key for item in await store.search(NS, query, mode="lexical", limit=50)]
    assert set(lexical) == set(CORPUS)  # every text shares a word with the query
    assert [item.key for item in await store.search(NS, query, limit=50)] == lexical
    assert lexical[0] == "mix"  # holds every query word
    assert lexical.index("rare") < lexical.index("coffee")  # "oolong" is rarer than "morning"
    conn = store._connection()
    bm25 = dict(
        conn.execute(
            "SELECT i.key, -bm25(tulip_items_fts, 0.0, 1.0) FROM tulip_items_fts f "
            "JOIN tulip_items i ON i.rowid = f.rowid WHERE tulip_items_fts MATCH ?",
            ['content : ("oolong" OR "tea" OR "garden" OR "morning")'],
        ).fetchall()
    )
    words = sorted({"oolong", "tea", "garden", "morning"})
    query_phases = hrr.encode_tokens(words, 256)

    def fused(key: str) -> float:
        phases = hrr.encode_tokens(tokenize(CORPUS[key]), 256)
        return bm25[key] / max(bm25.values()) + 0.3 * hrr.similarity(query_phases, phases)

    expected = sorted(lexical, key=lambda key: (-fused(key), lexical.index(key)))
    assert [item.key for item in await store.search(NS, query, mode="fused")] == expected
    await store.close()


async def test_stemming_and_stop_words():
    store = HolographicStore(dim=64)
    await store.put(NS, "liked", "Melanie liked pottery")
    await store.put(NS, "other", "the weather is what it is")
    for mode in ("lexical", "fused"):
        found = await store.search(NS, "who likes potteries?", mode=mode)
        assert [i.key for i in found] == ["liked"]
    # A query of stop words only has no words: the newest items, as without a query.
    assert [i.key for i in await store.search(NS, "what is it?")] == ["other", "liked"]
    await store.close()


async def test_a_file_indexed_without_stemming_is_rebuilt_on_open(path):
    # A file as HolographicStore wrote it before stemming: an unstemmed unicode61 index.
    store = HolographicStore(path, dim=64)
    await store.put(NS, "liked", "Melanie liked pottery")
    await store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE tulip_items_fts")
        conn.execute(
            "CREATE VIRTUAL TABLE tulip_items_fts USING fts5(scope, content, "
            "content='tulip_items', content_rowid='rowid', "
            "tokenize='unicode61 remove_diacritics 0')"
        )
        conn.execute("INSERT INTO tulip_items_fts (tulip_items_fts) VALUES ('rebuild')")
    with sqlite3.connect(path) as conn:
        match = "SELECT count(*) FROM tulip_items_fts WHERE tulip_items_fts MATCH 'like'"
        assert conn.execute(match).fetchone()[0] == 0  # "liked" is not "like" there
    store = HolographicStore(path, dim=64)
    assert [i.key for i in await store.search(NS, "likes")] == ["liked"]
    await store.put(NS, "new", "she likes pottery too")  # the triggers feed the new index
    assert sorted(i.key for i in await store.search(NS, "like")) == ["liked", "new"]
    await store.close()
    with sqlite3.connect(path) as conn:
        schema = conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'tulip_items_fts'"
        ).fetchone()[0]
    assert "porter" in schema
    reopened = HolographicStore(path, dim=64)  # already stemmed: opened as it is
    assert len(await reopened.search(NS, "liking")) == 2
    await reopened.close()


async def test_hrr_mode_scans_the_whole_namespace():
    store = await _corpus_store()
    ranked = [item.key for item in await store.search(NS, "jasmine garden", mode="hrr", limit=10)]
    assert sorted(ranked) == sorted(CORPUS)  # every item, matching or not
    assert ranked[0] == "jasmine"
    with pytest.raises(ValueError, match="mode must be one of"):
        await store.search(NS, "x", mode="semantic")
    await store.close()


async def test_hrr_mode_breaks_ties_newest_first_then_key():
    store = HolographicStore(dim=64)
    for key in ("k2", "k0", "k3", "k1", "k0"):  # k0 written again: the newest
        await store.put(NS, key, "green tea")
    ranked = [item.key for item in await store.search(NS, "tea", mode="hrr", limit=3)]
    assert ranked == ["k0", "k1", "k3"]
    await store.close()


async def test_search_returns_only_items_sharing_a_term():
    store = await _corpus_store()
    found = [item.key for item in await store.search(NS, "coffee evening")]
    assert sorted(found) == ["coffee", "garden"]
    for item in found:
        assert {"coffee", "evening"} & set(tokenize(value_text(CORPUS[item])))
    many = await store.search_many([NS, ("t", "other")], "coffee", limit=1)
    assert [[i.key for i in hits] for hits in many] == [["coffee"], []]
    await store.close()


async def test_over_the_row_budget_the_rarest_matching_words_are_kept(monkeypatch):
    """In a namespace over the row budget (made 10 here) the query keeps its rarest words
    that match, up to the budget; a word matching nothing is no candidate, and a query
    of such words only finds nothing. A left-out common word is not searched: the result
    holds only the items of the kept words, fewer than ``limit`` (docs/store.md)."""
    monkeypatch.setattr("tulip_memory.store.holographic.fts.ROW_BUDGET", 10)
    store = HolographicStore()
    await store.put_batch([(NS, f"a{i:02}", f"apple note {i}", None) for i in range(12)])
    await store.put_batch([(NS, f"b{i}", f"banana {i}", None) for i in range(2)])
    assert len(await store.search(NS, "apple zzzz", limit=3)) == 3
    assert await store.search(NS, "zzzz qqqq") == []
    assert [item.key for item in await store.search(NS, "apple banana", limit=3)] == ["b1", "b0"]
    await store.close()


async def test_plain_put_drops_a_stale_embedding():
    store = HolographicStore()
    await store.put_with_embedding(NS, "k", "v", [1.0, 0.0])
    await store.put(NS, "k", "changed")
    assert await store.get_embedding(NS, "k") is None
    assert await store.search_by_embedding(NS, [1.0, 0.0]) == []
    await store.close()


async def test_embeddings_must_survive_float32():
    store = HolographicStore()
    with pytest.raises(ValueError, match="float32"):
        await store.put_with_embedding(NS, "k", "v", [1e39, 1.0])
    with pytest.raises(ValueError, match="float32"):
        await store.put_with_embedding(NS, "k", "v", [1e-50, 0.0])
    assert await store.get(NS, "k") is None
    await store.close()


async def test_large_and_tiny_embeddings_rank_by_their_direction():
    """Numbers whose squares leave float32 still rank: similarities are computed in float64."""
    store = HolographicStore()
    await store.put_with_embedding(NS, "huge", "v", [1e30, 1e30])
    await store.put_with_embedding(NS, "tiny", "v", [1e-30, -1e-30])
    await store.put_with_embedding(NS, "plain", "v", [1.0, 0.2])
    hits = await store.search_by_embedding(NS, [1e30, 1e30])
    assert [hit.item.key for hit in hits] == ["huge", "plain", "tiny"]
    assert hits[0].score == pytest.approx(1.0)
    nearest = await store.search_by_embedding(NS, [1.0, -1.0])
    assert nearest[0].item.key == "tiny"
    await store.close()


async def test_capability_error_is_not_implemented_error():
    assert issubclass(StoreCapabilityError, NotImplementedError)


class _FailingEmbedding(ConceptEmbedding):
    """The concept model, its service down."""

    model_name = "tests.store.concepts.ConceptEmbedding"

    async def embed_batch(self, texts):
        raise RuntimeError("embedding service down")


async def test_an_embedder_embeds_every_write_into_the_file_and_fixes_its_width(path):
    store = HolographicStore(path, embedder=ConceptEmbedding(16))
    await store.put(NS, "cat", "Luna is my cat")
    await store.put_batch([(NS, "car", "a red sedan", None), (NS, "none", "", None)])
    assert len(await store.get_embedding(NS, "cat")) == 16
    assert await store.get_embedding(NS, "none") is None  # no words: no vector
    assert store.capabilities.embedding_dimension == 16
    kitten = await ConceptEmbedding(16).embed("kitten")
    [hit] = await store.search_by_embedding(NS, kitten, limit=1)
    assert hit.item.key == "cat"
    await store.close()
    with pytest.raises(ValueError, match="embeddings of width 16"):
        HolographicStore(path, embedder=ConceptEmbedding(32))
    with pytest.raises(ValueError, match="embedding_dim=8 but the embedder's vectors are 16"):
        HolographicStore(path, embedding_dim=8, embedder=ConceptEmbedding(16))
    reopened = HolographicStore(path)  # without the embedder: words only, vectors kept
    assert [i.key for i in await reopened.search(NS, "kitten")] == []
    with pytest.raises(ValueError, match='mode="hybrid" needs'):
        await reopened.search(NS, "kitten", mode="hybrid")
    await reopened.close()


async def test_a_failing_embedder_fails_the_write_and_keeps_what_was_stored(path):
    store = HolographicStore(path, embedder=ConceptEmbedding(16))
    await store.put(NS, "cat", "Luna is my cat")
    await store.close()
    failing = HolographicStore(path, embedder=_FailingEmbedding(16))
    with pytest.raises(RuntimeError, match="embedding service down"):
        await failing.put(NS, "cat", "Luna is a dog now")
    with pytest.raises(RuntimeError, match="embedding service down"):
        await failing.put_batch([(NS, "new", "something", None)])
    assert await failing.get(NS, "cat") == "Luna is my cat"
    assert await failing.list_keys(NS) == ["cat"]
    await failing.close()


async def test_a_file_keeps_its_embedders_name_and_refuses_another_of_the_same_width(path):
    from tests.store.concepts import ConceptEmbedding
    from tulip_memory.embeddings import HRREmbedding

    store = HolographicStore(path, embedder=HRREmbedding(64))  # 128 wide
    await store.put(NS, "tea", "green tea")
    await store.close()
    with pytest.raises(ValueError, match=r"holds vectors of embedder:.*HRREmbedding, not of"):
        HolographicStore(path, embedder=ConceptEmbedding(128))
    reopened = HolographicStore(path, embedder=HRREmbedding(64))
    assert [i.key for i in await reopened.search(NS, "green tea")] == ["tea"]
    await reopened.close()
    plain = HolographicStore(path)  # without an embedder: its words and HRR only
    assert await plain.get(NS, "tea") == "green tea"
    await plain.close()
