"""TEST DOUBLE of an OpenAI-compatible chat-completions server, on 127.0.0.1.

Not a model: it answers ``POST /v1/chat/completions`` with replies scripted by the test,
one per request in order, and records every request (path, headers, JSON body), so a
test asserts both sides: what was sent (model, messages, schema, no secret) and what was
done with the answer. A scripted :class:`Reply` may be an HTTP error (429 with
``Retry-After``, 500), a delay (to provoke a timeout), raw text (malformed JSON) or a
structured ``answer``: the double puts it where the request asked for it (the arguments of
the forced tool call when the request had ``tools``, else the message content). A reply
with a ``body`` sends that text as it is, with its ``content_type``, instead of a
completion (an HTML page of a gateway, a JSON object that is not a completion).
``refuse_response_format`` / ``refuse_tools`` make it answer HTTP 400 to requests using
those features, like a server that lacks them. Usage is reported as characters / 4
unless a reply says ``usage=False``.

Built on the standard library's ``http.server`` (a thread per connection). By default it
closes each connection after its answer (HTTP/1.0); ``keep_alive=True`` keeps it open
(HTTP/1.1), as real servers do, so that a test can count the connections a client keeps
(:func:`established_connections`).
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer."""

    answer: dict[str, Any] | None = None
    content: str | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    usage: bool = True
    finish_reason: str = "stop"
    body: str | None = None
    content_type: str = "application/json"


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]  # names in lower case
    body: dict[str, Any]

    @property
    def prompt_text(self) -> str:
        """Every message content of the request, joined."""
        return "\n".join(str(m.get("content") or "") for m in self.body.get("messages", []))


def answer(value: dict[str, Any]) -> Reply:
    return Reply(answer=value)


def established_connections(port: int) -> int | None:
    """TCP connections of this host in state ESTABLISHED whose remote port is ``port``
    (a client's side of its connections to a double), or ``None`` off Linux."""
    if not os.path.exists("/proc/net/tcp"):
        return None
    count = 0
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as table:
                rows = table.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            if remote_port == port and fields[3] == "01":  # 01: ESTABLISHED
                count += 1
    return count


@contextmanager
def dripping_server(body: bytes, interval: float = 0.1) -> Iterator[str]:
    """A raw HTTP server on 127.0.0.1 answering every request with 200 and ``body`` (JSON),
    one byte per ``interval`` seconds: a slow answer no single network read times out on.
    Yields its base URL (``.../v1``)."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
    reply = head % len(body) + body
    stopping = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.05)

    def drip(connection: socket.socket) -> None:
        with connection:
            try:
                connection.recv(65536)
                for byte in reply:
                    if stopping.wait(interval):
                        return
                    connection.sendall(bytes([byte]))
            except OSError:
                pass  # the client gave up

    def serve() -> None:
        while not stopping.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=drip, args=(connection,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        stopping.set()
        thread.join(timeout=5)
        listener.close()


class ChatServerDouble:
    """The double; use as a context manager (or ``start``/``stop``)."""

    def __init__(self, *, keep_alive: bool = False) -> None:
        self.requests: list[Recorded] = []
        self.script: deque[Reply] = deque()
        self.refuse_response_format = False
        self.refuse_tools = False
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler(keep_alive))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def add(self, *replies: Reply | dict[str, Any]) -> None:
        """Script the next replies (a dict is a structured ``answer``)."""
        with self._lock:
            self.script.extend(r if isinstance(r, Reply) else answer(r) for r in replies)

    def start(self) -> ChatServerDouble:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> ChatServerDouble:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _next(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            if self.refuse_response_format and "response_format" in body:
                return Reply(status=400, content="response_format is not supported")
            if self.refuse_tools and "tools" in body:
                return Reply(status=400, content="tools are not supported")
            if not self.script:
                return Reply(status=500, content="the test scripted no reply for this request")
            return self.script.popleft()

    def _completion(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.answer is not None:
            arguments = json.dumps(reply.answer)
            if "tools" in body:
                name = body["tools"][0]["function"]["name"]
                message["tool_calls"] = [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": name, "arguments": arguments},
                    }
                ]
            else:
                message["content"] = arguments
        completion: dict[str, Any] = {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", ""),
            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
        }
        if reply.usage:
            prompt = len(json.dumps(body.get("messages", [])))
            answer_chars = len(message["content"] or "") + sum(
                len(c["function"]["arguments"]) for c in message.get("tool_calls", [])
            )
            completion["usage"] = {
                "prompt_tokens": prompt // 4,
                "completion_tokens": answer_chars // 4,
                "total_tokens": prompt // 4 + answer_chars // 4,
            }
        return completion

    def _handler(self, keep_alive: bool) -> type[BaseHTTPRequestHandler]:
        double = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the tests read the recorded requests instead."""

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with double._lock:
                    double.requests.append(
                        Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                    )
                reply = double._next(body)
                if reply.delay:
                    double._stopping.wait(reply.delay)
                if reply.body is not None:
                    data = reply.body.encode()
                elif reply.status != 200:
                    error = {"message": reply.content or "error", "type": "test"}
                    data = json.dumps({"error": error}).encode()
                else:
                    data = json.dumps(double._completion(body, reply)).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", reply.content_type)
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

        return Handler
