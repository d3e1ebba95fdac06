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

from tulip_memory.chains import codec
from tulip_memory.exceptions import CheckpointCorruptError

__all__ = [
    "Entry",
    "Record",
    "RowVersion",
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

_FRAME_LENGTH = struct.Struct(">I")

# A row's id and version (how many times it was written): a row as read or written once.
RowVersion = tuple[int, int]


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


def _pack(header: list[Any], parts: Sequence[bytes], parent: tuple[bytes, int] | None) -> bytes:
    text = json.dumps(header, ensure_ascii=False, separators=(",", ":"))
    return codec.compress(text.encode() + b"\n" + b"".join(parts), parent)


def _unpack(
    packed: bytes, where: str, dictionary: bytes = codec.ZDICT
) -> tuple[list[Any], bytes, int]:
    try:
        raw = codec.decompress(packed, dictionary)
        end = raw.index(b"\n")
        header = json.loads(raw[:end])
    except (IndexError, ValueError, zlib.error, lzma.LZMAError) as exc:
        raise CheckpointCorruptError(f"{where}: unreadable stored data ({exc})") from exc
    return header, raw, end + 1


def _frames(frames: bytes, where: str) -> Iterator[bytes]:
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
            codec.decompress(frame, codec.ZDICT)
            for frame in itertools.islice(_frames(frames, where), count)
        ]
    except (IndexError, ValueError, zlib.error, lzma.LZMAError) as exc:
        raise CheckpointCorruptError(f"{where}: unreadable pending writes ({exc})") from exc
    return b"".join([codec.ZDICT, record.checkpoint, record.metadata, versions, *writes])


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
    dictionary = codec.ZDICT
    if packed[:1] == bytes([codec.ON_PARENT]):
        if parent is None:
            raise CheckpointCorruptError(f"{where}: stored against a parent it is read without")
        (frames,) = codec.FRAMES_USED.unpack_from(packed, 1)
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
