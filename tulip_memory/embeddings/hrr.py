"""HRREmbedding: the HRR text encoder as an embedder (deterministic, offline, lexical).

The vector of a text is ``[cos φ, sin φ]`` of its HRR phases
(:mod:`tulip_memory.core.hrr`), ``2 * dim`` wide, so the cosine similarity of two vectors
is the HRR similarity of the texts: it grows with the words they share and ignores
meaning (a paraphrase with other words scores about 0). Use it in tests, or where recall
by shared words is enough; use :class:`~tulip_memory.embeddings.WordLlamaEmbedding` for
paraphrases. Texts without any word (punctuation only) raise ``ValueError``.
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
