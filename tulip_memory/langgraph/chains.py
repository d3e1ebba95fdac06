"""Channel values stored as chains of splices, encoded by LangGraph's serializer.

A version of a list-valued channel (a message list that grew by a turn) is stored as
one :class:`~tulip_memory.delta.splice.Splice` against the version of the same channel
in the parent checkpoint — when this process wrote that one and still holds it — instead
of the whole list. :class:`Stored` is one value's worth; :func:`rebuild` turns the
versions of a chain back into values. No Django here: the saver does the I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from tulip_memory.delta.splice import Splice
from tulip_memory.exceptions import CheckpointCorruptError
from tulip_memory.langgraph_rows import Entry

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


def same_item(a: Any, b: Any) -> bool:
    """``a == b`` where that is quick to tell, for the items of a list channel.

    Pydantic models (LangChain's messages) of one class whose fields, extra fields and
    private attributes are equal are equal — what ``BaseModel.__eq__`` checks first —
    told here without that method's call, about half the time of ``==`` on a message
    list (whose every item differs in identity from the saver's private copy). Models
    whose fields differ are told different, which ``==`` may not (it then compares the
    declared fields only): that makes a splice no shorter than needed, never wrong.
    Anything else: ``==``.
    """
    if a is b:
        return True
    kind = type(a)
    if kind is type(b) and _is_model(kind):
        return bool(
            a.__dict__ == b.__dict__
            and a.__pydantic_extra__ == b.__pydantic_extra__
            and getattr(a, "__pydantic_private__", None) == getattr(b, "__pydantic_private__", None)
        )
    return bool(a == b)


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
    """The cached head after ``stored`` is written (private copies: decoded from its data)."""
    if not stored.is_list:
        return None
    entry = stored.entry
    if head is not None and head.version == entry.version:
        return head  # the same version stored again (whole, with every value)
    decoded = loads((entry.type, entry.data))
    if entry.parent_version:
        assert head is not None
        _, _, inserted = decoded
        items = (
            *head.items[: stored.splice_at],
            *inserted,
            *head.items[stored.splice_at + stored.splice_removed :],
        )
    else:
        items = tuple(decoded)
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
