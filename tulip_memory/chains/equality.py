"""Type-strict equality: when a delta may treat a value or a message as unchanged.

``==`` takes ``True``, ``1`` and ``1.0`` (and ``False``, ``0`` and ``0.0``) for one value,
although JSON writes each differently and reads it back with its own type. A delta that
took them for equal would drop the change, and the rebuilt state would have the parent's
value. These tests require the same type at every level.

Pure Python: importable without Django settings.
"""

from __future__ import annotations

import datetime
import math
import sys
from collections.abc import Sequence
from dataclasses import fields, is_dataclass
from decimal import Decimal
from typing import Any

from tulip_memory.messages import Message

__all__ = ["same_item", "same_json", "same_message"]


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


# Whether a class is a pydantic model, by class: pydantic's isinstance is slow.
_MODEL_CLASSES: dict[type, bool] = {}


def _is_model(kind: type) -> bool:
    found = _MODEL_CLASSES.get(kind)
    if found is None:
        # No class is a model while pydantic is not imported (it is an optional dependency).
        pydantic = sys.modules.get("pydantic")
        found = pydantic is not None and issubclass(kind, pydantic.BaseModel)
        _MODEL_CLASSES[kind] = found
    return found


# Types whose ``==`` between two instances of the type itself tells them apart exactly:
# equal values are the same value, and serialize alike.
_EXACT = frozenset({str, int, bool, bytes, type(None)})


def same_item(a: Any, b: Any) -> bool:
    """Whether ``b`` can stand for ``a`` in a list channel: the same value, of the same
    type at every level. What a splice leaves out is loaded back as the parent's item, so
    two items are the same only if either loads back as the other was put.

    Type-strict where ``==`` is not: ``0`` and ``False``, ``1`` and ``1.0``, ``{"score":
    1}`` and ``{"score": 1.0}`` are different items, and so are ``0.0`` and ``-0.0``, two
    :class:`~decimal.Decimal` of different exponents, two datetimes at one instant in
    different time zones and two dicts of the same items in another order. Dicts, lists
    and tuples are compared item by item; pydantic models (LangChain's messages) of one
    class by their fields, extra fields and private attributes (without
    ``BaseModel.__eq__``, which compares the declared fields only when the rest
    differs); dataclasses by their fields. Anything else is the same only when ``==``
    returns ``True`` itself: a result of another type (NumPy's arrays compare
    element-wise) or an exception from ``==`` tells it different, and the item is
    stored. Told different when unsure: that makes a splice no shorter than needed,
    never wrong.
    """
    if a is b:
        return True
    kind = type(a)
    if kind is not type(b):
        return False
    if kind in _EXACT:
        return bool(a == b)
    if kind is dict:
        return _same_dicts(a, b)
    if kind is list or kind is tuple:
        return _same_sequences(a, b)
    if _is_model(kind):
        if not _same_dicts(a.__dict__, b.__dict__):  # the fields, in order
            return False
        extra, other_extra = a.__pydantic_extra__, b.__pydantic_extra__
        if (extra or other_extra) and not same_item(extra, other_extra):
            return False
        private = getattr(a, "__pydantic_private__", None)
        other_private = getattr(b, "__pydantic_private__", None)
        return (not private and not other_private) or same_item(private, other_private)
    return _same_other(kind, a, b)


def _same_dicts(a: dict[Any, Any], b: dict[Any, Any]) -> bool:
    """:func:`same_item` of two dicts: the same keys in the same order, the same values.
    What a message's fields hold (text, empty dicts and lists) is told here, without a
    call each: the comparison of a message list is most of a ``put``'s splice."""
    if len(a) != len(b):
        return False
    for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True):
        if ka is not kb:
            if type(ka) is str:
                if type(kb) is not str or ka != kb:
                    return False
            elif not same_item(ka, kb):
                return False
        if va is vb:
            continue
        kind = type(va)
        if kind is not type(vb):
            return False
        if kind is str:
            if va != vb:
                return False
        elif kind is dict:
            if (va or vb) and not _same_dicts(va, vb):
                return False
        elif kind is list:
            if (va or vb) and not _same_sequences(va, vb):
                return False
        elif not same_item(va, vb):
            return False
    return True


def _same_sequences(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return len(a) == len(b) and all(map(same_item, a, b))


def _same_other(kind: type, a: Any, b: Any) -> bool:
    """:func:`same_item` of two values of ``kind``, not a dict, list, tuple nor model."""
    if kind is float:
        # 0.0 == -0.0, yet each loads back as itself; NaN != NaN: stored again.
        return bool(a == b and math.copysign(1.0, a) == math.copysign(1.0, b))
    if issubclass(kind, (list, tuple)):
        return _same_sequences(a, b)  # a named tuple, a list of a class of its own
    if issubclass(kind, dict):
        return _same_dicts(a, b)
    if is_dataclass(kind):
        return all(same_item(getattr(a, f.name), getattr(b, f.name)) for f in fields(kind))
    if issubclass(kind, (set, frozenset)):
        # Each of a's items must have one in b of its own type too (sets' == is not).
        return len(a) == len(b) and all(any(same_item(x, y) for y in b) for x in a)
    try:
        equal = a == b
    except Exception:  # whatever ``==`` raises: told different, stored
        return False
    if equal is not True:
        return False  # False, or not a bool (NumPy's arrays compare element-wise)
    if isinstance(a, Decimal):
        return bool(a.as_tuple() == b.as_tuple())
    if isinstance(a, (datetime.datetime, datetime.time)):
        return bool(a.tzinfo == b.tzinfo)
    return True
