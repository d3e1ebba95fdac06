"""S3Checkpointer details, against moto's S3 server (the real HTTP API) started by conftest."""

from __future__ import annotations

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
    import pytest

    from tulip_memory.exceptions import CheckpointCorruptError

    backend = s3_backend(s3_endpoint)
    await backend.save(make_state(1), "t", "cp")
    key = backend._data_key("t", "cp")
    metadata = backend.client.head_object(Bucket=backend.bucket, Key=key)["Metadata"]
    backend.client.put_object(Bucket=backend.bucket, Key=key, Body=b"\xff", Metadata=metadata)
    for checkpoint_id in (None, "cp"):
        with pytest.raises(CheckpointCorruptError, match=r"^checkpoint 'cp' of thread 't' cannot"):
            await backend.load("t", checkpoint_id)
