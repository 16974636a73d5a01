"""Real HTTP servers on 127.0.0.1 for tests: a scripted server that records every request.

Tests drive the real client libraries (anthropic SDK, httpx) against these, never a mock of
our own code. Only loopback is ever bound.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON when possible, else the raw text


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict/list -> JSON; str -> text as is
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Recorded], Reply]


class ScriptedServer:
    """Answers requests with `handler(request)`; or pops from a queue of scripted replies.

    Use as a context manager; `url` is its base URL and `requests` what it received.
    """

    def __init__(
        self,
        handler: Handler | None = None,
        replies: list[Reply] | None = None,
        idle_timeout: float | None = None,
    ):
        """`idle_timeout`: seconds a kept-alive connection may idle before the server closes it
        without a word (as real servers do); `connections`/`closed` count them."""
        self.requests: list[Recorded] = []
        self.connections = 0
        self.closed = 0
        self._replies = list(replies or [])
        self._handler = handler
        self._lock = threading.Lock()
        server = self

        class _H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # One send per reply with Nagle off, as production servers answer: http.server's
            # default (headers and body in two sends) waits out the client's 40 ms delayed
            # ACK on every reply over a kept-alive connection.
            disable_nagle_algorithm = True
            wbufsize = -1
            timeout = idle_timeout

            def setup(self) -> None:
                super().setup()
                with server._lock:
                    server.connections += 1

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length).decode() if length else ""
                try:
                    body: Any = json.loads(raw) if raw else None
                except json.JSONDecodeError:
                    body = raw
                rec = Recorded(self.command, self.path, dict(self.headers.items()), body)
                reply = server._next(rec)
                payload = (
                    reply.body.encode()
                    if isinstance(reply.body, str)
                    else json.dumps(reply.body).encode()
                )
                self.send_response(reply.status)
                headers = {"content-type": "application/json", **reply.headers}
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

        class _Server(ThreadingHTTPServer):
            def shutdown_request(self, request: Any) -> None:
                super().shutdown_request(request)  # the socket is closed only here, after finish()
                with server._lock:
                    server.closed += 1

        self._httpd = _Server(("127.0.0.1", 0), _H)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def _next(self, rec: Recorded) -> Reply:
        with self._lock:
            self.requests.append(rec)
            if self._handler is not None:
                return self._handler(rec)
            if not self._replies:
                return Reply(500, {"error": "no scripted reply left"})
            return self._replies.pop(0)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def messages_reply(
    content: list[dict[str, Any]],
    stop_reason: str = "end_turn",
    input_tokens: int = 100,
    output_tokens: int = 20,
    cache_read: int = 0,
    cache_write: int = 0,
    model: str = "claude-sonnet-4-5",
) -> Reply:
    """A Messages API response body as the real API sends it."""
    return Reply(
        200,
        {
            "id": "msg_test",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "cache_read_input_tokens": cache_read,
                "cache_creation_input_tokens": cache_write,
            },
        },
    )
