"""Reciprocal-rank fusion and exact cosine ranking (HolographicStore's arithmetic)."""

from __future__ import annotations

import numpy as np
import pytest

from tulip_memory.store.ranking import RRF_K, cosine_top, rrf_order


def test_rrf_agreeing_rankings_keep_the_order():
    assert rrf_order(4, [0.9, 0.5, 0.3, 0.1]) == [0, 1, 2, 3]


def test_rrf_a_strong_second_opinion_promotes_a_candidate():
    # Candidate 3 is last lexically but first by far on the second ranking.
    scores = [0.2, 0.1, 0.0, 0.9, -0.1, -0.2]
    order = rrf_order(6, scores)
    fused_3 = 1 / (RRF_K + 4) + 1 / (RRF_K + 1)
    fused_0 = 1 / (RRF_K + 1) + 1 / (RRF_K + 2)
    fused_1 = 1 / (RRF_K + 2) + 1 / (RRF_K + 3)
    assert fused_0 > fused_3 > fused_1
    assert order[:3] == [0, 3, 1]


def test_rrf_ties_keep_the_first_order():
    # 0 and 1 swap places between the rankings: equal fused scores, first order wins.
    assert rrf_order(2, [0.1, 0.9]) == [0, 1]


def test_cosine_top():
    matrix = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [-1.0, 0.0]], dtype=np.float32)
    top = cosine_top(matrix, [1.0, 0.0], limit=3, threshold=None)
    assert [i for i, _ in top] == [0, 1, 2]
    assert top[1][1] == pytest.approx(1 / np.sqrt(2))
    assert [i for i, _ in cosine_top(matrix, [1.0, 0.0], limit=10, threshold=0.5)] == [0, 1]
    assert cosine_top(matrix, [1.0, 0.0], limit=10, threshold=None)[-1][1] == pytest.approx(-1)
    with pytest.raises(ValueError, match="has 3 dimensions, the store holds 2"):
        cosine_top(matrix, [1.0, 0.0, 0.0], limit=1, threshold=None)
