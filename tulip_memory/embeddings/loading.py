"""Choosing the embedder from settings.

``TULIP_MEMORY["EMBEDDER"]`` is the dotted path of a :class:`BaseEmbedding` subclass (or
of a factory returning one) and ``TULIP_MEMORY["EMBEDDER_OPTIONS"]`` the keyword
arguments it is called with::

    TULIP_MEMORY = {
        "EMBEDDER": "tulip_memory.embeddings.WordLlamaEmbedding",
        "EMBEDDER_OPTIONS": {"dim": 256},
    }

``get_embedder()`` returns ``None`` when ``EMBEDDER`` is ``None`` (the default): stores
then use their own HRR text encoding. :func:`resolve_embedder` is how a store reads its
``embedder=`` argument: ``None`` means the configured one (:func:`get_embedder`), the
string :data:`HRR` forces the HRR encoding whatever is configured, and a
:class:`BaseEmbedding` is used as given.
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
