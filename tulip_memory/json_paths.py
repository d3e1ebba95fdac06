"""Where in a JSON-like value (dicts, lists, tuples, leaves) a bad leaf is, by path.

:func:`first_at` walks a value depth first and names the first leaf, or dict key, that a
test refuses, as a path a reader can follow: ``state.metadata.score``,
``state.messages[0].metadata['a b']``, ``state.metadata['a\\x00'] (the key)``. The layers
that refuse what a database column cannot hold (NUL characters, non-finite floats) name
the place with it.

Pure Python: importable without Django settings.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

__all__ = ["first_at"]

# A dict key shown as an attribute (``.name``); any other is shown as ``[repr]``.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def first_at(value: Any, path: str, bad: Callable[[Any], bool]) -> tuple[str, Any] | None:
    """``(path, leaf)`` of the first leaf or dict key of ``value`` (named ``path``) for
    which ``bad`` is true, or None when there is none."""
    if isinstance(value, dict):
        for key, item in value.items():
            named = isinstance(key, str) and _NAME.match(key)
            step = f"{path}.{key}" if named else f"{path}[{key!r}]"
            if bad(key):
                return f"{step} (the key)", key
            found = first_at(item, step, bad)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = first_at(item, f"{path}[{index}]", bad)
            if found is not None:
                return found
    elif bad(value):
        return path, value
    return None
