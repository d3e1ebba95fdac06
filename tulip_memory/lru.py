"""A bounded, thread-safe least-recently-used mapping.

Several layers keep a small cache of values that are expensive to rebuild (reconstructed
checkpoint heads, text encodings, summaries). They all share this one implementation: a
``maxsize`` of 0 disables caching, so callers need no special case for "no cache".
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["LRUCache"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_MISSING = object()


class LRUCache(Generic[K, V]):
    """At most ``maxsize`` entries; the least recently read or written one goes first."""

    def __init__(self, maxsize: int, *, name: str = "maxsize") -> None:
        if isinstance(maxsize, bool) or not isinstance(maxsize, int):
            raise ValueError(f"{name} must be an int, got {maxsize!r}")
        if maxsize < 0:
            raise ValueError(f"{name} must be >= 0, got {maxsize}")
        self.maxsize = maxsize
        self._data: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._data

    def get(self, key: K, default: V | None = None) -> V | None:
        """The value under ``key`` (now the most recently used), or ``default``."""
        with self._lock:
            value = self._data.get(key, _MISSING)
            if value is _MISSING:
                return default
            self._data.move_to_end(key)
            return value  # type: ignore[return-value]

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
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)

    def pop(self, key: K) -> V | None:
        with self._lock:
            return self._data.pop(key, None)

    def discard_where(self, predicate: Callable[[K], bool]) -> None:
        """Drop every entry whose key satisfies ``predicate``."""
        with self._lock:
            for key in [k for k in self._data if predicate(k)]:
                del self._data[key]

    def keys(self) -> list[K]:
        """The keys, least recently used first."""
        with self._lock:
            return list(self._data)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
