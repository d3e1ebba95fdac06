"""Text embedders: the interface, an HRR embedder, WordLlama, and selection by settings.

- :class:`BaseEmbedding` — ``dimension``, ``async embed(text)``, ``async embed_batch(texts)``.
- :class:`HRREmbedding` — deterministic and offline, by shared words (tests, fallbacks).
- :class:`WordLlamaEmbedding` — a real offline embedder (``pip install
  'tulip-memory[embeddings]'``), imported lazily.
- :func:`get_embedder` / :func:`load_embedder` — the embedder named in
  ``TULIP_MEMORY["EMBEDDER"]`` with ``EMBEDDER_OPTIONS``.
"""

from __future__ import annotations

from typing import Any

from tulip_memory.embeddings.base import BaseEmbedding
from tulip_memory.embeddings.hrr import HRREmbedding
from tulip_memory.embeddings.loading import get_embedder, load_embedder

__all__ = ["BaseEmbedding", "HRREmbedding", "WordLlamaEmbedding", "get_embedder", "load_embedder"]


def __getattr__(name: str) -> Any:
    if name == "WordLlamaEmbedding":
        from tulip_memory.embeddings.wordllama import WordLlamaEmbedding

        return WordLlamaEmbedding
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
