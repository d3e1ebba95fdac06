"""What a DjangoSaver row holds: a :class:`Record` (checkpoint, metadata, versions, the
:class:`Entry` of each value stored: whole or a splice) in ``data``, and frames of pending
:class:`Write` in ``writes``. Both are a JSON header and the serialized values, deflated
with a preset dictionary (a child also with its parent's record and first writes) or
LZMA2 when smaller; the first byte names the codec. Damage: CheckpointCorruptError.
"""

from __future__ import annotations

import itertools
import json
import lzma
import struct
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tulip_memory.exceptions import CheckpointCorruptError

__all__ = [
    "Entry",
    "Record",
    "Write",
    "chain_rows",
    "pack_record",
    "pack_writes",
    "record_bytes",
    "self_contained",
    "unpack_record",
    "unpack_walk",
    "unpack_writes",
]

DEFLATE = 1  # raw deflate with ZDICT
LZMA = 2  # raw LZMA2
ON_PARENT = 3  # raw deflate with ZDICT and the parent's (see _parent_dictionary)
LZMA_FROM = 2048  # an encoded value at least this long is tried with LZMA2 too
# The fastest preset: as small as the slowest on message lists, 30 times faster.
_LZMA_FILTERS = [{"id": lzma.FILTER_LZMA2, "preset": 0}]
_FRAME_LENGTH = struct.Struct(">I")
_FRAMES_USED = struct.Struct(">H")

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


@dataclass(frozen=True)
class Entry:
    """One channel value of a row: whole, or a splice of ``parent_version``'s list."""

    channel: str
    version: str
    type: str
    data: bytes
    parent_version: str = ""


@dataclass(frozen=True)
class Record:
    """What a checkpoint row's ``data`` holds."""

    checkpoint_type: str
    checkpoint: bytes
    metadata_type: str
    metadata: bytes
    versions: dict[str, Any]
    entries: tuple[Entry, ...]


@dataclass(frozen=True)
class Write:
    """A pending write of a task."""

    task_id: str
    task_path: str
    idx: int
    channel: str
    type: str
    data: bytes


def _deflate(raw: bytes, dictionary: bytes) -> bytes:
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, dictionary)
    return deflate.compress(raw) + deflate.flush()


def _compress(raw: bytes, parent: tuple[bytes, int] | None = None) -> bytes:
    """``raw`` compressed; ``parent``: a parent's dictionary and the frames of pending
    writes it holds, to deflate against."""
    if parent is None:
        packed = bytes([DEFLATE]) + _deflate(raw, ZDICT)
    else:
        dictionary, frames = parent
        packed = bytes([ON_PARENT]) + _FRAMES_USED.pack(frames) + _deflate(raw, dictionary)
    if len(raw) >= LZMA_FROM:
        other = bytes([LZMA]) + lzma.compress(raw, lzma.FORMAT_RAW, filters=_LZMA_FILTERS)
        if len(other) < len(packed):
            return other
    return packed


def _decompress(packed: bytes, dictionary: bytes) -> bytes:
    codec = packed[0]
    if codec == LZMA:
        return lzma.decompress(packed[1:], lzma.FORMAT_RAW, filters=_LZMA_FILTERS)
    if codec == DEFLATE:
        body = packed[1:]
    elif codec == ON_PARENT:
        body = packed[1 + _FRAMES_USED.size :]
    else:
        raise ValueError(f"unknown codec {codec}")
    inflate = zlib.decompressobj(-15, dictionary)
    return inflate.decompress(body) + inflate.flush()


def _pack(header: list[Any], parts: Sequence[bytes], parent: tuple[bytes, int] | None) -> bytes:
    text = json.dumps(header, ensure_ascii=False, separators=(",", ":"))
    return _compress(text.encode() + b"\n" + b"".join(parts), parent)


def _unpack(packed: bytes, where: str, dictionary: bytes = ZDICT) -> tuple[list[Any], bytes, int]:
    """The header, the raw bytes and where the parts start."""
    try:
        raw = _decompress(packed, dictionary)
        end = raw.index(b"\n")
        header = json.loads(raw[:end])
    except (IndexError, ValueError, zlib.error, lzma.LZMAError) as exc:
        raise CheckpointCorruptError(f"{where}: unreadable stored data ({exc})") from exc
    return header, raw, end + 1


def _frames(frames: bytes, where: str) -> Iterator[bytes]:
    """The compressed frames of a row's ``writes``."""
    at = 0
    while at < len(frames):
        if at + _FRAME_LENGTH.size > len(frames):
            raise CheckpointCorruptError(f"{where}: its pending writes are cut short")
        (length,) = _FRAME_LENGTH.unpack_from(frames, at)
        at += _FRAME_LENGTH.size
        yield frames[at : at + length]
        at += length


def _parent_dictionary(
    record: Record, frames: bytes, where: str, count: int | None = None
) -> bytes:
    """What a record stored against ``record`` (with ``frames``, its row's pending writes)
    is deflated with: ZDICT, the record without its values, the first ``count`` frames
    (all when None) decompressed."""
    versions = json.dumps(record.versions, separators=(",", ":")).encode()
    try:
        writes = [
            _decompress(frame, ZDICT) for frame in itertools.islice(_frames(frames, where), count)
        ]
    except (IndexError, ValueError, zlib.error, lzma.LZMAError) as exc:
        raise CheckpointCorruptError(f"{where}: unreadable pending writes ({exc})") from exc
    return b"".join([ZDICT, record.checkpoint, record.metadata, versions, *writes])


def _split(raw: bytes, start: int, lengths: Iterable[int], where: str) -> list[bytes]:
    parts = []
    for length in lengths:
        parts.append(raw[start : start + length])
        start += length
    if start != len(raw):
        raise CheckpointCorruptError(f"{where}: stored data of the wrong length")
    return parts


