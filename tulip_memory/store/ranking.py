"""Ranking arithmetic of HolographicStore: reciprocal-rank fusion and exact cosine ranking.

Pure functions over positions and numpy arrays, so they are tested without a database.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["RRF_K", "cosine_top", "rrf_order"]

# The usual RRF constant: it damps the weight of the very first ranks.
RRF_K = 60


def rrf_order(first_count: int, second_scores: Any) -> list[int]:
    """Fuse two rankings of the same ``first_count`` candidates by reciprocal rank.

    The first ranking is the candidates' order (0, 1, 2, …); the second sorts them by
    ``second_scores`` (higher first). A candidate's fused score is
    ``1 / (RRF_K + 1 + rank_1) + 1 / (RRF_K + 1 + rank_2)``; ties keep the first order.
    Returns the candidates' positions, best first.
    """
    second = sorted(range(first_count), key=lambda i: (-second_scores[i], i))
    fused = [1.0 / (RRF_K + 1 + i) for i in range(first_count)]
    for rank, i in enumerate(second):
        fused[i] += 1.0 / (RRF_K + 1 + rank)
    return sorted(range(first_count), key=lambda i: (-fused[i], i))


def cosine_top(
    matrix: Any, query: Any, limit: int, threshold: float | None
) -> list[tuple[int, float]]:
    """``(row, cosine)`` of the ``limit`` rows of ``matrix`` most similar to ``query``,
    best first, keeping only ``cosine >= threshold`` when a threshold is given."""
    if matrix.shape[1] != len(query):
        raise ValueError(
            f"query_embedding has {len(query)} dimensions, the store holds {matrix.shape[1]}"
        )
    vector = np.asarray(query, dtype=np.float64)
    scores = (matrix @ vector) / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(vector))
    top: list[tuple[int, float]] = []
    for i in np.argsort(-scores, kind="stable")[:limit]:
        score = float(np.clip(scores[i], -1.0, 1.0))
        if threshold is not None and score < threshold:
            break
        top.append((int(i), score))
    return top
