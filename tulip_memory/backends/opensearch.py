"""OpenSearchCheckpointer: checkpoints as documents of an OpenSearch index (extra ``opensearch``).

UNVERIFIED against a real OpenSearch server: none can run where this package is tested,
so the test suite runs it against an in-process HTTP fake of exactly the endpoints below.
The requests are standard OpenSearch REST calls made by opensearch-py.

One document per checkpoint, id ``sha256(thread_id NUL checkpoint_id)``, with fields
``thread_id`` and ``checkpoint_id`` (keywords), ``order`` (long, the save order) and
``state`` (an object stored but not indexed). Endpoints used: ``HEAD /<index>`` and
``PUT /<index>`` (create the index with its mapping on first use), ``PUT
/<index>/_doc/<id>?refresh=true``, ``GET /<index>/_doc/<id>``, ``POST /<index>/_search``
(term on ``thread_id``, sorted by ``order`` desc), ``DELETE /<index>/_doc/<id>?refresh=true``
and ``POST /<index>/_delete_by_query?refresh=true``. Writes refresh the index so that the
next search sees them.
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
from tulip_memory.state import AgentState

__all__ = ["OpenSearchCheckpointer"]

MAPPING = {
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
    """Checkpoints in the OpenSearch ``index`` at ``hosts``.

    ``client`` may be a ready ``opensearchpy.OpenSearch``; otherwise one is built from
    ``hosts`` and ``client_options`` (``http_auth``, ``use_ssl``, ``verify_certs``...).
    :meth:`aclose` closes the client (its connections).
    """

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
        self.hosts = hosts
        self.client = (
            client if client is not None else opensearchpy.OpenSearch(hosts=hosts, **client_options)
        )
        self._not_found = opensearchpy.NotFoundError
        self._request_error = opensearchpy.RequestError
        self._index_ready = False

    def __repr__(self) -> str:
        return f"<OpenSearchCheckpointer index={self.index!r}>"

    async def aclose(self) -> None:
        self.client.close()
        await super().aclose()

    @staticmethod
    def _doc_id(thread_id: str, checkpoint_id: str) -> str:
        return hashlib.sha256(f"{thread_id}\x00{checkpoint_id}".encode()).hexdigest()

    def _ensure_index(self) -> None:
        if self._index_ready:
            return
        if not self.client.indices.exists(index=self.index):
            try:
                self.client.indices.create(index=self.index, body=MAPPING)
            except self._request_error as exc:  # created meanwhile by another client
                if "resource_already_exists_exception" not in str(exc):
                    raise
        self._index_ready = True

    def _search(self, thread_id: str, size: int, source: list[str]) -> list[dict[str, Any]]:
        response = self.client.search(
            index=self.index,
            body={
                "query": {"term": {"thread_id": thread_id}},
                "sort": [{"order": {"order": "desc"}}],
                "size": size,
                "_source": source,
            },
        )
        return [hit["_source"] for hit in response["hits"]["hits"]]

    def _save_sync(
        self, state: AgentState, thread_id: str, checkpoint_id: str, may_exist: bool
    ) -> None:
        self._ensure_index()
        self.client.index(
            index=self.index,
            id=self._doc_id(thread_id, checkpoint_id),
            body={
                "thread_id": thread_id,
                "checkpoint_id": checkpoint_id,
                "order": save_order_key(),
                "state": state.to_checkpoint(),
            },
            refresh=True,
        )

    def _load_sync(self, thread_id: str, checkpoint_id: str | None) -> AgentState | None:
        self._ensure_index()
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
            except self._not_found:
                return None
            source = document.get("_source") or {}
        return state_from_snapshot(source.get("state"), thread_id, checkpoint_id)

    def _list_sync(self, thread_id: str, limit: int) -> list[str]:
        self._ensure_index()
        return [hit["checkpoint_id"] for hit in self._search(thread_id, limit, ["checkpoint_id"])]

    def _delete_sync(self, thread_id: str, checkpoint_id: str | None) -> bool:
        self._ensure_index()
        if checkpoint_id is None:
            response = self.client.delete_by_query(
                index=self.index, body={"query": {"term": {"thread_id": thread_id}}}, refresh=True
            )
            return response.get("deleted", 0) > 0
        try:
            self.client.delete(
                index=self.index, id=self._doc_id(thread_id, checkpoint_id), refresh=True
            )
        except self._not_found:
            return False
        return True
