"""Type-strict equality: when a delta may treat a value or a message as unchanged.

``==`` takes ``True``, ``1`` and ``1.0`` (and ``False``, ``0`` and ``0.0``) for one value,
although JSON writes each differently and reads it back with its own type. A delta that
took them for equal would drop the change, and the rebuilt state would have the parent's
value. These tests require the same type at every level.

Pure Python: importable without Django settings.
"""

from __future__ import annotations

from typing import Any

from tulip_memory.messages import Message

__all__ = ["same_json", "same_message"]


def same_json(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are the same JSON value: equal, of one type at every level.

    ``True`` is not ``1``, ``1`` is not ``1.0``, ``0.0`` is not ``-0.0`` (floats compare
    as JSON writes them), a tuple is not a list. Dicts compare as mappings (key order
    aside).
    """
    kind = type(a)
    if kind is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_json(item, b[key]) for key, item in a.items())
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(map(same_json, a, b))
    if isinstance(a, float):
        return repr(a) == repr(b)
    return bool(a == b)


def same_message(a: Message, b: Message) -> bool:
    """``a == b``, and :func:`same_json` for every field that may hold any value.

    The role and the content are typed already (a ``Role``, a ``str``), and a field that
    is ``None`` or empty in ``a`` is so in ``b`` when ``a == b``: only the others are
    walked, and only when ``==`` holds (a chat message costs little more than ``==``).
    """
    if a is b:
        return True
    if a != b:
        return False
    return (
        (a.tool_call_id is None or same_json(a.tool_call_id, b.tool_call_id))
        and (a.name is None or same_json(a.name, b.name))
        and (not a.metadata or same_json(a.metadata, b.metadata))
        and (
            not a.tool_calls
            or all(
                same_json((x.id, x.name, x.arguments), (y.id, y.name, y.arguments))
                for x, y in zip(a.tool_calls, b.tool_calls, strict=True)
            )
        )
    )
