"""ConceptEmbedding: a deterministic in-process embedder that knows a few synonyms.

A test double for a model embedder (no weights, no network): words of one concept
(``cat``, ``kitten``, ``feline`` …) share one axis, every other word gets an axis of its
own by hash. So ``"kitten"`` is near ``"my cat"`` although they share no word — what a
real embedder gives and a lexical ranking cannot — and tests of hybrid ranking stay exact.
"""

from __future__ import annotations

import hashlib

import numpy as np

from tulip_memory.core.text import tokenize
from tulip_memory.embeddings import BaseEmbedding

CONCEPTS = {
    word: axis
    for axis, words in enumerate(
        (
            ("cat", "cats", "kitten", "kittens", "feline", "kitty"),
            ("car", "cars", "automobile", "vehicle", "sedan"),
            ("ocean", "sea", "beach", "coast", "seaside"),
        )
    )
    for word in words
}
_FIRST_FREE_AXIS = 8


class ConceptEmbedding(BaseEmbedding):
    """Bag of concepts: one axis per concept of ``CONCEPTS``, one hashed axis per other word."""

    def __init__(self, dimension: int = 1024) -> None:
        self._dimension = dimension

    @property
    def dimension(self) -> int:
        return self._dimension

    def vector(self, text: str) -> list[float]:
        out = np.zeros(self._dimension)
        for token in tokenize(text):
            axis = CONCEPTS.get(token)
            if axis is None:
                digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
                free = self._dimension - _FIRST_FREE_AXIS
                axis = _FIRST_FREE_AXIS + int.from_bytes(digest, "little") % free
            out[axis] += 1.0
        return out.tolist()

    async def embed_batch(self, texts: list[str]) -> list[list[float]]:
        return [self.vector(text) for text in self.check_texts(texts)]
