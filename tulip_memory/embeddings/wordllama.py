"""WordLlamaEmbedding: an offline text embedder whose weights ship in its wheel (extra
``embeddings``). Vectors are L2-normalised; blind to word order and negation
(docs/design/embeddings.md).
"""

from __future__ import annotations

import asyncio
from functools import lru_cache
from pathlib import Path
from typing import Any

from tulip_memory.core.optional_dependencies import import_optional
from tulip_memory.embeddings.base import BaseEmbedding

__all__ = ["WordLlamaEmbedding"]

# Batches larger than this are embedded in a worker thread, not on the event loop.
_INLINE_BATCH = 256


@lru_cache(maxsize=4)
def _load_model(config: str, dim: int) -> Any:
    wordllama = import_optional("wordllama", "embeddings", needed_by="WordLlamaEmbedding")
    package_dir = Path(str(wordllama.__file__)).parent
    # disable_download: a missing file is an error, never a hub download.
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
