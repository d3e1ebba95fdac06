"""RedisCheckpointer: checkpoints in Redis through redis-py's asyncio client (extra ``redis``).

Per thread, ``<thread>:data`` (id -> JSON state), ``<thread>:index`` (ids by save order)
and ``<thread>:seq``; operations on several keys are Lua scripts, atomic for every client.
"""

from __future__ import annotations

from typing import Any

from tulip_memory.backends.base import BaseCheckpointer, decode_state, encode_state, import_optional
from tulip_memory.state import AgentState

__all__ = ["RedisCheckpointer"]

_SAVE = """
local order = redis.call('INCR', KEYS[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[3], order, ARGV[1])
return order
"""

_LOAD_LATEST = """
local ids = redis.call('ZREVRANGE', KEYS[1], 0, 0)
if #ids == 0 then return false end
local state = redis.call('HGET', KEYS[2], ids[1])
if not state then return false end
return {ids[1], state}
"""

# The counter goes too, in the same script: no concurrent save is ordered by a reset one.
_DELETE_ALL = """
local deleted = redis.call('DEL', KEYS[1], KEYS[2])
redis.call('DEL', KEYS[3])
return deleted
"""

_DELETE_ONE = """
redis.call('ZREM', KEYS[1], ARGV[1])
local deleted = redis.call('HDEL', KEYS[2], ARGV[1])
if redis.call('ZCARD', KEYS[1]) == 0 then redis.call('DEL', KEYS[1], KEYS[2], KEYS[3]) end
return deleted
"""


class RedisCheckpointer(BaseCheckpointer):
    """Checkpoints in Redis at ``url`` (or through ``client``), keys under ``prefix``;
    :meth:`aclose` closes the client."""

    def __init__(
        self,
        url: str = "redis://localhost:6379",
        *,
        prefix: str = "tulip_memory:checkpoint:",
        client: Any = None,
    ) -> None:
        redis_asyncio = import_optional("redis.asyncio", "redis")
        if not isinstance(prefix, str):
            raise ValueError(f"prefix must be a str, got {type(prefix).__name__}")
        self.url = url
        self.prefix = prefix
        self.client = client if client is not None else redis_asyncio.Redis.from_url(url)
        self._save_script = self.client.register_script(_SAVE)
        self._load_latest_script = self.client.register_script(_LOAD_LATEST)
        self._delete_one_script = self.client.register_script(_DELETE_ONE)
        self._delete_all_script = self.client.register_script(_DELETE_ALL)

    def __repr__(self) -> str:
        return f"<RedisCheckpointer url={self.url!r} prefix={self.prefix!r}>"

    def _keys(self, thread_id: str) -> tuple[str, str, str]:
        base = f"{self.prefix}{thread_id}:"
        return f"{base}index", f"{base}data", f"{base}seq"

    async def aclose(self) -> None:
        await self.client.aclose()
        await super().aclose()

    async def _save(
        self, state: AgentState, thread_id: str, checkpoint_id: str, *, may_exist: bool
    ) -> None:
        index, data, seq = self._keys(thread_id)
        await self._save_script(keys=[seq, data, index], args=[checkpoint_id, encode_state(state)])

    async def _load(self, thread_id: str, checkpoint_id: str | None) -> AgentState | None:
        index, data, _ = self._keys(thread_id)
        if checkpoint_id is None:
            found = await self._load_latest_script(keys=[index, data])
            if found is None:
                return None
            newest, payload = found
            checkpoint_id = newest.decode() if isinstance(newest, bytes) else newest
        else:
            payload = await self.client.hget(data, checkpoint_id)
        return None if payload is None else decode_state(payload, thread_id, checkpoint_id)

    async def _list(self, thread_id: str, limit: int) -> list[str]:
        index, _, _ = self._keys(thread_id)
        ids = await self.client.zrevrange(index, 0, limit - 1)
        return [i.decode() if isinstance(i, bytes) else i for i in ids]

    async def _delete(self, thread_id: str, checkpoint_id: str | None) -> bool:
        index, data, seq = self._keys(thread_id)
        if checkpoint_id is None:
            return bool(await self._delete_all_script(keys=[index, data, seq]))
        return bool(await self._delete_one_script(keys=[index, data, seq], args=[checkpoint_id]))
