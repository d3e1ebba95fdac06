"""The summaries a SummarizingManager remembers, each under the exact prefix it stands for.

The key is the prefix's length and a fingerprint of what the model sees of it (not
metadata); entries live in a bounded, locked LRU.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from tulip_memory.conversation.summary import covered_count
from tulip_memory.core.lru import LRUCache
from tulip_memory.messages import Message, Role

__all__ = ["CachedSummary", "Lookup", "SummaryCache"]

# The key of a summary: the length of the prefix it stands for, and the prefix's fingerprint.
Key = tuple[int, bytes]

_ROLE_TAGS = {Role.SYSTEM: "S", Role.USER: "U", Role.ASSISTANT: "A", Role.TOOL: "T"}
_DIGEST_SIZE = 16


@dataclass(frozen=True)
class CachedSummary:
    text: str
    covered: int
    summarizer: object


@dataclass(frozen=True)
class Lookup:
    """The summary of the longest cached prefix of ``messages[:end]`` (``length`` 0 and None
    when none) and the key of the whole span."""

    key: Key
    length: int
    summary: CachedSummary | None


class SummaryCache:
    """At most ``maxsize`` summaries (0 keeps none), least recently used evicted first."""

    def __init__(self, maxsize: int, *, name: str = "cache_size") -> None:
        self._entries: LRUCache[Key, CachedSummary] = LRUCache(maxsize, name=name)
        # The prefix lengths stored so far (a superset of those still cached): the only
        # places where a lookup needs a fingerprint.
        self._lengths: set[int] = set()
        self._lengths_lock = threading.Lock()

    @property
    def maxsize(self) -> int:
        return self._entries.maxsize

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, messages: Sequence[Message], end: int, summarizer: object) -> Lookup:
        with self._lengths_lock:
            candidates = sorted(length for length in self._lengths if 0 < length < end)
        hasher = hashlib.blake2b(digest_size=_DIGEST_SIZE)
        keys: list[Key] = []
        done = 0
        for length in candidates:
            hasher.update(_encoded(messages[done:length]))
            keys.append((length, hasher.copy().digest()))
            done = length
        hasher.update(_encoded(messages[done:end]))
        key = (end, hasher.digest())
        for length, digest in reversed([*keys, key]):
            entry = self._entries.get((length, digest))
            if entry is not None and entry.summarizer is summarizer:
                return Lookup(key, length, entry)
        return Lookup(key, 0, None)

    def put(self, key: Key, summary: CachedSummary) -> None:
        if not self._entries.maxsize:
            return
        self._entries.put(key, summary)
        with self._lengths_lock:
            self._lengths.add(key[0])
            if len(self._lengths) > 2 * self._entries.maxsize:
                # Forget the lengths of evicted entries.
                self._lengths = {length for length, _ in self._entries.keys()}  # noqa: SIM118

    def clear(self) -> None:
        self._entries.clear()
        with self._lengths_lock:
            self._lengths.clear()


def _encoded(messages: Sequence[Message]) -> bytes:
    parts = []
    for message in messages:
        content, name, call_id = message.content, message.name, message.tool_call_id
        parts.append(
            f"{_ROLE_TAGS[message.role]}{len(content)}:{content}"
            f"{'-' if name is None else f'{len(name)}:{name}'}"
            f"{'-' if call_id is None else f'{len(call_id)}:{call_id}'}"
        )
        if message.tool_calls:
            calls = repr([(call.id, call.name, call.arguments) for call in message.tool_calls])
            parts.append(f"c{len(calls)}:{calls}")
        if message.role is Role.SYSTEM:  # a summary stands for covered_count messages
            parts.append(f"n{covered_count(message)}")
        parts.append(";")
    return "".join(parts).encode("utf-8", "surrogatepass")
