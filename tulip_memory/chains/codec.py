"""The codecs of both chains: JSON + zlib of delta payloads and message blocks, block
digests (BLAKE2b-128); raw deflate with a preset dictionary, or LZMA2, of LangGraph rows
(the first byte names the codec)."""

from __future__ import annotations

import hashlib
import json
import lzma
import struct
import zlib
from typing import Any

__all__ = [
    "ZDICT",
    "compress",
    "decompress",
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


DEFLATE = 1  # raw deflate with ZDICT
LZMA = 2  # raw LZMA2
ON_PARENT = 3  # raw deflate with ZDICT and the parent's (see _parent_dictionary)
LZMA_FROM = 2048  # an encoded value at least this long is tried with LZMA2 too
# The fastest preset: as small as the slowest on message lists, 30 times faster.
LZMA_FILTERS = [{"id": lzma.FILTER_LZMA2, "preset": 0}]
FRAMES_USED = struct.Struct(">H")

# What LangGraph's default serializer (msgpack) writes for the LangChain messages and a
# checkpoint, and the JSON of a row's header: the preset dictionary of every row. Stored
# rows are read with it: it never changes (a new one would take a new codec byte).
ZDICT = (
    b'"__start__","branch:to:agent","branch:to:tools","messages","__pregel_pull",'
    b'"__pregel_push","__interrupt__","__error__","__resume__","__scheduled__","msgpack",'
    b'"null","json","bytes","000000000001.'
    b"\x85\xa1v\x04\xa2ts\xd9 2026-01-01T00:00:00.000000+00:00\xa2id\xd9$"
    b"1f1efcbf-cf70-658c-8009-7c00d302f406\xadversions_seen\x83\xa9__input__\x80"
    b"\xa9__start__\x81\xa9__start__\xb5000000000006.4b531562\xa5agent\x81\xafbranch:to:agent"
    b"\xb0updated_channels\x92\xa9__start__\xa8messages\x84\xa6source\xa4loop\xa5input"
    b"\xa4step\x01\xa7parents\x80\xa6run_id"
    b"\x95\xc7\x8a\x05\x94\xbelangchain_core.messages.system\xadSystemMessage\x86\xa7content"
    b"\xa1x\xb1additional_kwargs\x80\xb1response_metadata\x80\xa4type\xa6system\xa4name\xc0"
    b"\xa2id\xa1a\xb3model_validate_json\xc7\x8b\x05\x94\xbdlangchain_core.messages.human"
    b"\xacHumanMessage\x86\xa7content\xa5hello\xb1additional_kwargs\x80\xb1response_metadata"
    b"\x80\xa4type\xa5human\xa4name\xc0\xa2id\xa1b\xb3model_validate_json\xc7\xd2\x05\x94"
    b"\xbalangchain_core.messages.ai\xa9AIMessage\x89\xa7content\xa0\xb1additional_kwargs\x80"
    b"\xb1response_metadata\x80\xa4type\xa2ai\xa4name\xc0\xa2id\xa1d\xaatool_calls\x91\x84"
    b"\xa4name\xa1n\xa4args\x81\xa1a\x01\xa2id\xa1c\xa4type\xa9tool_call\xb2invalid_tool_calls"
    b"\x90\xaeusage_metadata\xc0\xb3model_validate_json\xc7\xac\x05\x94"
    b"\xbclangchain_core.messages.tool\xabToolMessage\x89\xa7content\xa1r\xb1additional_kwargs"
    b"\x80\xb1response_metadata\x80\xa4type\xa4tool\xa4name\xc0\xa2id\xa1e\xactool_call_id"
    b"\xa1c\xa8artifact\xc0\xa6status\xa7success\xb3model_validate_json\xc7\xb3\x05\x94"
    b"\xbalangchain_core.messages.ai\xa9AIMessage\x89\xa7content\xa6answer"
    b"\xb1additional_kwargs\x80\xb1response_metadata\x80\xa4type\xa2ai\xa4name\xc0\xa2id\xa1f"
    b"\xaatool_calls\x90\xb2invalid_tool_calls\x90\xaeusage_metadata\xc0\xb3model_validate_json"
)


def _deflate(raw: bytes, dictionary: bytes) -> bytes:
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, dictionary)
    return deflate.compress(raw) + deflate.flush()


def compress(raw: bytes, parent: tuple[bytes, int] | None = None) -> bytes:
    """``raw`` compressed; ``parent``: a parent's dictionary and the frames of pending
    writes it holds, to deflate against."""
    if parent is None:
        packed = bytes([DEFLATE]) + _deflate(raw, ZDICT)
    else:
        dictionary, frames = parent
        packed = bytes([ON_PARENT]) + FRAMES_USED.pack(frames) + _deflate(raw, dictionary)
    if len(raw) >= LZMA_FROM:
        other = bytes([LZMA]) + lzma.compress(raw, lzma.FORMAT_RAW, filters=LZMA_FILTERS)
        if len(other) < len(packed):
            return other
    return packed


def decompress(packed: bytes, dictionary: bytes) -> bytes:
    codec = packed[0]
    if codec == LZMA:
        return lzma.decompress(packed[1:], lzma.FORMAT_RAW, filters=LZMA_FILTERS)
    if codec == DEFLATE:
        body = packed[1:]
    elif codec == ON_PARENT:
        body = packed[1 + FRAMES_USED.size :]
    else:
        raise ValueError(f"unknown codec {codec}")
    inflate = zlib.decompressobj(-15, dictionary)
    return inflate.decompress(body) + inflate.flush()
