"""RedisCheckpointer specifics, against the machine's Redis (the contract is in test_contract)."""

from __future__ import annotations

from tests.backends.conftest import REDIS_URL
from tulip_memory.backends import RedisCheckpointer
from tulip_memory.messages import Message, Role
from tulip_memory.state import AgentState


async def _keys(checkpointer: RedisCheckpointer) -> list[bytes]:
    return [key async for key in checkpointer.client.scan_iter(match=f"{checkpointer.prefix}*")]


async def test_deleting_a_thread_leaves_no_key_behind(redis_prefix):
    # Deleting every checkpoint of a thread must not leave keys naming the thread (its
    # save counter included): deleting them one by one leaves none either.
    checkpointer = RedisCheckpointer(REDIS_URL, prefix=redis_prefix)
    try:
        state = AgentState(messages=[Message(Role.USER, "hello")])
        for thread_id in ("all-at-once", "one-by-one"):
            for _ in range(3):
                await checkpointer.save(state, thread_id)
        assert await checkpointer.delete("all-at-once") is True
        for checkpoint_id in await checkpointer.list_checkpoints("one-by-one"):
            assert await checkpointer.delete("one-by-one", checkpoint_id) is True
        assert await _keys(checkpointer) == []
        assert await checkpointer.delete("all-at-once") is False
        # A thread saved again after its deletion orders its new checkpoints as before.
        first = await checkpointer.save(state, "all-at-once")
        second = await checkpointer.save(state, "all-at-once")
        assert await checkpointer.list_checkpoints("all-at-once") == [second, first]
    finally:
        await checkpointer.aclose()


async def test_damaged_values_raise_checkpoint_corrupt_error_naming_the_checkpoint(redis_prefix):
    import pytest

    from tests.backends.test_contract import make_state
    from tulip_memory.exceptions import CheckpointCorruptError

    checkpointer = RedisCheckpointer(REDIS_URL, prefix=redis_prefix)
    try:
        older = await checkpointer.save(make_state(1), "t")
        newest = await checkpointer.save(make_state(2), "t")
        _, data, _ = checkpointer._keys("t")
        for garbage, cause in (
            (b"\xff\x00garbage", "UnicodeDecodeError"),
            (b'{"messages": [', "JSONDecodeError"),
            (b'{"bogus": true}', "ValueError"),
        ):
            await checkpointer.client.hset(data, newest, garbage)
            for checkpoint_id in (None, newest):
                with pytest.raises(CheckpointCorruptError) as raised:
                    await checkpointer.load("t", checkpoint_id)
                assert str(raised.value).startswith(
                    f"checkpoint {newest!r} of thread 't' cannot be read: "
                )
                assert type(raised.value.__cause__).__name__ == cause
        assert await checkpointer.load("t", older) == make_state(1)
        assert await checkpointer.list_checkpoints("t") == [newest, older]
        assert await checkpointer.delete("t", newest) is True
        assert await checkpointer.load("t") == make_state(1)
    finally:
        await checkpointer.aclose()
