"""TEST DOUBLE of an OpenAI-compatible ``/v1/embeddings`` server, on 127.0.0.1.

Not a model: it answers ``POST /v1/embeddings`` with deterministic vectors (seeded by each
input text's SHA-256, ``width`` wide, or the request's ``dimensions``), in the protocol's
shape (``{"object": "list", "data": [{"index": i, "embedding": [...]}], "usage": ...}``),
and records every request. It reuses the chat double's server, script and recording
(:class:`tests.llm.chat_server.ChatServerDouble`): a scripted :class:`Reply` may be an
HTTP error (429 with ``Retry-After``, 500), a delay (to provoke a timeout), or an
``answer`` that bends the reply — ``{"width": n}`` (vectors of another width) or
``{"drop": 1}`` (one vector fewer than texts). Without a script every request is
answered normally.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

from tests.llm.chat_server import ChatServerDouble, Reply


def vector_of(text: str, width: int) -> list[float]:
    """The double's vector of ``text``: what a test expects back."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    generator = random.Random(seed)
    return [generator.uniform(-1, 1) for _ in range(width)]


class EmbeddingServerDouble(ChatServerDouble):
    """The embeddings double; use as a context manager."""

    def __init__(self, width: int = 8, *, keep_alive: bool = False) -> None:
        super().__init__(keep_alive=keep_alive)
        self.width = width

    def _next(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            return self.script.popleft() if self.script else Reply()

    def _completion(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        bend = reply.answer or {}
        texts = body.get("input") or []
        texts = [texts] if isinstance(texts, str) else list(texts)
        width = bend.get("width") or body.get("dimensions") or self.width
        data = [
            {"object": "embedding", "index": index, "embedding": vector_of(text, width)}
            for index, text in enumerate(texts)
        ]
        del data[len(data) - bend.get("drop", 0) :]
        tokens = sum(len(text) for text in texts) // 4
        return {
            "object": "list",
            "data": data,
            "model": body.get("model", ""),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