def pack_record(record: Record, parent: tuple[Record, bytes] | None = None) -> bytes:
    """``data`` of a row holding ``record``; ``parent``: the record and the pending writes
    (``writes``) of the row it is stored against."""
    entries = [
        [e.channel, e.version, e.parent_version, e.type, len(e.data)] for e in record.entries
    ]
    header = [
        record.checkpoint_type,
        len(record.checkpoint),
        record.metadata_type,
        len(record.metadata),
        record.versions,
        entries,
    ]
    on_parent = None
    if parent is not None:
        where = "the pending writes of a parent"
        frames = sum(1 for _ in _frames(parent[1], where))
        on_parent = (_parent_dictionary(parent[0], parent[1], where), frames)
    parts = [record.checkpoint, record.metadata, *(e.data for e in record.entries)]
    return _pack(header, parts, on_parent)


def unpack_record(packed: bytes, where: str, parent: tuple[Record, bytes] | None = None) -> Record:
    """The record of a row's ``data``; CheckpointCorruptError naming ``where`` if damaged.

    ``parent``: the record and the pending writes of the row it is stored against, which
    a record packed against them needs.
    """
    dictionary = ZDICT
    if packed[:1] == bytes([ON_PARENT]):
        if parent is None:
            raise CheckpointCorruptError(f"{where}: stored against a parent it is read without")
        (frames,) = _FRAMES_USED.unpack_from(packed, 1)
        dictionary = _parent_dictionary(parent[0], parent[1], where, frames)
    header, raw, start = _unpack(packed, where, dictionary)
    try:
        checkpoint_type, checkpoint_length, metadata_type, metadata_length, versions, rows = header
        lengths = [checkpoint_length, metadata_length, *(row[4] for row in rows)]
        checkpoint, metadata, *datas = _split(raw, start, lengths, where)
        entries = tuple(
            Entry(channel, version, type_, data, spliced_on)
            for (channel, version, spliced_on, type_, _), data in zip(rows, datas, strict=True)
        )
    except (TypeError, ValueError) as exc:
        raise CheckpointCorruptError(f"{where}: unreadable stored data ({exc})") from exc
    return Record(checkpoint_type, checkpoint, metadata_type, metadata, versions, entries)


def pack_writes(
    task_id: str, task_path: str, replace: bool, writes: Sequence[tuple[int, str, str, bytes]]
) -> bytes:
    """One frame of a row's ``writes``: a task's ``(idx, channel, type, data)`` writes.

    ``replace``: they replace the task's earlier writes of the same index (LangGraph's
    special writes); else an index the task already wrote keeps its first write.
    """
    header = [
        task_id,
        task_path,
        replace,
        [[idx, channel, type_, len(data)] for idx, channel, type_, data in writes],
    ]
    packed = _pack(header, [data for *_, data in writes], None)
    return _FRAME_LENGTH.pack(len(packed)) + packed


def unpack_writes(frames: bytes, where: str) -> list[Write]:
    """The pending writes of a row's ``writes``, the effective one per (task, index)."""
    found: dict[tuple[str, int], Write] = {}
    for frame in _frames(frames, where):
        header, raw, start = _unpack(frame, where)
        try:
            task_id, task_path, replaces, rows = header
            datas = _split(raw, start, (row[3] for row in rows), where)
            for (idx, channel, type_, _), data in zip(rows, datas, strict=True):
                key = (task_id, idx)
                if replaces or key not in found:
                    found[key] = Write(task_id, task_path, idx, channel, type_, data)
        except (TypeError, ValueError) as exc:
            raise CheckpointCorruptError(f"{where}: unreadable pending writes ({exc})") from exc
    return list(found.values())


def record_bytes(record: Record) -> int:
    """The bytes a record holds (its checkpoint, metadata and values, as serialized)."""
    return (
        len(record.checkpoint)
        + len(record.metadata)
        + sum(len(entry.data) for entry in record.entries)
    )


def unpack_walk(
    walk: Sequence[tuple[int, bytes, bytes]], where: str, memo: dict[int, Record]
) -> list[Record]:
    """The records of a walk: ``(row id, data, writes)`` of a row, its parent... up to a
    row holding every value; decoded from the last (each may be stored against the next).
    ``memo`` keeps the records decoded, by row id."""
    parent: tuple[Record, bytes] | None = None
    for row_id, data, writes in reversed(walk):
        if row_id not in memo:
            memo[row_id] = unpack_record(data, where, parent)
        parent = (memo[row_id], writes)
    return [memo[row_id] for row_id, _, _ in walk]


def chain_rows(walk: Sequence[Record]) -> dict[str, dict[str, tuple[str, str, bytes]]]:
    """The values a checkpoint reaches: ``{channel: {version: (type, parent_version, data)}}``
    of the records of its walk (itself first, then its parent... up to a self-contained
    row); the first record holding a version wins."""
    rows: dict[str, dict[str, tuple[str, str, bytes]]] = {}
    for record in walk:
        for e in record.entries:
            rows.setdefault(e.channel, {}).setdefault(e.version, (e.type, e.parent_version, e.data))
    return rows


def self_contained(walk: Sequence[Record]) -> Record:
    """The first record of ``walk`` holding every entry its values need (itself, or an
    ancestor's: each version it refers to and the versions its splices apply to)."""
    rows = chain_rows(walk)
    entries: dict[tuple[str, str], Entry] = {}
    for channel, version in walk[0].versions.items():
        versions = rows.get(channel, {})
        step = str(version)
        while step in versions and (channel, step) not in entries:
            type_, parent, data = versions[step]
            entries[(channel, step)] = Entry(channel, step, type_, data, parent)
            step = parent
    return replace(walk[0], entries=tuple(entries.values()))
