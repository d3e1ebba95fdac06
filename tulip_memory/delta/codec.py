"""Encoding of delta-checkpoint payloads and message blocks, and the message diff.

Payloads are compact JSON compressed with zlib (whose Adler-32 check catches most
corruption; block digests catch the rest). A delta payload holds only what changed:

* ``"s": [at, removed, [messages...]]`` — one splice of the message list: drop
  ``removed`` messages at ``at`` and insert these (an append is ``at = len(parent)``,
  ``removed = 0``; an edit or a deletion of an earlier message touches only the span
  between the common prefix and the common suffix);
* ``"ms": {key: value}`` / ``"md": [key...]`` — metadata keys set / removed;
* ``"t"`` — the state's ``thread_id`` when it changed;
* ``"n"`` — the resulting number of messages (checked when rebuilding).

A full payload holds ``"m"`` (the metadata), ``"t"`` and ``"n"``; its messages are the
blocks listed in its metadata.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Sequence
from typing import Any

from tulip_memory.messages import Message

__all__ = [
    "common_prefix",
    "common_suffix",
    "digest",
    "dumps",
    "pack",
    "unpack",
]


def dumps(value: Any, *, canonical: bool = False) -> bytes:
    return json.dumps(
        value, separators=(",", ":"), ensure_ascii=False, sort_keys=canonical
    ).encode()


def pack(value: Any, level: int, *, canonical: bool = False) -> tuple[bytes, bytes]:
    """(raw JSON, compressed JSON) of ``value``."""
    raw = dumps(value, canonical=canonical)
    return raw, zlib.compress(raw, level)


def unpack(data: bytes) -> Any:
    """Inverse of :func:`pack`; raises ValueError (or zlib.error) on damaged data."""
    return json.loads(zlib.decompress(data))


def digest(raw: bytes) -> str:
    """Content digest of a block's raw JSON (BLAKE2b, 128 bits, hex)."""
    return hashlib.blake2b(raw, digest_size=16).hexdigest()


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
