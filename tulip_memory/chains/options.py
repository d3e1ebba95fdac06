"""The options both chain checkpointers take: bounded ints, checked before use."""

from __future__ import annotations

__all__ = ["MAX_DEPTH", "int_between"]

# The most parents a checkpoint is stored against (``max_chain_depth`` at most).
MAX_DEPTH = 10_000


def int_between(name: str, value: object, low: int, high: int | None = None) -> int:
    """``value`` if it is an int (not a bool) from ``low`` to ``high`` (no bound: None),
    else ValueError naming ``name``."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < low
        or (high is not None and value > high)
    ):
        bounds = f">= {low}" if high is None else f"from {low} to {high}"
        raise ValueError(f"{name} must be an int {bounds}, got {value!r}")
    return value
