"""A bounded, thread-safe least-recently-used mapping, the one cache every layer uses.
``maxsize`` 0 disables it; with ``weigh`` it bounds the total weight, not the count.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from tulip_memory.core.numbers import check_int

__all__ = ["LRUCache"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_MISSING = object()


class LRUCache(Generic[K, V]):
    """At most ``maxsize`` entries (or total weight); the least recently used goes first, and
    a value heavier than ``maxsize`` is not kept."""

    def __init__(
        self, maxsize: int, *, name: str = "maxsize", weigh: Callable[[V], int] | None = None
    ) -> None:
        self.maxsize = check_int(maxsize, name, 0)
        self._data: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()
        self._weigh = weigh
        self._weights: dict[K, int] = {}
        self.weight = 0  # the entries' total weight (their number without ``weigh``)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._data

    def get(self, key: K, default: V | None = None) -> V | None:
        """The value under ``key`` (now the most recently used), or ``default``."""
        found, value = self.lookup(key)
        return value if found else default

    def lookup(self, key: K) -> tuple[bool, V | None]:
        """``(True, value)`` on a hit, ``(False, None)`` on a miss (for caches of ``None``)."""
        with self._lock:
            value = self._data.get(key, _MISSING)
            if value is _MISSING:
                return False, None
            self._data.move_to_end(key)
            return True, value  # type: ignore[return-value]

    def put(self, key: K, value: V) -> None:
        """Store ``value`` as the most recently used entry, evicting beyond ``maxsize``."""
        if not self.maxsize:
            return
        weight = 1 if self._weigh is None else self._weigh(value)
        with self._lock:
            self._remove(key)
            if weight > self.maxsize:
                return
            self._data[key] = value
            self._weights[key] = weight
            self.weight += weight
            while self.weight > self.maxsize:
                self._remove(next(iter(self._data)))

    def _remove(self, key: K) -> V | None:
        value = self._data.pop(key, None)
        self.weight -= self._weights.pop(key, 0)
        return value

    def pop(self, key: K) -> V | None:
        with self._lock:
            return self._remove(key)

    def discard_where(self, predicate: Callable[[K], bool]) -> None:
        """Drop every entry whose key satisfies ``predicate``."""
        with self._lock:
            for key in [k for k in self._data if predicate(k)]:
                self._remove(key)

    def keys(self) -> list[K]:
        """The keys, least recently used first."""
        with self._lock:
            return list(self._data)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._weights.clear()
            self.weight = 0
