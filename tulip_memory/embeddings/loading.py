"""Choosing the embedder from ``TULIP_MEMORY["EMBEDDER"]`` (a dotted path to a
:class:`BaseEmbedding` or a factory) and ``["EMBEDDER_OPTIONS"]`` (its keyword arguments).
None configured: the stores use HRR, as for a store's ``embedder=HRR``.
"""

from __future__ import annotations

from typing import Any

from django.utils.module_loading import import_string

from tulip_memory.conf import settings
from tulip_memory.embeddings.base import BaseEmbedding
from tulip_memory.exceptions import ConfigurationError

__all__ = ["HRR", "get_embedder", "load_embedder", "resolve_embedder"]

# ``embedder=HRR``: the store's own HRR encoding, even when an EMBEDDER is configured.
HRR = "hrr"


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


def resolve_embedder(embedder: BaseEmbedding | str | None) -> BaseEmbedding | None:
    """A store's ``embedder=`` argument as an embedder, or ``None`` for HRR (see above)."""
    if embedder is None:
        return get_embedder()
    if isinstance(embedder, str):
        if embedder == HRR:
            return None
        raise ValueError(
            f"embedder must be a BaseEmbedding, None (TULIP_MEMORY['EMBEDDER']) or "
            f"{HRR!r} (the HRR encoding), got the string {embedder!r}"
        )
    if not isinstance(embedder, BaseEmbedding):
        raise ValueError(
            f"embedder must be a BaseEmbedding, None or {HRR!r}, got {type(embedder).__name__}"
        )
    return embedder
