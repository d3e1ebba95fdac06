"""NUL characters in JSON-like values, keys included: where one is (:func:`nul_at`) and the
value without them (:func:`without_nul`). PostgreSQL text cannot hold one. Pure Python.
"""

from __future__ import annotations

from typing import Any

from tulip_memory.core.json_paths import first_at

__all__ = ["nul_at", "without_nul"]


def nul_at(value: Any, path: str) -> str | None:
    """The path of the first NUL character in ``value`` (named ``path``), or None."""
    found = first_at(value, path, lambda leaf: isinstance(leaf, str) and "\x00" in leaf)
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
