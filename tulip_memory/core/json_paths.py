"""Where in a JSON-like value the first bad leaf or dict key is, as a path a reader can follow
(``state.messages[0].metadata['a b']``). Pure Python.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

__all__ = ["first_at"]

# A dict key shown as an attribute (``.name``); any other is shown as ``[repr]``.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def first_at(
    value: Any,
    path: str,
    bad: Callable[[Any], bool],
    *,
    bad_key: Callable[[Any], bool] | None = None,
) -> tuple[str, Any] | None:
    """``(path, leaf)`` of the first leaf (or key, tested by ``bad_key`` when given) for which
    ``bad`` is true, or None."""
    if isinstance(value, dict):
        key_test = bad if bad_key is None else bad_key
        for key, item in value.items():
            named = isinstance(key, str) and _NAME.match(key)
            step = f"{path}.{key}" if named else f"{path}[{key!r}]"
            if key_test(key):
                return f"{step} (the key)", key
            found = first_at(item, step, bad, bad_key=bad_key)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = first_at(item, f"{path}[{index}]", bad, bad_key=bad_key)
            if found is not None:
                return found
    elif bad(value):
        return path, value
    return None
