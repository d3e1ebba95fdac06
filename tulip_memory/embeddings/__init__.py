"""Text embedders: :class:`BaseEmbedding`, :class:`HRREmbedding` (offline, by shared words),
:class:`WordLlamaEmbedding` and :class:`OpenAIEmbedding` (imported lazily), and the choice
by ``TULIP_MEMORY["EMBEDDER"]`` (:func:`get_embedder`, :func:`resolve_embedder`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tulip_memory.core.optional_dependencies import lazy_attributes
from tulip_memory.embeddings.base import BaseEmbedding
from tulip_memory.embeddings.hrr import HRREmbedding
from tulip_memory.embeddings.loading import HRR, get_embedder, load_embedder, resolve_embedder

if TYPE_CHECKING:
    from tulip_memory.embeddings.openai_compatible import OpenAIEmbedding
    from tulip_memory.embeddings.wordllama import WordLlamaEmbedding

__all__ = [
    "HRR",
    "BaseEmbedding",
    "HRREmbedding",
    "OpenAIEmbedding",
    "WordLlamaEmbedding",
    "get_embedder",
    "load_embedder",
    "resolve_embedder",
]


__getattr__ = lazy_attributes(
    __name__,
    {
        "WordLlamaEmbedding": "tulip_memory.embeddings.wordllama",
        "OpenAIEmbedding": "tulip_memory.embeddings.openai_compatible",
    },
)
