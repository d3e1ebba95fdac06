"""NUL characters (U+0000) in JSON-like values: where one is, and the value without them.

PostgreSQL's text and JSON types cannot hold the character, so the layers that write
there refuse it by name (:func:`nul_at`) or drop it (:func:`without_nul`). Dict keys are
strings of the value too.

Pure Python: importable without Django settings.
"""

from __future__ import annotations

from typing import Any

from tulip_memory.core.json_paths import first_at

__all__ = ["nul_at", "without_nul"]


def _has_nul(value: Any) -> bool:
    return isinstance(value, str) and "\x00" in value


def nul_at(value: Any, path: str) -> str | None:
    """Where in ``value`` (named ``path``) the first NUL character is, or None:
    ``state.messages[0].content``, ``state.metadata['a b'] (the key)``."""
    found = first_at(value, path, _has_nul)
    return None if found is None else found[0]


def without_nul(value: Any) -> Any:
    """``value`` with every NUL character removed from its strings (dict keys too)."""
    if isinstance(value, str):
        return value.replace("\x00", "")
    if isinstance(value, list):
        return [without_nul(item) for item in value]
    if isinstance(value, dict):
        return {without_nul(key): without_nul(item) for key, item in value.items()}
    return value
