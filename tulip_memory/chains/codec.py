"""JSON + zlib of delta payloads and message blocks; block digests (BLAKE2b-128)."""

from __future__ import annotations

import hashlib
import json
import zlib
from typing import Any

__all__ = [
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
