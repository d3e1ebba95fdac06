"""The extraction modes the memory managers of this process were built with (for the
check E044).
"""

from __future__ import annotations

__all__ = ["extract_modes_in_use", "note_extract_mode"]

_modes_in_use: set[str] = set()


def note_extract_mode(mode: str) -> None:
    """Record that a manager of this process runs its extractions in ``mode``."""
    _modes_in_use.add(mode)


def extract_modes_in_use() -> frozenset[str]:
    """The modes of every manager built so far in this process."""
    return frozenset(_modes_in_use)
