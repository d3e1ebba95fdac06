"""OpenAIEmbedding: vectors from an OpenAI-compatible ``/v1/embeddings`` endpoint (extra ``llm``).

The chat client's conventions and retry loop (:mod:`tulip_memory.llm.client`); every
failure an :class:`~tulip_memory.exceptions.EmbeddingError`. ``dimension`` is declared: an
answer of another width, or not one finite vector per text, is refused, never stored.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import time
from typing import Any

from tulip_memory.core.numbers import check_number, is_int, is_number
from tulip_memory.core.optional_dependencies import import_optional
from tulip_memory.embeddings.base import BaseEmbedding
from tulip_memory.exceptions import EmbeddingError
from tulip_memory.llm.client import LoopClients, new_openai, request_failure
from tulip_memory.llm.config import check_endpoint, env_api_key, is_local_url

__all__ = ["OpenAIEmbedding"]

logger = logging.getLogger("tulip_memory.embeddings")


class OpenAIEmbedding(BaseEmbedding):
    """``model`` at ``base_url``, ``dimension`` wide (see the module docstring)."""

    def __init__(
        self,
        model: str,
        dimension: int,
        *,
        base_url: str = "https://api.openai.com/v1",
        api_key_env: str | None = "OPENAI_API_KEY",
        batch_size: int = 256,
        timeout: float = 30.0,
        max_retries: int = 3,
        retry_backoff: float = 0.5,
        retry_backoff_max: float = 30.0,
        request_dimensions: bool = False,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ValueError(f"OpenAIEmbedding: model must be a model name, got {model!r}")
        check_number(dimension, "OpenAIEmbedding: dimension", integer=True, low=1)
        check_endpoint(base_url, api_key_env, "OpenAIEmbedding: {}".format)
        check_number(batch_size, "OpenAIEmbedding: batch_size", integer=True, low=1)
        check_number(timeout, "OpenAIEmbedding: timeout", low=0.001)
        check_number(max_retries, "OpenAIEmbedding: max_retries", integer=True)
        check_number(retry_backoff, "OpenAIEmbedding: retry_backoff")
        check_number(retry_backoff_max, "OpenAIEmbedding: retry_backoff_max")
        self.model = model
        self._dimension = dimension
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.batch_size = batch_size
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.retry_backoff = float(retry_backoff)
        self.retry_backoff_max = float(retry_backoff_max)
        self.request_dimensions = bool(request_dimensions)
        self._clients = LoopClients(functools.partial(new_openai, self))

    def __repr__(self) -> str:
        return (
            f"OpenAIEmbedding(model={self.model!r}, dimension={self._dimension}, "
            f"base_url={self.base_url!r})"
        )

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def model_name(self) -> str:
        """What PgMemory records as the vectors' source (``embedding_source``)."""
        return f"openai:{self.model}"

    def api_key(self) -> str | None:
        """The key from the environment, read now (``None`` when unset or not configured)."""
        return env_api_key(self.api_key_env)

    async def aclose(self) -> None:
        """Close the HTTP client of the running event loop."""
        await self._clients.aclose()

    def configuration_problem(self) -> str | None:
        if is_local_url(self.base_url) or self.api_key() is not None:
            return None
        if self.api_key_env is None:
            return f"no API key for {self.base_url}: api_key_env is None"
        return f"no API key for {self.base_url}: set the environment variable {self.api_key_env}"

    async def embed_batch(self, texts: list[str]) -> list[list[float]]:
        checked = self.check_texts(texts)
        problem = self.configuration_problem() if checked else None
        if problem is not None:
            raise EmbeddingError(problem, kind="configuration")
        vectors: list[list[float]] = []
        for start in range(0, len(checked), self.batch_size):
            vectors.extend(await self._request(checked[start : start + self.batch_size]))
        return vectors

    async def _request(self, batch: list[str]) -> list[list[float]]:
        openai = import_optional("openai", "llm", needed_by="OpenAIEmbedding")
        request: dict[str, Any] = {"model": self.model, "input": batch, "encoding_format": "float"}
        if self.request_dimensions:
            request["dimensions"] = self._dimension
        started = time.perf_counter()
        client = await self._clients.client()
        try:
            # The raw body: the library's models would coerce true to 1.0.
            raw = await client.embeddings.with_raw_response.create(**request)
        except (openai.APIStatusError, openai.APIConnectionError) as error:
            kind, status, attempts, what = request_failure(
                openai, error, self.base_url, self.base_url
            )
            raise EmbeddingError(
                f"embeddings: {what}", kind=kind, attempts=attempts, status=status
            ) from error
        attempts = raw.retries_taken + 1
        logger.debug(
            "embeddings: model=%s texts=%d attempts=%d in %.0f ms",
            self.model,
            len(batch),
            attempts,
            (time.perf_counter() - started) * 1000,
        )
        return self._vectors(raw.content, len(batch), attempts)

    def _vectors(self, body: bytes, expected: int, attempts: int) -> list[list[float]]:
        def malformed(what: str) -> EmbeddingError:
            return EmbeddingError(
                f"embeddings: {self.base_url} answered HTTP 200 after {attempts} attempt(s), "
                f"but not with {expected} vector(s) of numbers: {what}",
                kind="malformed_output",
                attempts=attempts,
                status=200,
            )

        try:
            response = json.loads(body)
        except ValueError as error:  # not JSON (a gateway's HTML page), or not UTF-8
            raise malformed(f"the body is not JSON: {_short(body)}") from error
        data = response.get("data") if isinstance(response, dict) else None
        if not isinstance(data, list):
            raise malformed("the body has no list of embeddings ('data')")
        indexed: dict[int, Any] = {}
        for item in data:
            index = item.get("index") if isinstance(item, dict) else None
            if not is_int(index) or not 0 <= index < expected or index in indexed:
                raise malformed(f"an embedding has a missing, repeated or wrong index: {index!r}")
            indexed[index] = item.get("embedding")
        if len(indexed) != expected:
            raise malformed(f"{len(indexed)} vectors for {expected} texts")
        vectors: list[list[float]] = []
        for index in range(expected):
            vector = indexed[index]
            if not isinstance(vector, list):
                raise malformed(f"the embedding of text {index} is not a list: {_short(vector)}")
            if not all(_is_finite_number(value) for value in vector):
                bad = next(value for value in vector if not _is_finite_number(value))
                raise malformed(f"the embedding of text {index} holds {bad!r}, not a number")
            vectors.append([float(value) for value in vector])
        for index, vector in enumerate(vectors):
            if len(vector) != self._dimension:
                raise EmbeddingError(
                    f"embeddings: model {self.model!r} at {self.base_url} answered "
                    f"{len(vector)}-wide vectors (text {index}), but OpenAIEmbedding was "
                    f"declared {self._dimension} wide. Set dimension={len(vector)} (and "
                    "TULIP_MEMORY['VECTOR_DIMENSIONS'] to match), or request_dimensions=True "
                    "if the model can shorten its vectors.",
                    kind="wrong_width",
                    attempts=attempts,
                )
        return vectors


def _is_finite_number(value: Any) -> bool:
    return is_number(value) and math.isfinite(value)


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
