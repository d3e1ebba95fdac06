"""Type-strict equality: when a chain may store a value as its parent's.

What a splice or a delta leaves out is rebuilt from the parent, so two values are the
same only if each loads back as the other was stored: ``==`` is too loose (``1 == True ==
1.0``, ``0.0 == -0.0``, dicts in another order). Told different when unsure: a delta is
then longer than needed, never wrong. Pure Python; pydantic is optional.
"""

from __future__ import annotations

import datetime
import functools
import operator
import sys
from collections.abc import Sequence
from dataclasses import fields, is_dataclass
from decimal import Decimal
from types import ModuleType
from typing import Any

from tulip_memory.messages import Message

__all__ = [
    "Key",
    "is_model",
    "key_of",
    "keys_packed",
    "models_packed",
    "same_item",
    "same_message",
]


def same_message(a: Message, b: Message) -> bool:
    """``a == b``, and :func:`same_item` for the fields that may hold any value."""
    if a is b:
        return True
    if a != b:
        return False
    # Role and content are typed; a field empty in ``a`` is empty in ``b`` once ``==``.
    return (
        (a.tool_call_id is None or same_item(a.tool_call_id, b.tool_call_id))
        and (a.name is None or same_item(a.name, b.name))
        and (not a.metadata or same_item(a.metadata, b.metadata))
        and (
            not a.tool_calls
            or all(
                same_item((x.id, x.name, x.arguments), (y.id, y.name, y.arguments))
                for x, y in zip(a.tool_calls, b.tool_calls, strict=True)
            )
        )
    )


# Whether a class is a pydantic model, by class: pydantic's isinstance is slow.
_MODEL_CLASSES: dict[type, bool] = {}


def is_model(kind: type) -> bool:
    found = _MODEL_CLASSES.get(kind)
    if found is None:
        # No class is a model while pydantic is not imported (it is an optional dependency).
        pydantic = sys.modules.get("pydantic")
        found = pydantic is not None and issubclass(kind, pydantic.BaseModel)
        _MODEL_CLASSES[kind] = found
    return found


# A value's type and its msgpack bytes: two values of one key are the same (same_item).
Key = tuple[type, bytes]


@functools.cache
def _option(ormsgpack: ModuleType) -> int:
    """Packing options that send each type msgpack would write as another's (tuples,
    subclasses, dataclasses, dates, enums, UUIDs, big ints) to the default hook, of which
    there is none: packing such a value raises."""
    names = ("BIG_INT", "DATACLASS", "DATETIME", "ENUM", "SUBCLASS", "TUPLE", "UUID")
    return functools.reduce(
        operator.or_, (getattr(ormsgpack, f"OPT_PASSTHROUGH_{name}") for name in names)
    )


def key_of(item: Any) -> Key | None:
    """``item``'s :data:`Key` (a pydantic model's: its fields'); None when msgpack could
    not tell it from a value of another type, or ormsgpack is not imported (LangGraph's
    serializer imports it). Equal bytes are one structure with one type at every level:
    ``1``, ``True`` and ``1.0``, ``0.0`` and ``-0.0``, key orders pack differently."""
    ormsgpack = sys.modules.get("ormsgpack")
    if ormsgpack is None:
        return None
    kind = type(item)
    if is_model(kind):
        if item.__pydantic_extra__ or getattr(item, "__pydantic_private__", None):
            return None
        item = item.__dict__
    try:
        packed = ormsgpack.packb(item, option=_option(ormsgpack))
    except TypeError:  # a type of its own, a lone surrogate, nesting too deep
        return None
    # Bytes, bytearrays and memoryviews all pack to msgpack's bin: a packing with one of
    # its markers (or the same byte in a text or a number) makes no key.
    if 0xC4 in packed or 0xC5 in packed or 0xC6 in packed:
        return None
    return kind, packed


_EXTRA = operator.attrgetter("__pydantic_extra__")
_PRIVATE = operator.attrgetter("__pydantic_private__")
_FIELDS = operator.attrgetter("__dict__")


def models_packed(items: Sequence[Any], kinds: list[type]) -> bytes | None:
    """The fields of ``items`` packed as one msgpack array (in C, no Python call per item),
    when they are pydantic models of the types ``kinds`` with no extra fields or private
    attributes; else None. It equals :func:`keys_packed` of keys (no bin marker in them)
    only if the items have those keys one by one: msgpack delimits each value."""
    ormsgpack = sys.modules.get("ormsgpack")
    if ormsgpack is None or list(map(type, items)) != kinds:
        return None
    try:
        if any(map(_EXTRA, items)) or any(map(_PRIVATE, items)):
            return None
        packed: bytes = ormsgpack.packb(list(map(_FIELDS, items)), option=_option(ormsgpack))
    except (AttributeError, TypeError):  # not a model; a value that makes no key
        return None
    return packed


def keys_packed(keys: Sequence[Key]) -> bytes:
    """What :func:`models_packed` gives for models of these keys: msgpack's header of an
    array of ``len(keys)`` items, then each key's bytes."""
    n = len(keys)
    if n < 16:
        header = bytes([0x90 | n])
    elif n < 2**16:
        header = b"\xdc" + n.to_bytes(2, "big")
    else:
        header = b"\xdd" + n.to_bytes(4, "big")
    return header + b"".join(key[1] for key in keys)


# Types whose ``==`` between two instances of the type itself tells them apart exactly:
# equal values are the same value, and serialize alike.
_EXACT = frozenset({str, int, bool, bytes, type(None)})


def same_item(a: Any, b: Any) -> bool:
    """Whether ``b`` loads back as ``a``: equal, of one type at every level.

    ``0``/``False``, ``1``/``1.0``, ``0.0``/``-0.0``, Decimals of other exponents,
    datetimes in other time zones and dicts in another key order differ. Pydantic models
    compare by fields, extra fields and private attributes (``BaseModel.__eq__`` skips
    some); anything else only when ``==`` returns ``True`` itself (NumPy compares
    element-wise) without raising.
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
    if is_model(kind):
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
    # Message fields (text, empty dicts and lists) inline: this loop is most of a put.
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
    if kind is float:
        return repr(a) == repr(b)  # 0.0 is not -0.0; NaN is NaN
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
