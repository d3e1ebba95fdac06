"""BaseEmbedding's helpers: one vector per text, or a message naming the embedder."""

from __future__ import annotations

import pytest

from tulip_memory.embeddings import BaseEmbedding
from tulip_memory.embeddings.base import embed_texts


class CountingEmbedding(BaseEmbedding):
    """Answers ``answers`` vectors to any batch (a broken embedder when it is not the
    number of texts)."""

    def __init__(self, answers: int) -> None:
        self.answers = answers

    @property
    def dimension(self) -> int:
        return 2

    async def embed_batch(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0]] * self.answers


async def test_embed_and_embed_texts_name_an_embedder_answering_another_count():
    with pytest.raises(ValueError, match="the embedder CountingEmbedding returned 0 vectors for 1"):
        await CountingEmbedding(0).embed("tea")
    with pytest.raises(ValueError, match="CountingEmbedding returned 2 vectors for 1 texts"):
        await CountingEmbedding(2).embed("tea")
    with pytest.raises(ValueError, match="CountingEmbedding returned 1 vectors for 2 texts"):
        await embed_texts(CountingEmbedding(1), ["green tea", "!!", "red car"])
    assert await embed_texts(CountingEmbedding(2), ["green tea", "!!", "red car"]) == [
        [1.0, 0.0],
        None,
        [1.0, 0.0],
    ]
    assert await embed_texts(CountingEmbedding(5), ["!!", " "]) == [None, None]
