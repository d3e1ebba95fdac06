"""TEST DOUBLE — an in-process HTTP fake of the few OpenSearch endpoints the
OpenSearchCheckpointer uses. No OpenSearch server can run on this machine kind, so the
checkpointer is UNVERIFIED against a real server: this fake checks that it speaks those
requests correctly (paths, bodies, status codes as OpenSearch documents them), not that
a real cluster agrees.

Endpoints: HEAD/GET/PUT/DELETE ``/<index>`` (the create body may name ``aliases``), PUT
``/<index>/_alias/<alias>``, PUT/GET/DELETE ``/<index>/_doc/<id>``, POST
``/<index>/_search`` (``term`` query on a keyword field, ``sort`` on one field,
``size``, ``_source`` filtering) and POST ``/<index>/_delete_by_query`` (``term``).
Anything else answers 400, so an unexpected request fails the test.

As OpenSearch does with its default ``action.auto_create_index: true``, a document
written to a missing index creates that index with a dynamic mapping derived from the
document (strings as ``text`` with a ``keyword`` sub-field, integers ``long``, floats
``float``, booleans ``boolean``, objects with ``properties``; no date detection), unless
the write says ``require_alias=true``: then a name that is not an alias answers 404
``index_not_found_exception`` and nothing is created. Document requests, searches and
deletes by query resolve an alias to its index; deleting an index drops its aliases.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit


class FakeOpenSearch:
    def __init__(self) -> None:
        self.indices: dict[str, dict[str, dict[str, Any]]] = {}
        self.mappings: dict[str, Any] = {}
        self.aliases: dict[str, str] = {}
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
                url = urlsplit(self.path)
                parts = [unquote(p) for p in url.path.strip("/").split("/")]
                params = {key: values[-1] for key, values in parse_qs(url.query).items()}
                fake.requests.append((self.command, url.path))
                with fake.lock:
                    status, payload = fake.dispatch(self.command, parts, self._body(), params)
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

    def dispatch(
        self, method: str, parts: list[str], body: Any, params: dict[str, str]
    ) -> tuple[int, Any]:
        name = parts[0]
        index = self.aliases.get(name, name)
        if len(parts) == 1:
            return self._index_request(method, name, index, body)
        if len(parts) == 3 and parts[1] == "_alias" and method == "PUT":
            if index not in self.indices:
                return 404, _error("index_not_found_exception", name, 404)
            if parts[2] in self.indices:
                return 400, _error(
                    "invalid_alias_name_exception",
                    f"an index exists with the same name as the alias [{parts[2]}]",
                )
            self.aliases[parts[2]] = index
            return 200, {"acknowledged": True}
        if len(parts) == 3 and parts[1] == "_doc" and method == "PUT":
            if params.get("require_alias") == "true" and name not in self.aliases:
                reason = (
                    f"no such index [{name}] and [require_alias] request flag is [true] "
                    f"and [{name}] is not an alias"
                )
                return 404, _error("index_not_found_exception", reason, 404)
            if index not in self.indices:  # auto-created, as action.auto_create_index allows
                self.indices[index] = {}
                self.mappings[index] = {"properties": {}}
            return self._put_document(index, parts[2], body)
        docs = self.indices.get(index)
        if docs is None:
            return 404, _error("index_not_found_exception", f"no such index [{name}]", 404)
        if len(parts) == 3 and parts[1] == "_doc":
            doc_id = parts[2]
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

    def _index_request(self, method: str, name: str, index: str, body: Any) -> tuple[int, Any]:
        if method == "PUT":
            if name in self.indices:
                return 400, _error("resource_already_exists_exception", name)
            if name in self.aliases:
                return 400, _error(
                    "invalid_index_name_exception", f"[{name}] already exists as alias"
                )
            self.indices[name] = {}
            self.mappings[name] = (body or {}).get("mappings") or {}
            for alias in (body or {}).get("aliases") or {}:
                self.aliases[alias] = name
            return 200, {"acknowledged": True, "index": name}
        if method == "HEAD":
            return (200 if index in self.indices else 404), None
        if index not in self.indices:
            return 404, _error("index_not_found_exception", f"no such index [{name}]", 404)
        if method == "GET":
            aliases = {alias: {} for alias, target in self.aliases.items() if target == index}
            return 200, {
                index: {"aliases": aliases, "mappings": self.mappings[index], "settings": {}}
            }
        if method == "DELETE":
            del self.indices[index], self.mappings[index]
            self.aliases = {
                alias: target for alias, target in self.aliases.items() if target != index
            }
            return 200, {"acknowledged": True}
        return 400, _error("illegal_argument_exception", f"{method} /{name}")

    def _put_document(self, index: str, doc_id: str, body: dict[str, Any]) -> tuple[int, Any]:
        mapping = self.mappings[index]
        if mapping.get("dynamic") == "strict":
            unknown = set(body) - set(mapping.get("properties", {}))
            if unknown:
                raise AssertionError(f"strict mapping rejects fields {unknown}")
        else:
            _merge_dynamic(mapping.setdefault("properties", {}), body)
        docs = self.indices[index]
        created = doc_id not in docs
        docs[doc_id] = body
        result = "created" if created else "updated"
        return (201 if created else 200), {"_index": index, "_id": doc_id, "result": result}

    def _matching(self, docs: dict[str, Any], query: dict[str, Any]) -> list[tuple[str, Any]]:
        ((field, value),) = query["term"].items()
        return [(doc_id, doc) for doc_id, doc in docs.items() if doc.get(field) == value]


def _merge_dynamic(properties: dict[str, Any], document: dict[str, Any]) -> None:
    """Map the document's fields not mapped yet, as OpenSearch's dynamic mapping does."""
    for field, given in document.items():
        # an array is mapped as its first non-null element
        value = (
            next((v for v in given if v is not None), None) if isinstance(given, list) else given
        )
        if value is None:
            continue
        if isinstance(value, dict):
            _merge_dynamic(properties.setdefault(field, {"properties": {}})["properties"], value)
        elif field not in properties:
            properties[field] = _dynamic_type(value)


def _dynamic_type(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "long"}
    if isinstance(value, float):
        return {"type": "float"}
    return {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}}


def _error(kind: str, reason: str, status: int = 400) -> dict[str, Any]:
    return {
        "error": {
            "type": kind,
            "reason": reason,
            "root_cause": [{"type": kind, "reason": reason}],
        },
        "status": status,
    }
