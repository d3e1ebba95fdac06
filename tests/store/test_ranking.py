"""The stores' ranking arithmetic: BM25 parts, score fusion, exact cosine ranking."""

from __future__ import annotations

import numpy as np
import pytest

from tulip_memory.store.ranking import (
    bm25_idf,
    bm25_weight,
    candidate_pool,
    cosine_top,
    fuse,
    nearest_and_scored,
)


def test_bm25_parts():
    # A rare term weighs more than a common one; IDF never goes negative.
    assert bm25_idf(100, 1) > bm25_idf(100, 50) > bm25_idf(100, 100) > 0
    # More occurrences help with diminishing returns; a longer item scores less.
    assert bm25_weight(2, 10, 10.0) > bm25_weight(1, 10, 10.0)
    assert bm25_weight(2, 10, 10.0) < 2 * bm25_weight(1, 10, 10.0)
    assert bm25_weight(1, 5, 10.0) > bm25_weight(1, 20, 10.0)
    assert bm25_weight(1, 10, 10.0) == pytest.approx(1.0)  # tf 1 at average length


def test_fuse_normalises_the_lexical_part_and_adds_the_weighted_vector_part():
    scores = fuse({"a": 4.0, "b": 2.0}, {"b": 0.9, "c": 0.8}, 0.5)
    assert scores == pytest.approx({"a": 1.0, "b": 0.95, "c": 0.4})
    # No lexical match at all: the vector part alone.
    assert fuse({}, {"c": 0.8}, 0.5) == pytest.approx({"c": 0.4})
    assert candidate_pool(3) == 50
    assert candidate_pool(20) == 100


def test_cosine_top():
    matrix = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [-1.0, 0.0]], dtype=np.float32)
    top = cosine_top(matrix, [1.0, 0.0], limit=3, threshold=None)
    assert [i for i, _ in top] == [0, 1, 2]
    assert top[1][1] == pytest.approx(1 / np.sqrt(2))
    assert [i for i, _ in cosine_top(matrix, [1.0, 0.0], limit=10, threshold=0.5)] == [0, 1]
    assert cosine_top(matrix, [1.0, 0.0], limit=10, threshold=None)[-1][1] == pytest.approx(-1)
    with pytest.raises(ValueError, match="has 3 dimensions, the store holds 2"):
        cosine_top(matrix, [1.0, 0.0, 0.0], limit=1, threshold=None)


def test_nearest_and_scored_gives_the_pool_and_the_scored_keys_their_similarity():
    keys = ["a", "b", "c", "d"]
    similarity = np.array([0.1, 0.9, 0.5, 0.7])
    assert nearest_and_scored(keys, similarity, 2, []) == {"b": 0.9, "d": 0.7}
    # A scored key outside the pool gets its own similarity; one without a vector none.
    assert nearest_and_scored(keys, similarity, 2, ["a", "zz"]) == {"b": 0.9, "d": 0.7, "a": 0.1}
