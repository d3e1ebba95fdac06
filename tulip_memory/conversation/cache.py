"""The summaries a SummarizingManager remembers, each under the exact prefix it stands for.

A summary replaces a prefix of a conversation. It is stored under the length of that prefix
and a fingerprint of it: BLAKE2b over a self-delimiting encoding of each message's role,
content, name, tool_call_id and tool calls (and, for a summary message, the number of
messages it stands for). A lookup is therefore exact: two conversations share an entry
only if they share the summarised messages themselves, not merely a first message (the
system prompt of every conversation of an agent, a common "hi"). Metadata is not part of
the fingerprint: it is not sent to the model. Tool-call arguments are encoded as the repr
of their JSON data, so the same arguments with their keys in another order only miss.

Finding the longest cached prefix of a history reads each message of the span once: the
fingerprints of the candidate prefixes (the lengths of the stored ones) are taken in the
same pass. The entries live in an :class:`~tulip_memory.core.lru.LRUCache` (bounded, locked),
so one manager can be shared by the threads of a server.
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
    """The text summarising a prefix, how many original messages it stands for, and the
    summarize_fn that wrote it (an entry of another function is not reused)."""

    text: str
    covered: int
    summarizer: object


@dataclass(frozen=True)
class Lookup:
    """What the cache holds for ``messages[:end]``: the summary of its longest cached prefix
    (``length`` messages; 0 and None when there is none) and the key of the whole span."""

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
        """The longest prefix of ``messages[:end]`` (``end`` itself included) that has a
        summary written by ``summarizer``, and the key of ``messages[:end]``."""
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
    """A self-delimiting encoding of what the model sees of ``messages``: each text is
    length-prefixed, tool calls are written as the repr of their JSON data."""
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
