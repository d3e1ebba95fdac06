"""Channel values stored as chains of splices, encoded by LangGraph's serializer.

A version of a list-valued channel (a message list that grew by a turn) is stored as
one :class:`~tulip_memory.delta.splice.Splice` against an earlier version of the same
channel — the one this process wrote or read last — instead of the whole list; every
``max_chain_depth`` versions the whole list is stored again, so a load applies at most
that many splices. :class:`Stored` is one row's worth; :func:`rebuild` turns the rows of
a chain back into values. No Django here: the saver does the I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tulip_memory.delta.splice import Splice
from tulip_memory.exceptions import CheckpointCorruptError

__all__ = ["EMPTY", "Head", "Stored", "encode", "next_head", "rebuild"]

EMPTY = "empty"  # the type of a version without a value (LangGraph's own marker)

Dumps = Callable[[Any], tuple[str, bytes]]
Loads = Callable[[tuple[str, bytes]], Any]


@dataclass(frozen=True)
class Head:
    """The newest known version of a list channel, with private copies of its items."""

    version: str
    items: tuple[Any, ...]
    base_version: str
    depth: int


@dataclass(frozen=True)
class Stored:
    """What one blob row holds."""

    channel: str
    version: str
    type: str
    data: bytes | None
    parent_version: str = ""  # a splice of this version's list; "" for a whole value
    base_version: str = ""
    depth: int = 0
    splice_at: int = 0  # where the splice starts (to rebuild the cached head)
    splice_removed: int = 0


def encode(
    channel: str,
    version: str,
    value: Any,
    head: Head | None,
    *,
    max_chain_depth: int,
    dumps: Dumps,
) -> Stored:
    """The row of ``value``: a splice on ``head`` when that is smaller, else whole."""
    if isinstance(value, list) and head is not None and head.depth < max_chain_depth:
        splice = Splice.between(head.items, value)
        if len(splice.inserted) < len(value):
            type_, data = dumps([splice.at, splice.removed, splice.inserted])
            return Stored(
                channel,
                version,
                type_,
                data,
                parent_version=head.version,
                base_version=head.base_version,
                depth=head.depth + 1,
                splice_at=splice.at,
                splice_removed=splice.removed,
            )
    type_, data = dumps(value)
    return Stored(channel, version, type_, data, base_version=version)


def next_head(stored: Stored, head: Head | None, loads: Loads) -> Head | None:
    """The cached head after ``stored`` is written (private copies: decoded from its data)."""
    if stored.type == EMPTY or stored.data is None:
        return None
    decoded = loads((stored.type, stored.data))
    if stored.parent_version:
        assert head is not None
        _, _, inserted = decoded
        items = (
            *head.items[: stored.splice_at],
            *inserted,
            *head.items[stored.splice_at + stored.splice_removed :],
        )
    elif isinstance(decoded, list):
        items = tuple(decoded)
    else:
        return None
    return Head(stored.version, items, stored.base_version, stored.depth)


def rebuild(
    rows: Mapping[str, tuple[str, str, bytes | None]],
    version: str,
    loads: Loads,
    memo: dict[str, Any],
    where: str,
) -> Any:
    """The value of ``version`` from ``rows`` ({version: (type, parent_version, data)}).

    ``memo`` keeps the values already rebuilt (of this channel); splices apply to
    copies. A missing parent raises CheckpointCorruptError naming ``where``.
    """
    path = []
    cursor = version
    while cursor not in memo:
        row = rows.get(cursor)
        if row is None:
            raise CheckpointCorruptError(
                f"{where}: the stored version {cursor!r} its value is spliced on is missing"
            )
        path.append(cursor)
        parent = row[1]
        if not parent:
            break
        if len(path) > len(rows):
            raise CheckpointCorruptError(f"{where}: its chain of versions has a cycle")
        cursor = parent
    for step in reversed(path):
        type_, parent, data = rows[step]
        decoded = loads((type_, data))
        if not parent:
            memo[step] = decoded
            continue
        at, removed, inserted = decoded
        value = list(memo[parent])
        try:
            Splice(at, removed, list(inserted)).apply(value)
        except ValueError as exc:
            raise CheckpointCorruptError(f"{where}: version {step!r}: {exc}") from exc
        memo[step] = value
    return memo[version]
