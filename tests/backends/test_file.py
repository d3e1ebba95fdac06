"""FileCheckpointer: atomic writes and thread ids that cannot escape base_dir."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.backends.test_contract import make_state
from tulip_memory.backends import FileCheckpointer


def _all_files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


async def test_thread_ids_never_escape_base_dir(tmp_path):
    base = tmp_path / "base"
    checkpointer = FileCheckpointer(base)
    for thread_id in [
        "../x",
        "../../etc/passwd",
        "/abs/path",
        "..",
        ".",
        "a/../../b",
        "~",
        "x" * 255,
    ]:
        await checkpointer.save(make_state(1), thread_id, "../../../id")
        assert await checkpointer.load(thread_id) == make_state(1)
    outside = {p for p in tmp_path.rglob("*") if base not in p.parents and p != base}
    assert outside == set()
    for path in _all_files(base):
        assert path.parent.parent == base.resolve()
        assert not path.parent.name.startswith(".")


async def test_long_ids_are_hashed_and_still_listed(tmp_path):
    checkpointer = FileCheckpointer(tmp_path)
    thread_id, checkpoint_id = "ü" * 200, "é" * 128
    await checkpointer.save(make_state(2), thread_id, checkpoint_id)
    assert await checkpointer.list_checkpoints(thread_id) == [checkpoint_id]
    assert await checkpointer.load(thread_id, checkpoint_id) == make_state(2)
    assert all(len(p.name) < 255 for p in tmp_path.rglob("*"))


async def test_a_failing_write_leaves_the_previous_checkpoint_intact(tmp_path, monkeypatch):
    checkpointer = FileCheckpointer(tmp_path)
    first = await checkpointer.save(make_state(1), "t", "cp")
    before = {p: p.read_bytes() for p in _all_files(tmp_path)}

    def broken_fsync(fd: int) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="disk full"):
        await checkpointer.save(make_state(5), "t", "cp")  # replacing the same id
    with pytest.raises(OSError, match="disk full"):
        await checkpointer.save(make_state(6), "t")
    monkeypatch.undo()
    assert {p: p.read_bytes() for p in _all_files(tmp_path)} == before  # no temp file left
    assert await checkpointer.list_checkpoints("t") == [first]
    assert await checkpointer.load("t") == make_state(1)


WRITER = textwrap.dedent(
    """
    import asyncio, os, sys, time
    from tulip_memory.backends import FileCheckpointer
    from tulip_memory.messages import Message
    from tulip_memory.state import AgentState

    def stalled_fsync(fd):
        # The whole payload is written to the temporary file; hang before it is renamed.
        print("writing", flush=True)
        time.sleep(600)
    os.fsync = stalled_fsync
    state = AgentState(messages=[Message("user", "x" * 1000) for _ in range(2000)])
    asyncio.run(FileCheckpointer(sys.argv[1]).save(state, "t", "cp"))
    """
)


async def test_a_killed_writer_leaves_the_previous_checkpoint_intact(tmp_path):
    checkpointer = FileCheckpointer(tmp_path)
    await checkpointer.save(make_state(1), "t", "cp")
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path)],
        stdout=subprocess.PIPE,
        env=env,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert writer.stdout.readline().strip() == b"writing"
        temp_files = [p for p in _all_files(tmp_path) if p.name.startswith(".tmp-")]
        assert len(temp_files) == 1 and temp_files[0].stat().st_size > 1_000_000
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait()
    assert await checkpointer.load("t", "cp") == make_state(1)
    assert await checkpointer.list_checkpoints("t") == ["cp"]
    # A later save works and ignores the torn temporary file.
    await checkpointer.save(make_state(2), "t", "cp")
    assert await checkpointer.load("t") == make_state(2)


def test_base_dir_is_validated():
    for bad in ("", None, 3):
        with pytest.raises(ValueError, match="base_dir"):
            FileCheckpointer(bad)


async def test_a_dangling_checkpoint_entry_gives_a_clear_error_not_endless_retries(tmp_path):
    from tulip_memory.exceptions import CheckpointError

    checkpointer = FileCheckpointer(tmp_path)
    await checkpointer.save(make_state(1), "t", "c1")
    (saved,) = _all_files(tmp_path)
    order, _, rest = saved.name.partition(".")
    # Same checkpoint id, a higher order: listed first, and never readable.
    saved.with_name(f"{'9' * len(order)}.{rest}").symlink_to(tmp_path / "missing.json")
    with pytest.raises(CheckpointError, match="thread 't' vanished while being read 5 times"):
        await checkpointer.load("t")
