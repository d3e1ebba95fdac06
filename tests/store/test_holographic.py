"""HolographicStore beyond the contract: the file, threads and loops, fusion."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from tests.processes import run_in_threads
from tulip_memory import hrr
from tulip_memory.store import HolographicStore, StoreCapabilityError
from tulip_memory.store.ranking import RRF_K
from tulip_memory.text import tokenize, value_text

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


async def test_fused_ranking_is_rrf_of_bm25_and_hrr():
    store = await _corpus_store()
    query = "oolong tea garden morning"
    lexical = [item.key for item in await store.search(NS, query, mode="lexical", limit=50)]
    assert set(lexical) == set(CORPUS)  # every text shares a word with the query
    query_phases = hrr.encode_phases(query, 256)

    def hrr_score(key: str) -> float:
        return hrr.similarity(query_phases, hrr.encode_tokens(tokenize(CORPUS[key]), 256))

    hrr_order = sorted(lexical, key=lambda key: (-hrr_score(key), lexical.index(key)))
    fused = {
        key: 1 / (RRF_K + 1 + lexical.index(key)) + 1 / (RRF_K + 1 + hrr_order.index(key))
        for key in lexical
    }
    expected = sorted(lexical, key=lambda key: (-fused[key], lexical.index(key)))
    got = [item.key for item in await store.search(NS, query, limit=10)]
    assert got == expected
    assert got[0] == "mix"  # holds every query word
    await store.close()


async def test_hrr_mode_scans_the_whole_namespace():
    store = await _corpus_store()
    ranked = [item.key for item in await store.search(NS, "jasmine garden", mode="hrr", limit=10)]
    assert sorted(ranked) == sorted(CORPUS)  # every item, matching or not
    assert ranked[0] == "jasmine"
    with pytest.raises(ValueError, match="mode must be one of"):
        await store.search(NS, "x", mode="semantic")
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


async def test_capability_error_is_not_implemented_error():
    assert issubclass(StoreCapabilityError, NotImplementedError)
