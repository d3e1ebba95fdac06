"""How many results a read may ask for: the one ``limit`` rule of every store and checkpointer.

An ``int`` >= 1, clamped to :data:`MAX_LIMIT` so that "a huge number" means "everything" in
every backend (the value as given would overflow a database integer).
"""

from __future__ import annotations

from tulip_memory.core.numbers import check_int

__all__ = ["MAX_LIMIT", "validate_limit"]

MAX_LIMIT = 2**31 - 1


def validate_limit(limit: object) -> int:
    """``limit``, at most :data:`MAX_LIMIT`; else ValueError."""
    return min(check_int(limit, "limit"), MAX_LIMIT)
