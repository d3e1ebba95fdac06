"""Where in a JSON-like value (dicts, lists, tuples, leaves) a bad leaf is, by path.

:func:`first_at` walks a value depth first and names the first leaf, or dict key, that a
test refuses (keys may have a test of their own), as a path a reader can follow:
``state.metadata.score``, ``state.messages[0].metadata['a b']``,
``state.metadata['a\\x00'] (the key)``. The layers that refuse what a database column
cannot hold (NUL characters, non-finite floats) name the place with it; so does the
check of what any checkpoint can hold (non-str dict keys, lone surrogates).

Pure Python: importable without Django settings.
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
    """``(path, leaf)`` of the first leaf or dict key of ``value`` (named ``path``) for
    which ``bad`` is true, or None when there is none.

    ``bad_key``, when given, is the test of dict keys instead of ``bad``.
    """
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
