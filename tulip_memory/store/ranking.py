"""Ranking arithmetic of the stores: Okapi BM25, score fusion and exact cosine ranking.

Pure functions over numbers and numpy arrays. A fused score is ``lexical / best_lexical +
weight * vector_similarity`` (docs/store.md, "Ranking"; why not reciprocal-rank fusion:
docs/design/recall.md).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

__all__ = [
    "BM25_B",
    "BM25_K1",
    "HRR_WEIGHT",
    "MODEL_WEIGHT",
    "bm25_idf",
    "bm25_weight",
    "candidate_pool",
    "cosine_similarities",
    "cosine_top",
    "fuse",
    "nearest_and_scored",
]

K = TypeVar("K", bound=Hashable)

# The textbook Okapi parameters (docs/design/recall.md).
BM25_K1 = 1.2
BM25_B = 0.75
# Weight of the vector similarity in a fused score: a model embedder's cosine, and HRR's
# (a bag of the same words without IDF: a tie-breaker).
MODEL_WEIGHT = 0.5
HRR_WEIGHT = 0.3


def candidate_pool(limit: int) -> int:
    """How many candidates each ranking contributes before fusion: ``max(50, 5 * limit)``."""
    return max(50, 5 * limit)


def bm25_idf(count: int, frequency: int) -> float:
    """Okapi's IDF ``ln(1 + (N - df + 0.5) / (df + 0.5))`` (never negative)."""
    return math.log(1.0 + (count - frequency + 0.5) / (frequency + 0.5))


def bm25_weight(tf: int, length: int, average_length: float) -> float:
    """BM25's term-frequency factor for ``tf`` occurrences in ``length`` terms."""
    norm = BM25_K1 * (1.0 - BM25_B + BM25_B * length / (average_length or 1.0))
    return tf * (BM25_K1 + 1.0) / (tf + norm)


def fuse(lexical: Mapping[K, float], vector: Mapping[K, float], weight: float) -> dict[K, float]:
    """Fused scores of every candidate of either ranking: ``lexical / max(lexical) +
    weight * vector`` (a missing part counts 0)."""
    best = max(lexical.values(), default=0.0) or 1.0
    return {
        key: lexical.get(key, 0.0) / best + weight * vector.get(key, 0.0)
        for key in lexical.keys() | vector.keys()
    }


# How far below a threshold a cosine may fall by rounding alone and still reach it.
_ROUNDING = 1e-9


def cosine_similarities(matrix: Any, query: Any) -> Any:
    """The cosine similarity of each row of ``matrix`` to ``query`` (a numpy array)."""
    if matrix.shape[1] != len(query):
        raise ValueError(
            f"query_embedding has {len(query)} dimensions, the store holds {matrix.shape[1]}"
        )
    # In float64: the squares of a float32 vector's large (or tiny) numbers overflow (or
    # underflow) in float32, which gave a vector a similarity of 0 or NaN to itself.
    rows = np.asarray(matrix, dtype=np.float64)
    vector = np.asarray(query, dtype=np.float64)
    return (rows @ vector) / (np.linalg.norm(rows, axis=1) * np.linalg.norm(vector))


def nearest_and_scored(
    keys: Sequence[K], similarity: Any, pool: int, scored: Iterable[K]
) -> dict[K, float]:
    """The similarity of the ``pool`` most similar keys and of every key of ``scored``:
    each candidate of a fusion gets its vector part, whichever ranking brought it."""
    best = np.argsort(-similarity, kind="stable")[:pool]
    found = {keys[i]: float(similarity[i]) for i in best}
    wanted = set(scored) - found.keys()
    if wanted:
        found.update({key: float(similarity[i]) for i, key in enumerate(keys) if key in wanted})
    return found


def cosine_top(
    matrix: Any, query: Any, limit: int, threshold: float | None
) -> list[tuple[int, float]]:
    """``(row, cosine)`` of the ``limit`` rows of ``matrix`` most similar to ``query``,
    best first, keeping only ``cosine >= threshold`` when a threshold is given."""
    scores = cosine_similarities(matrix, query)
    top: list[tuple[int, float]] = []
    for i in np.argsort(-scores, kind="stable")[:limit]:
        score = float(np.clip(scores[i], -1.0, 1.0))
        # Equal vectors score 1 only up to rounding: a threshold of 1.0 keeps duplicates.
        if threshold is not None and score < threshold - _ROUNDING:
            break
        top.append((int(i), score))
    return top
