"""Ranking arithmetic of the stores: Okapi BM25, score fusion and exact cosine ranking.

Pure functions over numbers and numpy arrays, so they are tested without a database.

Fusion (docs/store.md, "Ranking"): a hybrid score is ``lexical / best_lexical + weight *
vector_similarity``, each candidate scored by both parts whichever ranking brought it.
Dividing by the query's best BM25 puts the lexical part in [0, 1] whatever the query's
length or the collection's size, so one ``weight`` serves every query; the vector part
then breaks near-ties and brings in matches by meaning. Fusing scores keeps BM25's
margins: reciprocal-rank fusion gives a much weaker ranking half the vote and measured
below BM25 alone (docs/recall-design.md).
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

# The textbook Okapi parameters (k1 1.2, b 0.75): the best of the 231 tuning questions
# moved recall by +-0.01 only, so the design keeps the usual values.
BM25_K1 = 1.2
BM25_B = 0.75
# Weight of the vector similarity in a fused score: a model embedder's cosine (measured
# flat between 0.3 and 1) and HRR's (a bag of the same words without IDF: a tie-breaker).
MODEL_WEIGHT = 0.5
HRR_WEIGHT = 0.3


def candidate_pool(limit: int) -> int:
    """How many candidates each ranking contributes before fusion: ``max(50, 5 * limit)``."""
    return max(50, 5 * limit)


def bm25_idf(count: int, frequency: int) -> float:
    """Okapi's IDF ``ln(1 + (N - df + 0.5) / (df + 0.5))`` (never negative)."""
    return math.log(1.0 + (count - frequency + 0.5) / (frequency + 0.5))


def bm25_weight(tf: int, length: int, average_length: float) -> float:
    """The term-frequency factor of BM25 for a term seen ``tf`` times in an item of
    ``length`` terms (multiplied by the term's IDF)."""
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
    """The similarity of the ``pool`` keys most similar (``similarity[i]`` is ``keys[i]``'s)
    and of every key of ``scored`` that has one: each candidate of a fusion gets its vector
    part, whichever ranking brought it."""
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
        # Equal vectors score 1 up to float64 rounding (the dot product and the norms are
        # summed in different orders): a threshold of 1.0 keeps exact duplicates.
        if threshold is not None and score < threshold - _ROUNDING:
            break
        top.append((int(i), score))
    return top
