"""Memory history: the versions a memory replaced, kept in the manager's own store under
``(*prefix, "_history", type, key)``, with ``valid_from`` and ``valid_to``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from tulip_memory.manager.types import MemoryType

if TYPE_CHECKING:
    from tulip_memory.store.base import BaseStore, StoreItem

__all__ = ["CONTENT_SINCE", "HISTORY_LABEL", "MemoryHistory", "MemoryVersion", "content_since"]

HISTORY_LABEL = "_history"
# Field of a stored memory: when its current content was first written (ISO 8601).
CONTENT_SINCE = "content_since"
# list_keys page when reading or clearing a history.
_PAGE = 1000
# The life part of a history entry's key: the replaced item's creation time, UTC, fixed width.
_LIFE_FORMAT = "%Y%m%dT%H%M%S%fZ"


def content_since(item: StoreItem) -> str:
    """When the content of stored memory ``item`` was first written (ISO 8601)."""
    value = item.value if isinstance(item.value, dict) else {}
    since = value.get(CONTENT_SINCE)
    return since if isinstance(since, str) else item.updated_at.isoformat()


def _entry_key(previous: StoreItem) -> str:
    """The key of the history entry keeping ``previous``: its life, then its version."""
    life = previous.created_at.astimezone(UTC).strftime(_LIFE_FORMAT)
    return f"{life}-{previous.version:012d}"


@dataclass(frozen=True)
class MemoryVersion:
    """One state of a memory: its content from ``valid_from`` until ``valid_to``."""

    content: str
    metadata: dict[str, Any]
    valid_from: datetime
    valid_to: datetime | None
    version: int


def _version(
    value: dict[str, Any], valid_from: str, valid_to: str | None, version: int
) -> MemoryVersion:
    return MemoryVersion(
        content=value.get("content", ""),
        metadata=dict(value.get("metadata") or {}),
        valid_from=datetime.fromisoformat(valid_from),
        valid_to=datetime.fromisoformat(valid_to) if valid_to is not None else None,
        version=version,
    )


class MemoryHistory:
    """The history namespaces of one store."""

    def __init__(self, store: BaseStore) -> None:
        self.store = store

    @staticmethod
    def namespace(prefix: tuple[str, ...], memory_type: MemoryType, key: str) -> tuple[str, ...]:
        return (*prefix, HISTORY_LABEL, memory_type.value, key)

    def replaced_entry(
        self,
        prefix: tuple[str, ...],
        memory_type: MemoryType,
        previous: StoreItem,
        replaced_at: datetime,
    ) -> tuple[tuple[str, ...], str, dict[str, Any], None]:
        """The ``put_batch`` item that keeps ``previous`` (about to be overwritten) as a
        past version."""
        value = previous.value if isinstance(previous.value, dict) else {}
        entry = {
            "content": value.get("content", ""),
            "metadata": value.get("metadata") or {},
            "valid_from": content_since(previous),
            "valid_to": replaced_at.isoformat(),
            "version": previous.version,
        }
        return (
            self.namespace(prefix, memory_type, previous.key),
            _entry_key(previous),
            entry,
            None,
        )

    async def versions(
        self, prefix: tuple[str, ...], memory_type: MemoryType, current: StoreItem | None, key: str
    ) -> list[MemoryVersion]:
        """Every known version of the memory, oldest first; the current one last."""
        namespace = self.namespace(prefix, memory_type, key)
        limit = _PAGE
        while len(keys := await self.store.list_keys(namespace, limit=limit)) == limit:
            limit *= 2  # list_keys has no offset: ask for more until the page is not full
        found = await self.store.get_batch([(namespace, k) for k in keys]) if keys else {}
        entries = (found.get((namespace, k)) for k in sorted(keys))  # keys sort oldest first
        past = [
            _version(entry, entry["valid_from"], entry["valid_to"], int(entry.get("version", 0)))
            for entry in entries
            if isinstance(entry, dict) and "valid_from" in entry and "valid_to" in entry
        ]
        if current is not None and isinstance(current.value, dict):
            past.append(_version(current.value, content_since(current), None, current.version))
        return past

    async def clear(self, prefix: tuple[str, ...], memory_type: MemoryType, key: str) -> int:
        return await self.store.clear_namespace(self.namespace(prefix, memory_type, key))
