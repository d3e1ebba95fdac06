"""InMemoryStore beyond the contract: its ranking, and use from several threads and loops."""

from __future__ import annotations

import asyncio
import threading

from tests.processes import run_in_threads
from tulip_memory.store import InMemoryStore

NS = ("t", "notes")


async def test_ranked_by_bm25_then_recency():
    store = InMemoryStore()
    await store.put(NS, "both-old", "green tea")
    await store.put(NS, "one-old", "tea cup")
    await store.put(NS, "none", "coffee")
    await store.put(NS, "one-new", "GREEN light")
    await store.put(NS, "both-new", "Tea, green!")
    found = [item.key for item in await store.search(NS, "green tea")]
    # Both words beat one; equal scores (same lengths, same term frequencies): newest first.
    assert found == ["both-new", "both-old", "one-new", "one-old"]
    assert [item.key for item in await store.search(NS, "green tea", limit=3)] == found[:3]
    # An update makes an item the most recent one.
    await store.put(NS, "one-old", "tea cup")
    assert [item.key for item in await store.search(NS, "tea")][:2] == ["one-old", "both-new"]


async def test_rare_words_and_short_items_rank_first():
    store = InMemoryStore()
    await store.put(NS, "common", "Caroline went to the shop")
    await store.put(NS, "rare", "Caroline adopted a kitten")
    await store.put(NS, "other", "Caroline painted a lake")
    await store.put(NS, "long", "a kitten and a long story about something else")
    # "kitten" is rarer than "caroline" (IDF); of the two kitten items the short one wins.
    assert [i.key for i in await store.search(NS, "Caroline's kitten")][:2] == ["rare", "long"]


async def test_stemming_and_stop_words():
    store = InMemoryStore()
    await store.put(NS, "liked", "Melanie liked pottery")
    await store.put(NS, "other", "the weather is what it is")
    assert [i.key for i in await store.search(NS, "who likes potteries?")] == ["liked"]
    # A query of stop words only has no terms: the newest items, as without a query.
    assert [i.key for i in await store.search(NS, "what is it?")] == ["other", "liked"]


async def test_matches_words_of_nested_values_not_dict_keys():
    store = InMemoryStore()
    await store.put(NS, "k", {"content": "likes hiking", "tags": ["Alps", 3000]})
    assert [i.key for i in await store.search(NS, "alps")] == ["k"]
    assert [i.key for i in await store.search(NS, "3000")] == ["k"]
    assert await store.search(NS, "content") == []
    assert await store.search(NS, "skiing") == []


async def test_index_follows_updates_and_deletes():
    store = InMemoryStore()
    await store.put(NS, "k", "tea")
    await store.put(NS, "k", "coffee")
    assert await store.search(NS, "tea") == []
    assert [i.key for i in await store.search(NS, "coffee")] == ["k"]
    await store.delete(NS, "k")
    assert await store.search(NS, "coffee") == []
    assert await store.list_namespaces() == []


def test_threads_with_their_own_event_loops():
    store = InMemoryStore()

    async def worker(n: int) -> None:
        for i in range(200):
            await store.put(NS, "shared", {"writer": n, "i": i})
            await store.put(("t", f"w{n}"), f"k{i}", f"note {i}")
            await store.search(NS, "writer")

    assert run_in_threads(lambda n: asyncio.run(worker(n)), 4) == []

    async def check() -> None:
        assert (await store.get_item(NS, "shared")).version == 800
        for n in range(4):
            assert len(await store.list_keys(("t", f"w{n}"), limit=1000)) == 200

    asyncio.run(check())


def test_a_key_being_rewritten_is_never_read_as_missing_by_another_thread():
    store = InMemoryStore()
    asyncio.run(store.put(NS, "k", 0))
    stop = threading.Event()
    missing = []

    def writer(_n: int) -> None:
        async def write() -> None:
            i = 0
            while not stop.is_set():
                i += 1
                await store.put(NS, "k", i)

        asyncio.run(write())

    def reader(_n: int) -> None:
        async def read() -> None:
            for _ in range(20_000):
                if await store.get(NS, "k") is None or not await store.exists(NS, "k"):
                    missing.append(1)
            stop.set()

        asyncio.run(read())

    assert run_in_threads(lambda n: (writer if n == 0 else reader)(n), 2) == []
    assert missing == []
