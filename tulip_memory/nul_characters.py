"""NUL characters (U+0000) in JSON-like values: where one is, and the value without them.

PostgreSQL's text and JSON types cannot hold the character, so the layers that write
there refuse it by name (:func:`nul_at`) or drop it (:func:`without_nul`). Dict keys are
strings of the value too.

Pure Python: importable without Django settings.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["nul_at", "without_nul"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def nul_at(value: Any, path: str) -> str | None:
    """Where in ``value`` (named ``path``) the first NUL character is, or None:
    ``state.messages[0].content``, ``state.metadata['a b'] (the key)``."""
    if isinstance(value, str):
        return path if "\x00" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            named = isinstance(key, str) and _NAME.match(key)
            step = f"{path}.{key}" if named else f"{path}[{key!r}]"
            if isinstance(key, str) and "\x00" in key:
                return f"{step} (the key)"
            found = nul_at(item, step)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = nul_at(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


def without_nul(value: Any) -> Any:
    """``value`` with every NUL character removed from its strings (dict keys too)."""
    if isinstance(value, str):
        return value.replace("\x00", "")
    if isinstance(value, list):
        return [without_nul(item) for item in value]
    if isinstance(value, dict):
        return {without_nul(key): without_nul(item) for key, item in value.items()}
    return value
