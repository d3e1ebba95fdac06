"""Channel values as splice chains: a list channel's new version is stored as a splice of
its version in the parent when this process holds that one (:class:`Head`), else whole;
:func:`rebuild` turns a chain of versions back into a value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, cast

from tulip_memory.chains.equality import (
    Key,
    is_model,
    key_of,
    keys_packed,
    models_packed,
    same_item,
)
from tulip_memory.chains.rows import Entry
from tulip_memory.chains.splice import Splice
from tulip_memory.exceptions import CheckpointCorruptError

__all__ = ["Head", "Stored", "encode", "next_head", "rebuild"]

Dumps = Callable[[Any], tuple[str, bytes]]
Loads = Callable[[tuple[str, bytes]], Any]


@dataclass(frozen=True)
class Head:
    """The newest known version of a list channel, with private copies of its items and
    their keys (:func:`~tulip_memory.chains.equality.key_of`, computed when not given)."""

    version: str
    items: tuple[Any, ...]
    keys: tuple[Key | None, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        if len(self.keys) != len(self.items):
            object.__setattr__(self, "keys", tuple(map(key_of, self.items)))

    @cached_property
    def kinds(self) -> list[type]:
        return list(map(type, self.items))

    @cached_property
    def packed(self) -> bytes | None:
        """The items' keys as one msgpack array, when every item is a pydantic model with a key."""
        if None in self.keys or not all(map(is_model, set(self.kinds))):
            return None
        return keys_packed(cast(tuple[Key, ...], self.keys))

    def starts(self, value: list[Any]) -> bool:
        """Whether ``value`` begins with the items (a turn appended), told in C: see
        :func:`~tulip_memory.chains.equality.models_packed`."""
        if self.packed is None or len(value) < len(self.items):
            return False
        return models_packed(value[: len(self.items)], self.kinds) == self.packed


@dataclass(frozen=True)
class Stored:
    """One version of a channel's value as stored, and what its cached head needs."""

    entry: Entry
    is_list: bool = False  # a list's version: the channel's next head
    # The splice ``[at, removed, inserted]`` (serialized) from the head of version ``base``
    # to this value: the entry's own data for a splice; for a list stored whole, one taken
    # only to build the next head on the cached one instead of decoding the whole list.
    head_splice: tuple[str, bytes] | None = None
    base: str = ""


def _splice(head: Head, value: list[Any]) -> Splice[Any]:
    if head.starts(value):
        return Splice(len(head.items), 0, value[len(head.items) :])
    return Splice.between(head.items, value, same_item)


def encode(
    channel: str,
    version: str,
    value: Any,
    head: Head | None,
    dumps: Dumps,
    *,
    whole: bool = False,
) -> Stored:
    """How ``value`` is stored: a splice on ``head`` when that is smaller, else (or when
    ``whole``) whole."""
    is_list = isinstance(value, list)
    head_splice = None
    if is_list and head is not None:
        splice = _splice(head, value)
        if len(splice.inserted) < len(value):
            head_splice = dumps([splice.at, splice.removed, splice.inserted])
            if not whole:
                entry = Entry(channel, version, *head_splice, head.version)
                return Stored(entry, True, head_splice, head.version)
    type_, data = dumps(value)
    base = head.version if head_splice and head else ""
    return Stored(Entry(channel, version, type_, data), is_list, head_splice, base)


def next_head(stored: Stored, head: Head | None, loads: Loads) -> Head | None:
    """The channel's cached head once ``stored`` is written, ``head`` the one cached now;
    None: none (the channel's next version is then stored whole).

    A splice is applied to ``head`` only when that is the version it was taken against
    (``stored.base``): else a splice gives None, never a list the stored data does not
    hold, and a whole list is decoded from its data (private copies).
    """
    if not stored.is_list:
        return None
    entry = stored.entry
    if stored.head_splice is not None and head is not None and head.version == stored.base:
        at, removed, inserted = loads(stored.head_splice)
        splice = Splice(at, removed, inserted)
        keys = splice.applied(head.keys, [key_of(item) for item in inserted])
        return Head(entry.version, splice.applied(head.items), keys)
    if entry.parent_version:
        return None
    return Head(entry.version, tuple(loads((entry.type, entry.data))))


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
