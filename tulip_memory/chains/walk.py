"""A chain's parent walk, and the error a broken chain raises."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any, TypeVar

from tulip_memory.exceptions import CheckpointCorruptError

__all__ = ["corrupt", "walk_up", "where"]

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)


def where(thread_id: str, checkpoint_id: str) -> str:
    return f"checkpoint {checkpoint_id!r} of thread {thread_id!r}"


def corrupt(thread_id: str, checkpoint_id: str, problem: str) -> CheckpointCorruptError:
    return CheckpointCorruptError(f"{where(thread_id, checkpoint_id)}: {problem}")


def walk_up(
    first: T, parent_key: Callable[[T], K | None], known: Mapping[Any, T]
) -> tuple[list[T], K | None]:
    """``first``, its parent, ... up to a root (``parent_key`` None), and None; or the
    walk so far and the key of the parent it cannot take: missing from ``known``, or
    present (the walk goes round)."""
    walk = [first]
    while (key := parent_key(walk[-1])) is not None:
        parent = known.get(key)
        if parent is None or len(walk) > len(known):
            return walk, key
        walk.append(parent)
    return walk, None
