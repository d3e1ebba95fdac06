"""TextEncoder: PgMemory's vectors — an embedder's, else HRR — with a per-tenant cache.

A text without words, or whose vector is all zeros, has no vector; a bad vector raises
``ValueError``. The LRU cache is keyed by ``(tenant, text)``: no channel between tenants.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from tulip_memory.core import hrr
from tulip_memory.core.hrr import DEFAULT_DIM
from tulip_memory.core.lru import LRUCache
from tulip_memory.core.numbers import check_int
from tulip_memory.core.text import has_words, off_loop_when_long, tokenize
from tulip_memory.embeddings.base import embed_texts, embedder_source
from tulip_memory.postgres.operations import PGVECTOR_ANN_MAX_DIM
from tulip_memory.store.validation import validate_embedding

__all__ = ["DEFAULT_ENCODING_CACHE", "EXTERNAL_SOURCE", "TextEncoder"]

DEFAULT_ENCODING_CACHE = 1024

# What names an embedder's vector in the messages refusing it (as the other stores do).
EMBEDDER_VECTOR = "the embedder's vector"

# The source of a caller's own vector stored without an embedder.
EXTERNAL_SOURCE = "external"


def _width(dim: int, embedder: Any | None) -> int:
    if embedder is None:
        width = 2 * dim
        if width > PGVECTOR_ANN_MAX_DIM:
            raise ValueError(
                f"PgMemory(dim={dim}) is not indexable: the HRR encoding stores "
                f"[cos φ, sin φ], so the vector column would be 2·{dim} = {width} wide, "
                f"over pgvector's {PGVECTOR_ANN_MAX_DIM}-dimension limit for an HNSW "
                f"index. Pass dim <= {PGVECTOR_ANN_MAX_DIM // 2} (default {DEFAULT_DIM}), "
                "or an embedder."
            )
        return width
    dimension = getattr(embedder, "dimension", None)
    dimension = check_int(dimension, "embedder.dimension")
    if dimension > PGVECTOR_ANN_MAX_DIM:
        warnings.warn(
            f"PgMemory: the embedder is {dimension} dimensions wide, over pgvector's "
            f"{PGVECTOR_ANN_MAX_DIM}-dimension limit for an HNSW index, so the table has "
            "no ANN index (TULIP_MEMORY['ANN_INDEX'] cannot apply). PgMemory's searches "
            "stay exact (each namespace is sorted by exact distance), but ad-hoc "
            "nearest-neighbour queries over a whole table are sequential scans.",
            RuntimeWarning,
            stacklevel=4,
        )
    return dimension


def _float32(array: np.ndarray, name: str) -> np.ndarray:
    """``array`` (finite, not all zeros) narrowed to float32, pgvector's type; refused when
    it overflows there, becomes all zeros, or its squared length (summed in float32 by
    pgvector) overflows or underflows: every cosine distance to it would be NaN."""
    with np.errstate(over="ignore"):  # reported below, as a ValueError
        vector = array.astype(np.float32)
    finite = np.isfinite(vector)
    if not finite.all():
        index = int(np.argmin(finite))
        raise ValueError(f"{name}[{index}] overflows float32 (pgvector's type): {array[index]}")
    if not vector.any():
        raise ValueError(
            f"{name} is all zeros once stored as float32 (pgvector's type): "
            "cosine similarity is undefined"
        )
    with np.errstate(over="ignore", under="ignore"):
        square = float(np.dot(vector, vector))
    if not 0.0 < square < math.inf:
        size = "long" if square else "short"
        raise ValueError(
            f"{name} is too {size} for pgvector's float32 arithmetic (its squared length "
            f"is {square} in float32): scale it; cosine similarity does not depend on length"
        )
    return vector


class TextEncoder:
    def __init__(
        self,
        *,
        dim: int = DEFAULT_DIM,
        embedder: Any | None = None,
        cache_size: int = DEFAULT_ENCODING_CACHE,
    ) -> None:
        hrr.validate_dim(dim)
        self.dim = dim
        self.embedder = embedder
        self.width = _width(dim, embedder)
        self.source = "hrr" if embedder is None else embedder_source(embedder)
        self._cache: LRUCache[tuple[str, str], np.ndarray | None] = LRUCache(
            cache_size, name="encoding_cache"
        )

    # --- vectors ------------------------------------------------------------------------

    def checked(self, values: Sequence[float], *, name: str) -> np.ndarray:
        """A caller's vector, checked number by number, and again once narrowed to float32
        (what pgvector stores), where it may overflow or underflow."""
        numbers = validate_embedding(values, dimension=self.width, name=name)
        return _float32(np.asarray(numbers), name)

    def _encoded(self, values: Any, *, name: str) -> np.ndarray | None:
        # An encoder's vector, checked with numpy (the bulk path); None when all zeros.
        try:
            array = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{name} is not a sequence of numbers") from None
        if array.ndim != 1:
            raise ValueError(f"{name} has shape {array.shape}, the store expects ({self.width},)")
        if array.shape[0] != self.width:
            raise ValueError(
                f"{name} has {array.shape[0]} dimensions, the store expects {self.width}"
            )
        finite = np.isfinite(array)
        if not finite.all():
            index = int(np.argmin(finite))
            raise ValueError(f"{name}[{index}] must be finite, got {array[index]}")
        if not array.any():
            return None
        vector = _float32(array, name)
        vector.setflags(write=False)
        return vector

    def _encoded_all(self, values: Sequence[Any], *, name: str) -> list[np.ndarray | None]:
        """:meth:`_encoded` of each of ``values``, checked as one matrix; when one is bad or
        all zeros, each is checked alone to name it."""
        try:
            matrix = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError):  # not numbers, or vectors of different widths
            matrix = None
        if (
            matrix is None
            or matrix.ndim != 2
            or matrix.shape[1] != self.width
            or not np.isfinite(matrix).all()
            or not matrix.any(axis=1).all()
        ):
            return [self._encoded(value, name=name) for value in values]
        with np.errstate(over="ignore", under="ignore"):
            vectors = matrix.astype(np.float32)
            squares = np.einsum("ij,ij->i", vectors, vectors)
        if not (np.isfinite(squares) & (squares > 0)).all():
            return [self._encoded(value, name=name) for value in values]
        vectors.setflags(write=False)
        return list(vectors)

    @staticmethod
    def literal(vector: np.ndarray) -> str:
        """pgvector's text form of ``vector`` (for a query parameter)."""
        return "[" + ",".join(map(repr, vector.tolist())) + "]"

    def _hrr(self, text: str) -> np.ndarray | None:
        phases = hrr.encode_tokens(tokenize(text), self.dim)
        if phases is None:
            return None
        return self._encoded(hrr.phases_to_vector(phases), name="HRR vector")

    # --- encoding -----------------------------------------------------------------------

    async def _hrr_all(self, texts: Sequence[str]) -> list[np.ndarray | None]:
        return await off_loop_when_long(
            sum(map(len, texts)), lambda: [self._hrr(text) for text in texts]
        )

    async def encode_many(self, texts: Sequence[str]) -> list[np.ndarray | None]:
        """The vector of each text (one ``embed_batch`` call), uncached: the write path."""
        if self.embedder is None:
            return await self._hrr_all(texts)
        embedded = await embed_texts(self.embedder, texts)
        wanted = [i for i, vector in enumerate(embedded) if vector is not None]
        out: list[np.ndarray | None] = [None] * len(texts)
        checked = self._encoded_all([embedded[i] for i in wanted], name=EMBEDDER_VECTOR)
        for i, vector in zip(wanted, checked, strict=True):
            out[i] = vector
        return out

    async def encode(self, tenant: str, text: str) -> np.ndarray | None:
        """One text's vector, through the cache keyed by ``(tenant, text)``."""
        key = (tenant, text)
        hit, cached = self._cache.lookup(key)
        if hit:
            return cached
        if self.embedder is None:
            [vector] = await self._hrr_all([text])
        elif not has_words(text):
            vector = None
        else:
            vector = self._encoded(await self.embedder.embed(text), name=EMBEDDER_VECTOR)
        self._cache.put(key, vector)
        return vector

    def cached_keys(self) -> list[tuple[str, str]]:
        """The ``(tenant, text)`` keys in the cache, least recently used first."""
        return self._cache.keys()

    def clear(self) -> None:
        self._cache.clear()
