"""FileCheckpointer: one JSON file per checkpoint under a base directory.

``<base_dir>/<thread>/<order>.<checkpoint>.json``, ids encoded with ``fold_safe`` (no name
can leave ``base_dir``; ids differing in case stay apart). Saves and deletes of a thread
hold its writer lock (``flock``/``msvcrt.locking`` on one of a bounded set of lock files);
writes go to a temporary file, fsynced, then renamed, so a crash never leaves a torn file.
A file that holds no checkpoint raises CheckpointCorruptError naming it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from tulip_memory.backends.base import (
    BlockingCheckpointer,
    corrupt_checkpoint,
    decode_name,
    encode_name,
    save_order_key,
    state_from_snapshot,
)
from tulip_memory.exceptions import CheckpointError
from tulip_memory.state import AgentState

__all__ = ["FileCheckpointer"]

_TEMP_PREFIX = ".tmp-"
_SUFFIX = ".json"
_LOAD_ATTEMPTS = 5
_LOCK_DIR = ".locks"  # never a thread folder: encoded names start with "t-" or "h-"
_LOCK_STRIPES = 64  # lock files: bounded, whatever the number of threads

if sys.platform == "win32":
    import msvcrt

    def _lock_file(fd: int) -> None:
        while True:  # LK_LOCK gives up after 10 s; a writer waits as long as it takes
            with contextlib.suppress(OSError):
                msvcrt.locking(fd, msvcrt.LK_LOCK, 1)
                return

else:
    import fcntl

    def _lock_file(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX)  # released when the file is closed


class FileCheckpointer(BlockingCheckpointer):
    """Checkpoints as files under ``base_dir`` (created on first save)."""

    def __init__(self, base_dir: str | os.PathLike[str] = "./checkpoints") -> None:
        if not isinstance(base_dir, str | os.PathLike) or not str(base_dir):
            raise ValueError(f"base_dir must be a non-empty path, got {base_dir!r}")
        self.base_dir = Path(base_dir).resolve()

    def __repr__(self) -> str:
        return f"<FileCheckpointer base_dir={str(self.base_dir)!r}>"

    @contextlib.contextmanager
    def _writer_lock(self, thread_id: str) -> Iterator[None]:
        digest = hashlib.blake2b(thread_id.encode(), digest_size=4).digest()
        lock_dir = self.base_dir / _LOCK_DIR
        lock_dir.mkdir(parents=True, exist_ok=True)
        path = lock_dir / f"{int.from_bytes(digest) % _LOCK_STRIPES:02d}.lock"
        with open(path, "a+b") as handle:
            _lock_file(handle.fileno())
            yield

    def _thread_dir(self, thread_id: str) -> Path:
        path = self.base_dir / encode_name(thread_id, fold_safe=True)
        # encode_name cannot produce separators or dot-names; this is a second fence.
        if path.parent != self.base_dir:
            raise ValueError(f"thread_id {thread_id!r} does not map inside base_dir")
        return path

    def _entries(self, thread_dir: Path, *, every_file: bool = False) -> list[_Entry]:
        try:
            names = os.listdir(thread_dir)
        except FileNotFoundError:
            return []
        entries: list[_Entry] = []
        for name in names:
            if name.startswith(_TEMP_PREFIX) or not name.endswith(_SUFFIX):
                continue
            order, _, encoded = name[: -len(_SUFFIX)].partition(".")
            if not order.isdigit():
                continue
            path = thread_dir / name
            checkpoint_id = decode_name(encoded)
            if checkpoint_id is None:
                try:
                    checkpoint_id = _read_document(path)["checkpoint_id"]
                except FileNotFoundError:
                    continue  # deleted or replaced meanwhile
                except (OSError, ValueError, KeyError, TypeError):
                    checkpoint_id = None
                if not isinstance(checkpoint_id, str):
                    checkpoint_id = None
            entries.append(_Entry(int(order), checkpoint_id, path, encoded))
        entries.sort(key=lambda entry: entry.order, reverse=True)
        if every_file:
            return entries
        newest: dict[str, _Entry] = {}  # the newest file of each checkpoint
        for entry in entries:
            newest.setdefault(entry.encoded, entry)
        return list(newest.values())

    def _save_sync(
        self, state: AgentState, thread_id: str, checkpoint_id: str, may_exist: bool
    ) -> None:
        thread_dir = self._thread_dir(thread_id)
        payload = json.dumps(
            {
                "thread_id": thread_id,
                "checkpoint_id": checkpoint_id,
                "state": state.to_checkpoint(),
            },
            separators=(",", ":"),
            ensure_ascii=False,
        ).encode()
        encoded = encode_name(checkpoint_id, fold_safe=True)
        name = f"{save_order_key():020d}.{encoded}{_SUFFIX}"
        with self._writer_lock(thread_id):
            previous = (
                [e for e in self._entries(thread_dir, every_file=True) if e.encoded == encoded]
                if may_exist
                else []
            )
            thread_dir.mkdir(parents=True, exist_ok=True)
            _atomic_write(thread_dir / name, payload)
            for entry in previous:
                with contextlib.suppress(FileNotFoundError):
                    entry.path.unlink()
            _remove_stale_temp_files(thread_dir)

    def _load_sync(self, thread_id: str, checkpoint_id: str | None) -> AgentState | None:
        # A file replaced or deleted between listing and reading is looked up again; a
        # bounded number of times, so a dangling entry (a broken link) cannot loop forever.
        for _attempt in range(_LOAD_ATTEMPTS):
            try:
                return self._load_listed(thread_id, checkpoint_id)
            except FileNotFoundError:
                continue
        raise CheckpointError(
            f"checkpoint files of thread {thread_id!r} vanished while being read "
            f"{_LOAD_ATTEMPTS} times in a row"
        )

    def _load_listed(self, thread_id: str, checkpoint_id: str | None) -> AgentState | None:
        wanted = None if checkpoint_id is None else encode_name(checkpoint_id, fold_safe=True)
        for entry in self._entries(self._thread_dir(thread_id)):
            if wanted is None or entry.encoded == wanted:
                return _read_state(entry.path, thread_id, checkpoint_id or entry.checkpoint_id)
        return None

    def _delete_sync(self, thread_id: str, checkpoint_id: str | None) -> bool:
        thread_dir = self._thread_dir(thread_id)
        with self._writer_lock(thread_id):
            if checkpoint_id is None:
                if not thread_dir.exists():
                    return False
                found = bool(self._entries(thread_dir))
                shutil.rmtree(thread_dir, ignore_errors=True)
                return found
            deleted = False
            encoded = encode_name(checkpoint_id, fold_safe=True)
            for entry in self._entries(thread_dir, every_file=True):
                if entry.encoded == encoded:
                    with contextlib.suppress(FileNotFoundError):
                        entry.path.unlink()
                        deleted = True
            with contextlib.suppress(OSError):
                thread_dir.rmdir()  # only succeeds when empty
            return deleted

    def _list_sync(self, thread_id: str, limit: int) -> list[str]:
        ids = []
        for entry in self._entries(self._thread_dir(thread_id))[:limit]:
            if entry.checkpoint_id is None:
                _read_state(entry.path, thread_id, None)  # raises, naming the file
            else:
                ids.append(entry.checkpoint_id)
        return ids


class _Entry(NamedTuple):
    order: int
    checkpoint_id: str | None
    path: Path
    encoded: str


def _read_document(path: Path) -> dict[str, Any]:
    document = json.loads(path.read_bytes())
    if not isinstance(document, dict):
        raise TypeError(f"the file holds a JSON {type(document).__name__}, not an object")
    return document


def _read_state(path: Path, thread_id: str, checkpoint_id: str | None) -> AgentState:
    where = str(path)
    try:
        document = _read_document(path)
        snapshot = document["state"]
    except FileNotFoundError:
        raise
    except (OSError, ValueError, KeyError, TypeError) as exc:
        problem = f"not a checkpoint file ({type(exc).__name__}: {exc})"
        raise corrupt_checkpoint(thread_id, checkpoint_id, problem, where=where) from exc
    return state_from_snapshot(snapshot, thread_id, checkpoint_id, where=where)


def _atomic_write(path: Path, payload: bytes) -> None:
    fd, temp_name = tempfile.mkstemp(prefix=_TEMP_PREFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp_name)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _remove_stale_temp_files(thread_dir: Path, max_age_seconds: float = 3600.0) -> None:
    cutoff = time.time() - max_age_seconds
    for name in os.listdir(thread_dir):
        if name.startswith(_TEMP_PREFIX):
            path = thread_dir / name
            with contextlib.suppress(OSError):
                if path.stat().st_mtime < cutoff:
                    path.unlink()
