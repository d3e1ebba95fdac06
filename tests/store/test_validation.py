"""The validation helpers' messages (the contract suite covers their use by every store)."""

from __future__ import annotations

import pytest

from tulip_memory.store.validation import (
    encode_value,
    prepare_batch,
    validate_embedding,
    validate_namespaces,
    validate_threshold,
)


def test_embedding_width_and_numbers():
    assert validate_embedding((1, 2.5), dimension=2) == [1.0, 2.5]
    with pytest.raises(ValueError, match=r"embedding\[0\] must be a number"):
        validate_embedding([True, 1.0])
    with pytest.raises(ValueError, match="has 1 dimensions, the store expects 2"):
        validate_embedding([1.0], dimension=2)


@pytest.mark.parametrize("threshold", [float("nan"), 1.5, -2, "0.5"])
def test_threshold(threshold):
    with pytest.raises(ValueError, match="threshold"):
        validate_threshold(threshold)


def test_namespaces_refuses_a_single_namespace():
    with pytest.raises(ValueError, match="got one namespace; wrap it in a list"):
        validate_namespaces(("users", "u1"))
    assert validate_namespaces([("a",), ("b", "c")]) == [("a",), ("b", "c")]


def test_values_are_strict_json():
    assert encode_value({"é": [1, None]}) == '{"é":[1,null]}'
    circular: list = []
    circular.append(circular)
    with pytest.raises(ValueError, match="not JSON-serialisable"):
        encode_value(circular)


def test_batch_items_may_omit_metadata():
    prepared = prepare_batch([(("a",), "k", 1)])
    assert prepared[0].metadata_json == "{}"
