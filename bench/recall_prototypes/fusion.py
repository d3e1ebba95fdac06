"""Reciprocal-rank fusion of ranked key lists."""

from __future__ import annotations


def rrf(rankings: list[tuple[list[str], float]], k: float, limit: int) -> list[str]:
    """Keys by ``sum(weight / (k + rank))`` over the ``(keys, weight)`` lists (rank from 1)."""
    scores: dict[str, float] = {}
    for keys, weight in rankings:
        for rank, key in enumerate(keys, 1):
            scores[key] = scores.get(key, 0.0) + weight / (k + rank)
    return sorted(scores, key=lambda key: (-scores[key], key))[:limit]
