"""HRREmbedding: the HRR text encoder as an embedder, ``[cos φ, sin φ]`` of a text's phases.
Lexical (similarity grows with shared words), deterministic and offline; a text without a
word is a ValueError.
"""

from __future__ import annotations

from tulip_memory.core import hrr
from tulip_memory.embeddings.base import BaseEmbedding

__all__ = ["HRREmbedding"]


class HRREmbedding(BaseEmbedding):
    """``2 * dim``-wide HRR vectors of text."""

    def __init__(self, dim: int = hrr.DEFAULT_DIM) -> None:
        self._dim = hrr.validate_dim(dim)

    @property
    def dimension(self) -> int:
        return 2 * self._dim

    async def embed_batch(self, texts: list[str]) -> list[list[float]]:
        vectors = []
        for index, text in enumerate(self.check_texts(texts)):
            phases = hrr.encode_phases(text, self._dim)
            if phases is None:
                raise ValueError(f"texts[{index}] has no word to encode")
            vectors.append(hrr.phases_to_vector(phases))
        return vectors
