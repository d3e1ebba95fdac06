"""The JSON of a delta record's payload, written and read here only.

Delta: ``n`` message count, ``s`` ``[at, removed, [messages]]`` splice, ``ms`` metadata
keys set, ``md`` keys dropped, ``t`` thread id if changed. Full: ``n``, ``m`` metadata,
``t``; its messages are the blocks its record refers to.
"""

from __future__ import annotations

from typing import Any

from tulip_memory.chains.equality import same_item
from tulip_memory.chains.splice import Splice
from tulip_memory.messages import Message

__all__ = ["apply_delta", "check_count", "delta_payload", "full_payload", "read_full"]

MESSAGE_COUNT = "n"
METADATA = "m"
METADATA_DROPPED = "md"
METADATA_SET = "ms"
SPLICE = "s"
THREAD_ID = "t"

_MISSING = object()


def full_payload(metadata: dict[str, Any], thread_id: str | None, count: int) -> dict[str, Any]:
    return {MESSAGE_COUNT: count, METADATA: metadata, THREAD_ID: thread_id}


def delta_payload(
    splice: Splice,
    count: int,
    *,
    parent_metadata: dict[str, Any],
    metadata: dict[str, Any],
    parent_thread_id: str | None,
    thread_id: str | None,
) -> dict[str, Any]:
    payload: dict[str, Any] = {MESSAGE_COUNT: count}
    if splice.removed or splice.inserted:
        payload[SPLICE] = [splice.at, splice.removed, [m.to_dict() for m in splice.inserted]]
    changed = {
        k: v for k, v in metadata.items() if not same_item(parent_metadata.get(k, _MISSING), v)
    }
    if changed:
        payload[METADATA_SET] = changed
    dropped = [k for k in parent_metadata if k not in metadata]
    if dropped:
        payload[METADATA_DROPPED] = dropped
    if thread_id != parent_thread_id:
        payload[THREAD_ID] = thread_id
    return payload


def read_full(payload: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """(metadata, state thread id) of a full payload; KeyError when one is missing."""
    return payload[METADATA], payload[THREAD_ID]


def apply_delta(
    payload: dict[str, Any],
    messages: list[Message],
    metadata: dict[str, Any],
    thread_id: str | None,
) -> tuple[dict[str, Any], str | None, int | None]:
    """Apply a delta payload to the parent's state.

    ``messages`` is changed in place; returns the new metadata, the new state thread id
    and where the splice started (None when the messages did not change). Damaged
    payloads raise ValueError, KeyError, TypeError or IndexError.
    """
    at = None
    if SPLICE in payload:
        at, removed, inserted = payload[SPLICE]
        Splice(at, removed, [Message.from_dict(m) for m in inserted]).apply(messages)
    metadata = {**metadata, **payload.get(METADATA_SET, {})}
    for key in payload.get(METADATA_DROPPED, ()):
        metadata.pop(key, None)
    return metadata, payload.get(THREAD_ID, thread_id), at


def check_count(payload: dict[str, Any], messages: list[Message]) -> None:
    if payload[MESSAGE_COUNT] != len(messages):
        raise ValueError(f"{len(messages)} messages rebuilt, {payload[MESSAGE_COUNT]} expected")
