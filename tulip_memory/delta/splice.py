"""The message diff of a delta: one splice between the parent's messages and the new ones.

A delta stores the span between the common prefix and the common suffix of the two
message lists: an appended turn is a splice at the end that removes nothing; an edit or
a deletion of an earlier message touches only that span.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tulip_memory.messages import Message

__all__ = ["Splice", "common_prefix", "common_suffix"]


def common_prefix(old: Sequence[Message], new: Sequence[Message]) -> int:
    if len(new) >= len(old) and tuple(old) == tuple(new[: len(old)]):
        return len(old)  # the common case, an append: one comparison loop in C
    limit = min(len(old), len(new))
    index = 0
    while index < limit and old[index] == new[index]:
        index += 1
    return index


def common_suffix(old: Sequence[Message], new: Sequence[Message], prefix: int) -> int:
    """Length of the common tail of ``old`` and ``new`` that does not overlap ``prefix``."""
    limit = min(len(old), len(new)) - prefix
    count = 0
    while count < limit and old[-1 - count] == new[-1 - count]:
        count += 1
    return count


@dataclass(frozen=True)
class Splice:
    """``new == old[:at] + inserted + old[at + removed:]``."""

    at: int
    removed: int
    inserted: list[Message]

    @classmethod
    def between(cls, old: Sequence[Message], new: list[Message]) -> Splice:
        prefix = common_prefix(old, new)
        suffix = common_suffix(old, new, prefix)
        return cls(prefix, len(old) - prefix - suffix, new[prefix : len(new) - suffix])

    def apply(self, messages: list[Message]) -> None:
        """Apply the splice to ``messages`` in place; ValueError when it does not fit."""
        if not 0 <= self.at <= self.at + self.removed <= len(messages):
            raise ValueError(f"splice {self.at}+{self.removed} outside {len(messages)} messages")
        messages[self.at : self.at + self.removed] = self.inserted
