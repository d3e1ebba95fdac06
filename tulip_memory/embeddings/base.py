"""BaseEmbedding: what the stores and the memory manager need from a text embedder.

Subclasses give ``dimension`` and ``embed_batch``. Blank text is a ValueError (a zero
vector has no cosine), and so is an answer of another number of vectors than texts.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from tulip_memory.core.text import has_words
from tulip_memory.exceptions import EmbeddingError

__all__ = ["BaseEmbedding", "check_count", "embed_texts", "embedder_source", "query_vector_or_none"]

T = TypeVar("T")


class BaseEmbedding(ABC):
    """A text embedder of fixed width."""

    @property
    @abstractmethod
    def dimension(self) -> int:
        """Width of every vector this embedder returns."""

    @abstractmethod
    async def embed_batch(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order."""

    async def embed(self, text: str) -> list[float]:
        """The vector of one text."""
        [vector] = check_count(self, await self.embed_batch([text]), 1)
        return vector

    def configuration_problem(self) -> str | None:
        """What this embedder lacks to work (system check ``tulip_memory.E022``), or None."""
        return None

    @staticmethod
    def check_texts(texts: Sequence[str]) -> list[str]:
        """``texts`` as a list, or ``ValueError`` naming the first one that is not usable."""
        if isinstance(texts, str) or not isinstance(texts, Sequence):
            raise ValueError("texts must be a list of strings")
        for index, text in enumerate(texts):
            if not isinstance(text, str):
                raise ValueError(f"texts[{index}] must be a str, got {type(text).__name__}")
            if not text.strip():
                raise ValueError(f"texts[{index}] is empty: there is nothing to embed")
        return list(texts)


def embedder_source(embedder: Any) -> str:
    """``embedder:<model or class name>``, naming stored vectors: two embedders of one name
    compute comparable ones."""
    name = getattr(embedder, "model_name", None) or getattr(embedder, "model", None)
    if not isinstance(name, str) or not name:
        name = f"{type(embedder).__module__}.{type(embedder).__qualname__}"
    return f"embedder:{name}"[:100]


def check_count(embedder: Any, vectors: Sequence[T], texts: int) -> Sequence[T]:
    """``vectors`` if it holds one vector per text, else ValueError naming the embedder."""
    if len(vectors) != texts:
        raise ValueError(
            f"the embedder {type(embedder).__name__} returned {len(vectors)} vectors "
            f"for {texts} texts"
        )
    return vectors


async def embed_texts(embedder: BaseEmbedding, texts: Sequence[str]) -> list[list[float] | None]:
    """Each text's vector in one ``embed_batch`` call, None for a text without words (stored
    without a vector rather than refused)."""
    wanted = [i for i, text in enumerate(texts) if has_words(text)]
    vectors: list[list[float] | None] = [None] * len(texts)
    if wanted:
        embedded = check_count(
            embedder, await embedder.embed_batch([texts[i] for i in wanted]), len(wanted)
        )
        for i, vector in zip(wanted, embedded, strict=True):
            vectors[i] = vector
    return vectors


async def query_vector_or_none(embed: Callable[[], Awaitable[T]], store: str) -> T | None:
    """The query's vector, or None with a warning when the embedder fails or its answer is
    refused: the search then ranks by words alone."""
    try:
        return await embed()
    except (EmbeddingError, ValueError) as error:
        logging.getLogger("tulip_memory.store").warning(
            "%s: the embedder failed on a query (%s); this search ranks by words only", store, error
        )
        return None
