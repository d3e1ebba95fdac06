"""Text embedders: the interface, an HRR embedder, WordLlama, and selection by settings.

- :class:`BaseEmbedding` — ``dimension``, ``async embed(text)``, ``async embed_batch(texts)``.
- :class:`HRREmbedding` — deterministic and offline, by shared words (tests, fallbacks).
- :class:`WordLlamaEmbedding` — a real offline embedder (``pip install
  'tulip-memory[embeddings]'``), imported lazily.
- :class:`OpenAIEmbedding` — an OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI,
  Azure OpenAI, Ollama, vLLM, text-embeddings-inference) through the ``openai`` library
  (``pip install 'tulip-memory[llm]'``), imported lazily.
- :func:`get_embedder` / :func:`load_embedder` — the embedder named in
  ``TULIP_MEMORY["EMBEDDER"]`` with ``EMBEDDER_OPTIONS``; :func:`resolve_embedder` reads a
  store's ``embedder=`` argument (``None``: the configured one, :data:`HRR`: HRR).
"""

from __future__ import annotations

from typing import Any

from tulip_memory.embeddings.base import BaseEmbedding
from tulip_memory.embeddings.hrr import HRREmbedding
from tulip_memory.embeddings.loading import HRR, get_embedder, load_embedder, resolve_embedder

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


def __getattr__(name: str) -> Any:
    if name == "WordLlamaEmbedding":
        from tulip_memory.embeddings.wordllama import WordLlamaEmbedding

        return WordLlamaEmbedding
    if name == "OpenAIEmbedding":
        from tulip_memory.embeddings.openai_compatible import OpenAIEmbedding

        return OpenAIEmbedding
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
