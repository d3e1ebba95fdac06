"""Limits both chain checkpointers share."""

from __future__ import annotations

__all__ = ["MAX_DEPTH"]

# The most parents a checkpoint is stored against (``max_chain_depth`` at most).
MAX_DEPTH = 10_000
