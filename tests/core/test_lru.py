"""LRUCache: bounded by entries, or by weight with ``weigh``."""

from __future__ import annotations

import pytest

from tulip_memory.core.lru import LRUCache


def test_the_least_recently_used_entry_goes_first():
    cache: LRUCache[str, int] = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "b" is now the least recently used
    cache.put("c", 3)
    assert cache.keys() == ["a", "c"]
    assert cache.weight == 2


def test_with_weigh_the_total_weight_is_bounded():
    cache: LRUCache[str, bytes] = LRUCache(10, weigh=len)
    cache.put("a", b"1234")
    cache.put("b", b"123")
    cache.put("c", b"12")
    assert cache.weight == 9
    cache.put("d", b"123")  # 12 > 10: "a" goes
    assert cache.keys() == ["b", "c", "d"]
    assert cache.weight == 8
    cache.put("c", b"1234567")  # replacing weighs the new value only: 3 + 7 + 3 > 10
    assert cache.keys() == ["d", "c"]
    assert cache.weight == 10


def test_a_value_heavier_than_the_bound_is_not_kept_and_replaces_nothing_else():
    cache: LRUCache[str, bytes] = LRUCache(4, weigh=len)
    cache.put("a", b"12")
    cache.put("a", b"12345")  # too heavy: dropped, and the old value with it
    cache.put("b", b"123456")
    assert cache.keys() == []
    assert cache.weight == 0


def test_removals_give_back_their_weight():
    cache: LRUCache[str, bytes] = LRUCache(100, weigh=len)
    for key in "abcd":
        cache.put(key, key.encode() * 10)
    assert cache.pop("a") == b"a" * 10
    assert cache.pop("missing") is None
    cache.discard_where(lambda key: key in "bc")
    assert (cache.keys(), cache.weight) == (["d"], 10)
    cache.clear()
    assert (len(cache), cache.weight) == (0, 0)


def test_a_bound_of_zero_keeps_nothing_and_bad_bounds_are_refused():
    cache: LRUCache[str, int] = LRUCache(0)
    cache.put("a", 1)
    assert cache.get("a") is None
    for bad in (-1, True, "8", 1.5):
        with pytest.raises(ValueError, match="record_cache_bytes"):
            LRUCache(bad, name="record_cache_bytes")
