"""Choosing the embedder from settings.

``TULIP_MEMORY["EMBEDDER"]`` is the dotted path of a :class:`BaseEmbedding` subclass (or
of a factory returning one) and ``TULIP_MEMORY["EMBEDDER_OPTIONS"]`` the keyword
arguments it is called with::

    TULIP_MEMORY = {
        "EMBEDDER": "tulip_memory.embeddings.WordLlamaEmbedding",
        "EMBEDDER_OPTIONS": {"dim": 256},
    }

``get_embedder()`` returns ``None`` when ``EMBEDDER`` is ``None`` (the default): stores
then use their own HRR text encoding.
"""

from __future__ import annotations

from typing import Any

from django.utils.module_loading import import_string

from tulip_memory.conf import settings
from tulip_memory.embeddings.base import BaseEmbedding
from tulip_memory.exceptions import ConfigurationError

__all__ = ["get_embedder", "load_embedder"]


def load_embedder(path: str | Any, options: dict[str, Any] | None = None) -> BaseEmbedding:
    """Build the embedder ``path`` names (a dotted path, a class or a factory)."""
    factory = import_string(path) if isinstance(path, str) else path
    if not callable(factory):
        raise ConfigurationError(f"embedder {path!r} is not a class or a factory")
    embedder = factory(**(options or {}))
    if not isinstance(embedder, BaseEmbedding):
        raise ConfigurationError(
            f"embedder {path!r} built a {type(embedder).__name__}, not a BaseEmbedding"
        )
    return embedder


def get_embedder() -> BaseEmbedding | None:
    """The embedder of ``TULIP_MEMORY["EMBEDDER"]``, or ``None`` when none is configured."""
    path = settings.EMBEDDER
    if path is None:
        return None
    options = settings.EMBEDDER_OPTIONS
    if not isinstance(options, dict):
        raise ConfigurationError("TULIP_MEMORY['EMBEDDER_OPTIONS'] must be a dict")
    return load_embedder(path, options)
