"""The delta of a list against its parent: one splice between their common prefix and
common suffix (an appended turn inserts at the end, an edit touches only its span).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")

__all__ = ["Equal", "Splice", "common_prefix", "common_suffix"]

# How two items are compared: ``operator.eq`` (``==``) unless the caller passes its own
# test: a quicker one, or a stricter one where ``==`` is too loose for what is stored
# (``1 == True``). A false "different" only makes the splice longer; a false "same"
# drops a change.
Equal = Callable[[Any, Any], bool]


def common_prefix(old: Sequence[T], new: Sequence[T], equal: Equal | None = None) -> int:
    if len(new) >= len(old):
        # The common case, an append: one loop (in C with ``==``).
        head = new[: len(old)]
        if tuple(old) == tuple(head) if equal is None else all(map(equal, old, head)):
            return len(old)
    same = equal or operator.eq
    limit = min(len(old), len(new))
    index = 0
    while index < limit and same(old[index], new[index]):
        index += 1
    return index


def common_suffix(
    old: Sequence[T], new: Sequence[T], prefix: int, equal: Equal | None = None
) -> int:
    """Length of the common tail of ``old`` and ``new`` that does not overlap ``prefix``."""
    same = equal or operator.eq
    limit = min(len(old), len(new)) - prefix
    count = 0
    while count < limit and same(old[-1 - count], new[-1 - count]):
        count += 1
    return count


@dataclass(frozen=True)
class Splice(Generic[T]):
    """``new == old[:at] + inserted + old[at + removed:]``."""

    at: int
    removed: int
    inserted: list[T]

    @classmethod
    def between(cls, old: Sequence[T], new: list[T], equal: Equal | None = None) -> Splice[T]:
        """The splice from ``old`` to ``new``, items compared with ``equal`` (``==``)."""
        prefix = common_prefix(old, new, equal)
        suffix = common_suffix(old, new, prefix, equal)
        return cls(prefix, len(old) - prefix - suffix, new[prefix : len(new) - suffix])

    def applied(
        self, items: Sequence[Any], inserted: Sequence[Any] | None = None
    ) -> tuple[Any, ...]:
        """``items`` with the splice applied, as a new tuple; ``inserted``: other copies of
        :attr:`inserted` to put in."""
        new = self.inserted if inserted is None else inserted
        return (*items[: self.at], *new, *items[self.at + self.removed :])

    def apply(self, messages: list[T]) -> None:
        """Apply the splice to ``messages`` in place; ValueError when it does not fit."""
        if not 0 <= self.at <= self.at + self.removed <= len(messages):
            raise ValueError(f"splice {self.at}+{self.removed} outside {len(messages)} messages")
        messages[self.at : self.at + self.removed] = self.inserted
