"""Channel values stored as chains of splices, encoded by LangGraph's serializer.

A version of a list-valued channel (a message list that grew by a turn) is stored as
one :class:`~tulip_memory.delta.splice.Splice` against the version of the same channel
in the parent checkpoint — when this process wrote that one and still holds it — instead
of the whole list. :class:`Stored` is one value's worth; :func:`rebuild` turns the
versions of a chain back into values. No Django here: the saver does the I/O.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, is_dataclass
from decimal import Decimal
from typing import Any

from pydantic import BaseModel

from tulip_memory.chains.rows import Entry
from tulip_memory.delta.splice import Splice
from tulip_memory.exceptions import CheckpointCorruptError

__all__ = ["Head", "Stored", "encode", "next_head", "rebuild", "same_item"]

Dumps = Callable[[Any], tuple[str, bytes]]
Loads = Callable[[tuple[str, bytes]], Any]


@dataclass(frozen=True)
class Head:
    """The newest known version of a list channel, with private copies of its items."""

    version: str
    items: tuple[Any, ...]


@dataclass(frozen=True)
class Stored:
    """One version of a channel's value as stored, and what its cached head needs."""

    entry: Entry
    splice_at: int = 0  # where the splice starts (to rebuild the cached head)
    splice_removed: int = 0
    is_list: bool = False  # a list's version: the channel's next head


# Whether a class is a pydantic model, by class: pydantic's isinstance is slow.
_MODEL_CLASSES: dict[type, bool] = {}


def _is_model(kind: type) -> bool:
    found = _MODEL_CLASSES.get(kind)
    if found is None:
        found = _MODEL_CLASSES[kind] = issubclass(kind, BaseModel)
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


def encode(
    channel: str,
    version: str,
    value: Any,
    head: Head | None,
    dumps: Dumps,
) -> Stored:
    """How ``value`` is stored: a splice on ``head`` when that is smaller, else whole."""
    if isinstance(value, list) and head is not None:
        splice = Splice.between(head.items, value, same_item)
        if len(splice.inserted) < len(value):
            type_, data = dumps([splice.at, splice.removed, splice.inserted])
            return Stored(
                Entry(channel, version, type_, data, head.version),
                splice_at=splice.at,
                splice_removed=splice.removed,
                is_list=True,
            )
    type_, data = dumps(value)
    return Stored(Entry(channel, version, type_, data), is_list=isinstance(value, list))


def next_head(stored: Stored, head: Head | None, loads: Loads) -> Head | None:
    """The channel's cached head once ``stored`` is written, ``head`` the one cached now;
    None: none (the channel's next version is then stored whole).

    A splice is applied to ``head`` only when that is the version it was taken against
    (``entry.parent_version``): any other head (or none) gives None, never a list the
    stored data does not hold. A whole list is decoded from its data (private copies),
    whatever head is cached, even of the same version.
    """
    if not stored.is_list:
        return None
    entry = stored.entry
    if entry.parent_version:
        if head is None or head.version != entry.parent_version:
            return None
        _, _, inserted = loads((entry.type, entry.data))
        items = (
            *head.items[: stored.splice_at],
            *inserted,
            *head.items[stored.splice_at + stored.splice_removed :],
        )
    else:
        items = tuple(loads((entry.type, entry.data)))
    return Head(entry.version, items)


def rebuild(
    rows: Mapping[str, tuple[str, str, bytes]],
    version: str,
    loads: Loads,
    decoded: dict[tuple[str, str], Any],
    where: str,
) -> Any:
    """The value of ``version`` from ``rows`` ({version: (type, parent_version, data)}).

    ``decoded`` keeps the versions already decoded, by version and the version it is
    spliced on (of this channel, for the other versions a ``list`` rebuilds); each value
    is rebuilt on its own copy of the chain's whole list. A missing version or a splice
    that does not fit raises CheckpointCorruptError naming ``where``.
    """
    path = [version]
    while True:
        row = rows.get(path[-1])
        if row is None:
            raise CheckpointCorruptError(
                f"{where}: the stored version {path[-1]!r} its value is spliced on is missing"
            )
        if not row[1]:
            break
        if len(path) > len(rows):
            raise CheckpointCorruptError(f"{where}: its chain of versions has a cycle")
        path.append(row[1])

    def payload(step: str) -> Any:
        type_, parent, data = rows[step]
        # A version may be stored twice: a splice, and whole again in a later row.
        key = (step, parent)
        if key not in decoded:
            decoded[key] = loads((type_, data))
        return decoded[key]

    base = payload(path[-1])
    if len(path) == 1:
        return base
    value = list(base)
    for step in reversed(path[:-1]):
        at, removed, inserted = payload(step)
        try:
            Splice(at, removed, list(inserted)).apply(value)
        except ValueError as exc:
            raise CheckpointCorruptError(f"{where}: version {step!r}: {exc}") from exc
    return value
