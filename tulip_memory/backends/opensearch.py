"""OpenSearchCheckpointer: checkpoints as documents of an OpenSearch index (extra ``opensearch``).

One document per checkpoint; saves go through the write alias ``<index>-write`` with
``require_alias=true``, so a deleted index is recreated with its mapping, never auto-created
with a dynamic one. Writes refresh the index.
"""

from __future__ import annotations

import hashlib
from typing import Any

from tulip_memory.backends.base import (
    BlockingCheckpointer,
    import_optional,
    save_order_key,
    state_from_snapshot,
)
from tulip_memory.exceptions import CheckpointError
from tulip_memory.state import AgentState

__all__ = ["OpenSearchCheckpointer"]

MAPPING: dict[str, Any] = {
    "mappings": {
        "dynamic": "strict",
        "properties": {
            "thread_id": {"type": "keyword"},
            "checkpoint_id": {"type": "keyword"},
            "order": {"type": "long"},
            "state": {"type": "object", "enabled": False},
        },
    }
}


class OpenSearchCheckpointer(BlockingCheckpointer):
    """Checkpoints in the OpenSearch ``index`` at ``hosts``, through ``client`` or one built
    from ``client_options``; :meth:`aclose` closes it."""

    def __init__(
        self,
        hosts: str | list[Any] = "http://localhost:9200",
        *,
        index: str = "tulip-memory-checkpoints",
        client: Any = None,
        **client_options: Any,
    ) -> None:
        opensearchpy = import_optional("opensearchpy", "opensearch")
        if not isinstance(index, str) or not index or index != index.lower():
            raise ValueError(f"index must be a non-empty lower-case str, got {index!r}")
        self.index = index
        self.write_alias = f"{index}-write"
        self.hosts = hosts
        self.client = (
            client if client is not None else opensearchpy.OpenSearch(hosts=hosts, **client_options)
        )
        self._not_found = opensearchpy.NotFoundError
        self._request_error = opensearchpy.RequestError

    def __repr__(self) -> str:
        return f"<OpenSearchCheckpointer index={self.index!r}>"

    async def aclose(self) -> None:
        self.client.close()
        await super().aclose()

    @staticmethod
    def _doc_id(thread_id: str, checkpoint_id: str) -> str:
        return hashlib.sha256(f"{thread_id}\x00{checkpoint_id}".encode()).hexdigest()

    def _prepare_index(self) -> None:
        """Create the index with its mapping and write alias, or alias one already there with
        the same mapping; another mapping is refused (it cannot change in place)."""
        try:
            found = self.client.indices.get(index=self.index)
        except self._not_found:
            try:
                self.client.indices.create(
                    index=self.index, body={**MAPPING, "aliases": {self.write_alias: {}}}
                )
                return
            except self._request_error as exc:  # created meanwhile by another client
                if "resource_already_exists_exception" not in str(exc):
                    raise
            found = self.client.indices.get(index=self.index)
        for name, info in found.items():
            wrong = _fields_not_mapped_as_ours(info.get("mappings") or {})
            if wrong:
                raise CheckpointError(
                    f"OpenSearch index {name!r} exists with a mapping that is not the "
                    f"checkpointer's (fields {', '.join(wrong)}); it was probably "
                    "auto-created by a write while the index was missing. Reindex its "
                    f"documents into an index created with {__name__}.MAPPING."
                )
        if any(self.write_alias not in (info.get("aliases") or {}) for info in found.values()):
            self.client.indices.put_alias(index=self.index, name=self.write_alias)

    def _search(self, thread_id: str, size: int, source: list[str]) -> list[dict[str, Any]]:
        try:
            response = self.client.search(
                index=self.index,
                body={
                    "query": {"term": {"thread_id": thread_id}},
                    "sort": [{"order": {"order": "desc"}}],
                    "size": size,
                    "_source": source,
                },
            )
        except self._not_found:  # the index is missing: no checkpoint of any thread
            return []
        return [hit["_source"] for hit in response["hits"]["hits"]]

    def _save_sync(
        self, state: AgentState, thread_id: str, checkpoint_id: str, may_exist: bool
    ) -> None:
        document = {
            "thread_id": thread_id,
            "checkpoint_id": checkpoint_id,
            "order": save_order_key(),
            "state": state.to_checkpoint(),
        }
        doc_id = self._doc_id(thread_id, checkpoint_id)
        try:
            self._write(doc_id, document)
        except self._not_found as exc:  # no alias: the index is missing, or lacks it
            if exc.error != "index_not_found_exception":
                raise
            self._prepare_index()
            self._write(doc_id, document)

    def _write(self, doc_id: str, document: dict[str, Any]) -> None:
        self.client.index(
            index=self.write_alias, id=doc_id, body=document, refresh=True, require_alias=True
        )

    def _load_sync(self, thread_id: str, checkpoint_id: str | None) -> AgentState | None:
        if checkpoint_id is None:
            hits = self._search(thread_id, 1, ["checkpoint_id", "state"])
            if not hits:
                return None
            source = hits[0]
            checkpoint_id = str(source.get("checkpoint_id"))
        else:
            try:
                document = self.client.get(
                    index=self.index, id=self._doc_id(thread_id, checkpoint_id)
                )
            except self._not_found:  # no such document, or no index
                return None
            source = document.get("_source") or {}
        return state_from_snapshot(source.get("state"), thread_id, checkpoint_id)

    def _list_sync(self, thread_id: str, limit: int) -> list[str]:
        return [hit["checkpoint_id"] for hit in self._search(thread_id, limit, ["checkpoint_id"])]

    def _delete_sync(self, thread_id: str, checkpoint_id: str | None) -> bool:
        try:
            if checkpoint_id is None:
                response = self.client.delete_by_query(
                    index=self.index,
                    body={"query": {"term": {"thread_id": thread_id}}},
                    refresh=True,
                )
                return response.get("deleted", 0) > 0
            self.client.delete(
                index=self.index, id=self._doc_id(thread_id, checkpoint_id), refresh=True
            )
        except self._not_found:  # no such document, or no index (deletes never create one)
            return False
        return True


def _fields_not_mapped_as_ours(mappings: dict[str, Any]) -> list[str]:
    found = mappings.get("properties") or {}
    return [
        field
        for field, spec in MAPPING["mappings"]["properties"].items()
        if any((found.get(field) or {}).get(key) != value for key, value in spec.items())
    ]
