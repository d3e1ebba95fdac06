"""TEST DOUBLE — an in-process HTTP fake of the few OpenSearch endpoints the
OpenSearchCheckpointer uses. No OpenSearch server can run on this machine kind, so the
checkpointer is UNVERIFIED against a real server: this fake checks that it speaks those
requests correctly (paths, bodies, status codes as OpenSearch documents them), not that
a real cluster agrees.

Endpoints: HEAD/PUT ``/<index>``, PUT/GET/DELETE ``/<index>/_doc/<id>``, POST
``/<index>/_search`` (``term`` query on a keyword field, ``sort`` on one field,
``size``, ``_source`` filtering) and POST ``/<index>/_delete_by_query`` (``term``).
Anything else answers 400, so an unexpected request fails the test.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit


class FakeOpenSearch:
    def __init__(self) -> None:
        self.indices: dict[str, dict[str, dict[str, Any]]] = {}
        self.mappings: dict[str, Any] = {}
        self.requests: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def _body(self) -> Any:
                length = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(length)) if length else None

            def _reply(self, status: int, payload: Any = None) -> None:
                data = b"" if payload is None else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            def _handle(self) -> None:
                path = urlsplit(self.path).path
                parts = [unquote(p) for p in path.strip("/").split("/")]
                fake.requests.append((self.command, path))
                with fake.lock:
                    status, payload = fake.dispatch(self.command, parts, self._body())
                self._reply(status, payload)

            do_HEAD = do_GET = do_PUT = do_POST = do_DELETE = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> FakeOpenSearch:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- OpenSearch semantics -----------------------------------------------------------

    def dispatch(self, method: str, parts: list[str], body: Any) -> tuple[int, Any]:
        index = parts[0]
        if len(parts) == 1:
            if method == "HEAD":
                return (200 if index in self.indices else 404), None
            if method == "PUT":
                if index in self.indices:
                    return 400, _error("resource_already_exists_exception", index)
                self.indices[index] = {}
                self.mappings[index] = (body or {}).get("mappings")
                return 200, {"acknowledged": True, "index": index}
        docs = self.indices.get(index)
        if docs is None:
            return 404, _error("index_not_found_exception", index)
        if len(parts) == 3 and parts[1] == "_doc":
            doc_id = parts[2]
            if method == "PUT":
                self._check_mapping(index, body)
                created = doc_id not in docs
                docs[doc_id] = body
                result = "created" if created else "updated"
                return (201 if created else 200), {"_index": index, "_id": doc_id, "result": result}
            if method == "GET":
                if doc_id not in docs:
                    return 404, {"_index": index, "_id": doc_id, "found": False}
                return 200, {"_index": index, "_id": doc_id, "found": True, "_source": docs[doc_id]}
            if method == "DELETE":
                if docs.pop(doc_id, None) is None:
                    return 404, {"_index": index, "_id": doc_id, "result": "not_found"}
                return 200, {"_index": index, "_id": doc_id, "result": "deleted"}
        if len(parts) == 2 and method == "POST" and parts[1] == "_search":
            hits = self._matching(docs, body["query"])
            ((field, spec),) = body["sort"][0].items()
            hits.sort(key=lambda item: item[1][field], reverse=spec["order"] == "desc")
            hits = hits[: body.get("size", 10)]
            fields = body.get("_source")
            return 200, {
                "hits": {
                    "total": {"value": len(hits), "relation": "eq"},
                    "hits": [
                        {
                            "_index": index,
                            "_id": doc_id,
                            "_source": {
                                k: v for k, v in doc.items() if fields is None or k in fields
                            },
                        }
                        for doc_id, doc in hits
                    ],
                }
            }
        if len(parts) == 2 and method == "POST" and parts[1] == "_delete_by_query":
            matching = self._matching(docs, body["query"])
            for doc_id, _ in matching:
                del docs[doc_id]
            return 200, {"deleted": len(matching), "failures": []}
        return 400, _error("illegal_argument_exception", f"{method} /{'/'.join(parts)}")

    def _matching(self, docs: dict[str, Any], query: dict[str, Any]) -> list[tuple[str, Any]]:
        ((field, value),) = query["term"].items()
        return [(doc_id, doc) for doc_id, doc in docs.items() if doc.get(field) == value]

    def _check_mapping(self, index: str, body: dict[str, Any]) -> None:
        mapping = self.mappings.get(index) or {}
        if mapping.get("dynamic") == "strict":
            unknown = set(body) - set(mapping.get("properties", {}))
            if unknown:
                raise AssertionError(f"strict mapping rejects fields {unknown}")


def _error(kind: str, reason: str) -> dict[str, Any]:
    return {
        "error": {"type": kind, "reason": reason, "root_cause": [{"type": kind}]},
        "status": 400,
    }
