"""The checkpointer contract (:class:`BaseCheckpointer`) and what every backend shares.

``save`` / ``load`` / ``list_checkpoints`` / ``delete`` an :class:`~tulip_memory.state.AgentState`
per thread (docs/checkpointers.md). Ids and state are validated before storage is touched
(``ValueError`` naming where); unreadable stored data raises ``CheckpointCorruptError``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self, TypeVar
from urllib.parse import unquote_to_bytes

from tulip_memory.core.clock import MonotonicWallClock
from tulip_memory.core.identifiers import (
    CHECKPOINT_ID_MAX_LENGTH,
    THREAD_ID_MAX_LENGTH,
    surrogate_at,
    validate_identifier,
)
from tulip_memory.core.json_paths import first_at
from tulip_memory.core.optional_dependencies import import_optional
from tulip_memory.core.paging import validate_limit
from tulip_memory.events import (
    EV_CHECKPOINT_DELETED,
    EV_CHECKPOINT_LOADED,
    EV_CHECKPOINT_SAVED,
    elapsed_ms,
    emit,
)
from tulip_memory.exceptions import CheckpointCorruptError
from tulip_memory.state import AgentState

__all__ = [
    "BaseCheckpointer",
    "BlockingCheckpointer",
    "corrupt_checkpoint",
    "decode_name",
    "decode_state",
    "encode_name",
    "encode_state",
    "import_optional",
    "new_checkpoint_id",
    "refuse_non_json",
    "save_order_key",
    "state_from_snapshot",
    "validate_checkpoint_id",
    "validate_state",
    "validate_thread_id",
]

T = TypeVar("T")


def validate_thread_id(thread_id: object) -> str:
    return validate_identifier(thread_id, "thread_id", max_length=THREAD_ID_MAX_LENGTH)


def validate_checkpoint_id(checkpoint_id: object) -> str:
    return validate_identifier(checkpoint_id, "checkpoint_id", max_length=CHECKPOINT_ID_MAX_LENGTH)


def _validated_start(thread_id: object, checkpoint_id: object) -> float:
    validate_thread_id(thread_id)
    if checkpoint_id is not None:
        validate_checkpoint_id(checkpoint_id)
    return time.perf_counter()


def validate_state(state: object) -> AgentState:
    if not isinstance(state, AgentState):
        raise ValueError(f"state must be an AgentState, got {type(state).__name__}")
    return state


# A dict key must be a str: json writes another scalar key as a string, which loads back
# as another key.
_JSON_SCALARS = (str, int, float, type(None))

# A non-str key as json writes it, searched in the reversed text so that the regex engine
# jumps from one `":` to the next; a str key "1" matches too, hence _non_str_key_in.
_NON_STR_KEY_REVERSED = re.compile(r':"(?:[0-9][0-9.e+-]*|ytinifnI-?|NaN|eurt|eslaf|llun)"[{,]')


def _non_str_key_in(value: Any) -> bool:
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):  # most items: the texts
            continue
        if isinstance(item, dict):
            for key in item:
                if not isinstance(key, str):
                    return True
            pending.extend(item.values())
        elif isinstance(item, (list, tuple)):
            pending.extend(item)
    return False


def _bad_value(value: Any) -> bool:
    if isinstance(value, str):
        return surrogate_at(value) is not None
    return not isinstance(value, _JSON_SCALARS)


def _bad_key(key: Any) -> bool:
    return not isinstance(key, str) or surrogate_at(key) is not None


_encoder = json.JSONEncoder(check_circular=True, ensure_ascii=False, separators=(",", ":"))

_TOO_DEEP = "state is nested too deeply to be stored as JSON"


def refuse_non_json(state: AgentState) -> None:
    """``ValueError`` naming where ``state`` holds what UTF-8 JSON cannot: another type, a
    non-str dict key, a lone surrogate. ``json``'s encoder checks the caller's parts
    fast; the state is walked for the path only when that fails."""
    parts: list[Any] = [state.thread_id, state.metadata]
    for message in state.messages:
        content = message.content
        if not (isinstance(content, str) and content.isascii()):
            parts.append(content)
        if message.metadata:
            parts.append(message.metadata)
        for call in message.tool_calls:
            parts.extend((call.id, call.name, call.arguments))
        if message.name is not None or message.tool_call_id is not None:
            parts.extend((message.name, message.tool_call_id))
    try:
        text = _encoder.encode(parts)
    except (TypeError, ValueError, RecursionError) as exc:
        raise _non_json_error(state, exc) from exc
    if surrogate_at(text) is not None or (
        _NON_STR_KEY_REVERSED.search(text[::-1]) and _non_str_key_in(parts)
    ):
        try:
            error = _first_unstorable(state)
        except RecursionError as exc:
            raise ValueError(_TOO_DEEP) from exc
        if error is not None:
            raise error


def _first_unstorable(state: AgentState) -> ValueError | None:
    snapshot = {
        "thread_id": state.thread_id,
        "messages": [message.to_dict() for message in state.messages],
        "metadata": state.metadata,
    }
    found = first_at(snapshot, "state", _bad_value, bad_key=_bad_key)
    if found is None:
        return None
    where, value = found
    index = surrogate_at(value) if isinstance(value, str) else None
    if index is not None:
        return ValueError(
            f"{where} holds a lone surrogate ({value[index]!r} at index {index}), which "
            "UTF-8 cannot encode: a checkpoint holds only valid Unicode text"
        )
    kind = type(value)
    name = kind.__qualname__
    if kind.__module__ != "builtins":
        name = f"{kind.__module__}.{name}"
    if isinstance(value, _JSON_SCALARS):  # refused only as a dict key
        return ValueError(
            f"{where} is not JSON-serialisable: it is of type {name}, and the keys of a "
            "checkpoint's dicts must be str (JSON would make a string of it, which loads "
            "back as another key)"
        )
    return ValueError(
        f"{where} is not JSON-serialisable: it is of type {name}, and a checkpoint "
        "holds only dicts with str keys, lists, str, int, float, bool and None"
    )


def _non_json_error(state: AgentState, exc: Exception) -> ValueError:
    try:
        found = _first_unstorable(state)
    except RecursionError:  # a circular or far too deep value: json said which
        found = None
    if found is not None:
        return found
    if isinstance(exc, RecursionError):
        return ValueError(_TOO_DEEP)
    return ValueError(f"state is not JSON-serialisable: {exc}")


_clock = MonotonicWallClock(resolution_ns=1)


def save_order_key() -> int:
    """Nanoseconds since the epoch, strictly increasing within a process."""
    return _clock.tick()


def new_checkpoint_id() -> str:
    return f"{save_order_key():016x}{uuid.uuid4().hex[:16]}"


def encode_state(state: AgentState) -> bytes:
    return json.dumps(state.to_checkpoint(), separators=(",", ":"), ensure_ascii=False).encode()


def corrupt_checkpoint(
    thread_id: str, checkpoint_id: str | None, problem: str, *, where: str = ""
) -> CheckpointCorruptError:
    which = "a checkpoint" if checkpoint_id is None else f"checkpoint {checkpoint_id!r}"
    location = f" ({where})" if where else ""
    return CheckpointCorruptError(
        f"{which} of thread {thread_id!r}{location} cannot be read: {problem}"
    )


def state_from_snapshot(
    snapshot: Any, thread_id: str, checkpoint_id: str | None, *, where: str = ""
) -> AgentState:
    try:
        return AgentState.from_checkpoint(snapshot)
    except (ValueError, TypeError, KeyError) as exc:
        raise corrupt_checkpoint(thread_id, checkpoint_id, _problem(exc), where=where) from exc


def decode_state(
    data: bytes | str, thread_id: str, checkpoint_id: str, *, where: str = ""
) -> AgentState:
    try:
        snapshot = json.loads(data)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        problem = f"not UTF-8 JSON ({_problem(exc)})"
        raise corrupt_checkpoint(thread_id, checkpoint_id, problem, where=where) from exc
    return state_from_snapshot(snapshot, thread_id, checkpoint_id, where=where)


def _problem(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"


_SAFE_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_FOLD_SAFE_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789_-")
_MAX_ENCODED_NAME = 120


def encode_name(value: str, *, fold_safe: bool = False) -> str:
    """A unique, portable path component for ``value`` (``t-`` and %-escapes; ``h-`` and
    a SHA-256 when too long). ``fold_safe`` also escapes upper case, for file systems
    that compare names case-insensitively."""
    safe = _FOLD_SAFE_BYTES if fold_safe else _SAFE_BYTES
    encoded = "".join(chr(b) if b in safe else f"%{b:02X}" for b in value.encode())
    if len(encoded) <= _MAX_ENCODED_NAME:
        return f"t-{encoded}"
    return f"h-{hashlib.sha256(value.encode()).hexdigest()}"


def decode_name(name: str) -> str | None:
    if not name.startswith("t-"):
        return None
    try:
        return unquote_to_bytes(name[2:]).decode()
    except UnicodeDecodeError:
        return None


class BaseCheckpointer(ABC):
    """Persists agent states per thread. Subclasses implement ``_save`` (``may_exist``
    False for a fresh id), ``_load``, ``_list`` and ``_delete``, given validated
    arguments, and release what they hold in :meth:`aclose`."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Release what the checkpointer holds; this default holds nothing."""

    def event_tenant(self) -> str | None:
        return None

    async def _emit(self, event: str, thread_id: str, started: float, **fields: Any) -> None:
        await emit(
            event,
            sender=type(self),
            tenant=self.event_tenant(),
            thread_id=thread_id,
            **fields,
            duration_ms=elapsed_ms(started),
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def save(
        self, state: AgentState, thread_id: str, checkpoint_id: str | None = None
    ) -> str:
        validate_state(state)
        validate_thread_id(thread_id)
        refuse_non_json(state)
        started = time.perf_counter()
        may_exist = checkpoint_id is not None
        checkpoint_id = validate_checkpoint_id(checkpoint_id) if may_exist else new_checkpoint_id()
        await self._save(state, thread_id, checkpoint_id, may_exist=may_exist)
        await self._emit(
            EV_CHECKPOINT_SAVED,
            thread_id,
            started,
            checkpoint_id=checkpoint_id,
            messages=len(state.messages),
        )
        return checkpoint_id

    async def load(self, thread_id: str, checkpoint_id: str | None = None) -> AgentState | None:
        started = _validated_start(thread_id, checkpoint_id)
        state = await self._load(thread_id, checkpoint_id)
        await self._emit(
            EV_CHECKPOINT_LOADED,
            thread_id,
            started,
            checkpoint_id=checkpoint_id,
            found=state is not None,
            messages=0 if state is None else len(state.messages),
        )
        return state

    async def list_checkpoints(self, thread_id: str, limit: int = 10) -> list[str]:
        validate_thread_id(thread_id)
        return await self._list(thread_id, validate_limit(limit))

    async def delete(self, thread_id: str, checkpoint_id: str | None = None) -> bool:
        started = _validated_start(thread_id, checkpoint_id)
        deleted = await self._delete(thread_id, checkpoint_id)
        await self._emit(
            EV_CHECKPOINT_DELETED, thread_id, started, checkpoint_id=checkpoint_id, deleted=deleted
        )
        return deleted

    @abstractmethod
    async def _save(
        self, state: AgentState, thread_id: str, checkpoint_id: str, *, may_exist: bool
    ) -> None: ...

    @abstractmethod
    async def _load(self, thread_id: str, checkpoint_id: str | None) -> AgentState | None: ...

    @abstractmethod
    async def _list(self, thread_id: str, limit: int) -> list[str]: ...

    @abstractmethod
    async def _delete(self, thread_id: str, checkpoint_id: str | None) -> bool: ...


class BlockingCheckpointer(BaseCheckpointer):
    """A checkpointer over a blocking client: its ``*_sync`` hooks run through
    :meth:`_call_blocking` (a worker thread unless a subclass says otherwise)."""

    async def _call_blocking(self, hook: Callable[..., T], *args: Any) -> T:
        return await asyncio.to_thread(hook, *args)

    async def _save(
        self, state: AgentState, thread_id: str, checkpoint_id: str, *, may_exist: bool
    ) -> None:
        await self._call_blocking(self._save_sync, state, thread_id, checkpoint_id, may_exist)

    async def _load(self, thread_id: str, checkpoint_id: str | None) -> AgentState | None:
        return await self._call_blocking(self._load_sync, thread_id, checkpoint_id)

    async def _list(self, thread_id: str, limit: int) -> list[str]:
        return await self._call_blocking(self._list_sync, thread_id, limit)

    async def _delete(self, thread_id: str, checkpoint_id: str | None) -> bool:
        return await self._call_blocking(self._delete_sync, thread_id, checkpoint_id)

    @abstractmethod
    def _save_sync(
        self, state: AgentState, thread_id: str, checkpoint_id: str, may_exist: bool
    ) -> None: ...

    @abstractmethod
    def _load_sync(self, thread_id: str, checkpoint_id: str | None) -> AgentState | None: ...

    @abstractmethod
    def _list_sync(self, thread_id: str, limit: int) -> list[str]: ...

    @abstractmethod
    def _delete_sync(self, thread_id: str, checkpoint_id: str | None) -> bool: ...
