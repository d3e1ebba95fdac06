"""How many results a read may ask for: the one ``limit`` rule of every store and checkpointer.

A limit is an ``int`` >= 1 (``bool`` refused). A limit above :data:`MAX_LIMIT` is clamped
to it: no store returns that many rows in one call, and a database integer (``bigint``,
SQLite's 64-bit integer) would overflow on the value as given, so "a huge number" always
means "everything", the same way in every backend.
"""

from __future__ import annotations

from tulip_memory.core.numbers import is_int

__all__ = ["MAX_LIMIT", "validate_limit"]

MAX_LIMIT = 2**31 - 1


def validate_limit(limit: object, *, name: str = "limit") -> int:
    """Return ``limit`` (at most :data:`MAX_LIMIT`), or raise ValueError naming ``name``."""
    if not is_int(limit):
        raise ValueError(f"{name} must be an int, got {type(limit).__name__}")
    if limit < 1:
        raise ValueError(f"{name} must be >= 1, got {limit}")
    return min(limit, MAX_LIMIT)
