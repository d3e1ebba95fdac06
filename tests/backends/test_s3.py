"""S3Checkpointer details, against moto's S3 server (the real HTTP API) started by conftest."""

from __future__ import annotations

import pytest

from tests.backends.conftest import s3_backend
from tests.backends.test_contract import make_state


async def test_markers_left_by_an_interrupted_save_are_skipped(s3_endpoint):
    backend = s3_backend(s3_endpoint, prefix="app/")
    await backend.save(make_state(1), "t", "kept")
    # A crash after the marker of a new checkpoint was written but not its data...
    orphan = backend._marker_key("t", "ghost", 10**19)
    backend.client.put_object(Bucket=backend.bucket, Key=orphan, Body=b"ghost")
    # ...and a stale marker of "kept" (from before a replacement) pointing at an old order.
    stale = backend._marker_key("t", "kept", 5)
    backend.client.put_object(Bucket=backend.bucket, Key=stale, Body=b"kept")
    assert await backend.list_checkpoints("t") == ["kept"]
    assert await backend.load("t") == make_state(1)
    assert await backend.load("t", "ghost") is None
    assert await backend.delete("t") is True
    listed = backend.client.list_objects_v2(Bucket=backend.bucket, Prefix="app/")
    assert listed.get("KeyCount", 0) == 0


async def test_keys_are_encoded_under_the_prefix(s3_endpoint):
    backend = s3_backend(s3_endpoint, prefix="p/")
    await backend.save(make_state(1), "../a b", "x/y")
    keys = [
        item["Key"] for item in backend.client.list_objects_v2(Bucket=backend.bucket)["Contents"]
    ]
    assert sorted(k.split("/")[2] for k in keys) == ["data", "order"]
    assert all(k.startswith("p/t-%2E%2E%2Fa%20b/") for k in keys)


async def test_a_damaged_object_raises_checkpoint_corrupt_error(s3_endpoint):
    from tulip_memory.exceptions import CheckpointCorruptError

    backend = s3_backend(s3_endpoint)
    await backend.save(make_state(1), "t", "cp")
    key = backend._data_key("t", "cp")
    metadata = backend.client.head_object(Bucket=backend.bucket, Key=key)["Metadata"]
    backend.client.put_object(Bucket=backend.bucket, Key=key, Body=b"\xff", Metadata=metadata)
    for checkpoint_id in (None, "cp"):
        with pytest.raises(CheckpointCorruptError, match=r"^checkpoint 'cp' of thread 't' cannot"):
            await backend.load("t", checkpoint_id)


class Crash(Exception):
    """The process dying at an S3 request."""


@pytest.mark.parametrize("crash_at", [1, 2, 3])
async def test_a_re_save_interrupted_between_its_writes_leaves_the_checkpoint_listed(
    s3_endpoint, monkeypatch, crash_at
):
    """Its requests: the new marker, the data object, the deletion of the old marker.
    Whichever one the process dies at, the checkpoint stays listed in its place or as the
    newest, and loads to its old or its new state."""
    backend = s3_backend(s3_endpoint)
    await backend.save(make_state(1), "t", "x")
    await backend.save(make_state(2), "t", "y")
    client = backend.client
    requests = []

    def dying(operation):
        real = getattr(client, operation)

        def call(**kwargs):
            requests.append(operation)
            if len(requests) == crash_at:
                raise Crash(operation)
            return real(**kwargs)

        return call

    for operation in ("put_object", "delete_objects"):
        monkeypatch.setattr(client, operation, dying(operation))
    with pytest.raises(Crash):
        await backend.save(make_state(3, tag="v2 "), "t", "x")
    monkeypatch.undo()
    assert requests == ["put_object", "put_object", "delete_objects"][:crash_at]
    listed = await backend.list_checkpoints("t")
    loaded = await backend.load("t", "x")
    if crash_at < 3:  # the data object is the old one: listed where it was
        assert (listed, loaded) == (["y", "x"], make_state(1))
        assert await backend.load("t") == make_state(2)
    else:
        assert (listed, loaded) == (["x", "y"], make_state(3, tag="v2 "))
        assert await backend.load("t") == make_state(3, tag="v2 ")
    # The next re-save goes through (a marker left by the crash stays skipped).
    await backend.save(make_state(4), "t", "x")
    assert await backend.list_checkpoints("t") == ["x", "y"]
    assert await backend.load("t") == make_state(4)
