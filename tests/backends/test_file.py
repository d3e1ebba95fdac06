"""FileCheckpointer: atomic writes and thread ids that cannot escape base_dir."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.backends.test_contract import make_state
from tulip_memory.backends import FileCheckpointer


def _all_files(root: Path) -> set[Path]:
    """The files under ``root``, but for the writer-lock files (in ``<base_dir>/.locks``)."""
    return {p for p in root.rglob("*") if p.is_file() and ".locks" not in p.parts}


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


async def test_a_save_is_acknowledged_only_once_its_directory_entry_is_durable(
    tmp_path, monkeypatch
):
    # The rename lives in the directory: until the directory is fsynced, a power loss can
    # lose the new name. A failing directory fsync must fail the save.
    checkpointer = FileCheckpointer(tmp_path)
    real_fsync = os.fsync
    synced: list[str] = []

    def directory_fsync_fails(fd: int) -> None:
        target = os.readlink(f"/proc/self/fd/{fd}")
        if os.path.isdir(target):
            raise OSError("directory fsync failed")
        synced.append(target)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", directory_fsync_fails)
    with pytest.raises(OSError, match="directory fsync failed"):
        await checkpointer.save(make_state(1), "t", "cp")
    assert synced  # the file itself was synced first
    monkeypatch.undo()
    await checkpointer.save(make_state(2), "t", "cp")
    assert await checkpointer.load("t", "cp") == make_state(2)


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


@given(st.text(max_size=40), st.text(max_size=40))
def test_file_names_stay_apart_on_case_insensitive_file_systems(first, second):
    from tulip_memory.backends.base import decode_name, encode_name

    if first != second:
        folded = {encode_name(v, fold_safe=True).casefold() for v in (first, second)}
        assert len(folded) == 2
    assert decode_name(encode_name(first, fold_safe=True)) in (first, None)


async def test_thread_and_checkpoint_names_differing_in_case_are_different_files(tmp_path):
    checkpointer = FileCheckpointer(tmp_path)
    await checkpointer.save(make_state(1), "T1", "CP")
    await checkpointer.save(make_state(2), "t1", "cp")
    await checkpointer.save(make_state(3), "t1", "Cp")
    # A file's name is "<order>.<checkpoint>.json": compare its folder and checkpoint parts.
    names = {f"{p.parent.name}/{p.name.split('.', 1)[1]}".casefold() for p in _all_files(tmp_path)}
    assert len(names) == 3
    assert await checkpointer.load("T1") == make_state(1)
    assert await checkpointer.load("t1", "cp") == make_state(2)
    assert await checkpointer.list_checkpoints("t1") == ["Cp", "cp"]


async def test_concurrent_resaves_of_one_id_leave_one_file_and_delete_removes_it(tmp_path):
    import asyncio

    checkpointer = FileCheckpointer(tmp_path)
    await asyncio.gather(*(checkpointer.save(make_state(n + 1), "t", "cp") for n in range(20)))
    [thread_dir] = [p for p in tmp_path.iterdir() if p.name != ".locks"]
    assert len(_all_files(thread_dir)) == 1
    assert await checkpointer.list_checkpoints("t") == ["cp"]
    assert await checkpointer.delete("t", "cp") is True
    assert await checkpointer.load("t", "cp") is None
    assert await checkpointer.list_checkpoints("t") == []


def test_saves_recreate_the_folder_of_a_thread_deleted_meanwhile(tmp_path):
    import asyncio

    from tests.processes import run_in_threads

    checkpointer = FileCheckpointer(tmp_path)

    def work(number: int) -> None:
        async def steps() -> None:
            for step in range(60):
                if number % 2:
                    await checkpointer.delete("t")
                else:
                    await checkpointer.save(make_state(1), "t", f"w{number}-{step}")

        asyncio.run(steps())

    assert run_in_threads(work, 4) == []
    for checkpoint_id in asyncio.run(checkpointer.list_checkpoints("t", limit=1000)):
        assert asyncio.run(checkpointer.load("t", checkpoint_id)) == make_state(1)


@pytest.mark.parametrize(
    ("content", "cause", "problem"),
    [
        (b'{"thread_id": "t", "checkpoint_id": "cp", "sta', "JSONDecodeError", "not a checkpoint"),
        (b'{"foo": 1}', "KeyError", "not a checkpoint file"),
        (b"[]", "TypeError", "holds a JSON list"),
        (b'{"state": "\xff"}', "UnicodeDecodeError", "not a checkpoint file"),
        (b'{"state": {"bogus": true}}', "ValueError", "'messages' list"),
        (b'{"state": {"messages": [5]}}', "ValueError", "Message.from_dict"),
    ],
)
async def test_a_damaged_file_raises_checkpoint_corrupt_error_naming_it(
    tmp_path, content, cause, problem
):
    from tulip_memory.exceptions import CheckpointCorruptError

    checkpointer = FileCheckpointer(tmp_path)
    await checkpointer.save(make_state(1), "t", "older")
    await checkpointer.save(make_state(2), "t", "cp")
    [path] = [p for p in _all_files(tmp_path) if p.name.endswith(".t-cp.json")]
    path.write_bytes(content)
    for checkpoint_id in (None, "cp"):
        with pytest.raises(CheckpointCorruptError) as raised:
            await checkpointer.load("t", checkpoint_id)
        message = str(raised.value)
        assert message.startswith(f"checkpoint 'cp' of thread 't' ({path}) cannot be read: ")
        assert problem in message
        assert type(raised.value.__cause__).__name__ == cause
    # The other checkpoints are untouched, listed, loadable; the damaged one can be deleted.
    assert await checkpointer.list_checkpoints("t") == ["cp", "older"]
    assert await checkpointer.load("t", "older") == make_state(1)
    assert await checkpointer.delete("t", "cp") is True
    assert await checkpointer.load("t") == make_state(1)


async def test_a_damaged_file_with_a_hashed_name_is_reported_by_list_and_load(tmp_path):
    from tulip_memory.exceptions import CheckpointCorruptError

    checkpointer = FileCheckpointer(tmp_path)
    long_id = "é" * 100  # hashed: its id is read from the file
    await checkpointer.save(make_state(1), "t", long_id)
    await checkpointer.save(make_state(2), "t", "kept")
    [path] = [p for p in _all_files(tmp_path) if ".h-" in p.name]
    path.write_bytes(b"garbage")
    with pytest.raises(CheckpointCorruptError, match=r"^a checkpoint of thread 't' \(.*\.h-"):
        await checkpointer.list_checkpoints("t")
    with pytest.raises(CheckpointCorruptError, match=rf"^checkpoint '{long_id}' of thread 't'"):
        await checkpointer.load("t", long_id)
    assert await checkpointer.list_checkpoints("t", limit=1) == ["kept"]  # the newest only
    assert await checkpointer.load("t") == make_state(2)
    await checkpointer.save(make_state(3), "t", "another")
    assert await checkpointer.delete("t", long_id) is True
    assert await checkpointer.list_checkpoints("t") == ["another", "kept"]
