"""Model APIs on 127.0.0.1 as the real CLIs speak them, for driving Claude Code and Codex CLI.

* `AnthropicServer`: the Messages API (`POST /v1/messages`), streamed as server-sent events
  when the request says `stream: true` (Claude Code always streams), else one JSON body.
* `ResponsesServer`: the OpenAI Responses API (`POST /v1/responses`, SSE), which Codex CLI
  speaks to a custom provider (`wire_api = "responses"`).

A test scripts the model with a `brain(request) -> Turn` function; every request is recorded,
and a brain may return `HANG` to never answer (the CLI then hangs until it is killed). Only
loopback is bound.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bench_pipeline_tests.http_fakes import Recorded


@dataclass
class Turn:
    """One model reply: content blocks in Messages API shape (`text`, `tool_use`)."""

    content: list[dict[str, Any]]
    input_tokens: int = 100
    output_tokens: int = 20
    cache_read: int = 0
    cache_write: int = 0
    model: str | None = None  # default: the model the request named

    @property
    def stop_reason(self) -> str:
        return "tool_use" if any(b["type"] == "tool_use" for b in self.content) else "end_turn"


HANG = Turn([])  # sentinel: never answer
Brain = Callable[[Recorded], Turn]


def text(s: str, **kw: Any) -> Turn:
    return Turn([{"type": "text", "text": s}], **kw)


def tool(name: str, args: dict[str, Any], **kw: Any) -> Turn:
    return Turn(
        [{"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:20]}", "name": name, "input": args}],
        **kw,
    )


@dataclass
class Served:
    """What a server answered: the request and the usage it reported."""

    request: Recorded
    turn: Turn
    model: str


class _Base:
    path_suffix = ""

    def __init__(self, brain: Brain):
        self.brain = brain
        self.requests: list[Recorded] = []  # every request, any path
        self.served: list[Served] = []  # the model calls answered
        self._lock = threading.Lock()
        self._stop = threading.Event()
        server = self

        class _H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length).decode() if length else ""
                try:
                    body: Any = json.loads(raw) if raw else None
                except json.JSONDecodeError:
                    body = raw
                rec = Recorded(self.command, self.path, dict(self.headers.items()), body)
                with server._lock:
                    server.requests.append(rec)
                status, ctype, payload = server.answer(rec)
                if payload is None:  # HANG: hold the connection until the test ends
                    server._stop.wait()
                    return
                self.send_response(status)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_HEAD = _serve

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _H)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def answer(self, rec: Recorded) -> tuple[int, str, bytes | None]:
        raise NotImplementedError

    def _turn(self, rec: Recorded, model: str) -> Turn | None:
        turn = self.brain(rec)
        if turn is HANG:
            return None
        with self._lock:
            self.served.append(Served(rec, turn, turn.model or model))
        return turn

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> Any:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()


def _sse(events: list[tuple[str, dict[str, Any]]]) -> bytes:
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events).encode()


class AnthropicServer(_Base):
    """The Messages API. Requests other than `POST /v1/messages` get an empty JSON object."""

    def answer(self, rec: Recorded) -> tuple[int, str, bytes | None]:
        if rec.method != "POST" or not rec.path.split("?")[0].endswith("/v1/messages"):
            return 200, "application/json", b"{}"
        body = rec.body if isinstance(rec.body, dict) else {}
        model = str(body.get("model") or "unknown")
        turn = self._turn(rec, model)
        if turn is None:
            return 0, "", None
        usage = {
            "input_tokens": turn.input_tokens,
            "output_tokens": turn.output_tokens,
            "cache_read_input_tokens": turn.cache_read,
            "cache_creation_input_tokens": turn.cache_write,
        }
        msg_id = f"msg_{uuid.uuid4().hex[:24]}"
        model = turn.model or model
        if not body.get("stream"):
            message = {
                "id": msg_id, "type": "message", "role": "assistant", "model": model,
                "content": turn.content, "stop_reason": turn.stop_reason,
                "stop_sequence": None, "usage": usage,
            }  # fmt: skip
            return 200, "application/json", json.dumps(message).encode()
        start_usage = {**usage, "output_tokens": 1}
        events: list[tuple[str, dict[str, Any]]] = [
            ("message_start", {"type": "message_start", "message": {
                "id": msg_id, "type": "message", "role": "assistant", "model": model,
                "content": [], "stop_reason": None, "stop_sequence": None,
                "usage": start_usage}}),
        ]  # fmt: skip
        for i, block in enumerate(turn.content):
            if block["type"] == "text":
                start = {"type": "text", "text": ""}
                delta = {"type": "text_delta", "text": block["text"]}
            else:
                start = {**block, "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            events += [
                ("content_block_start", {"type": "content_block_start", "index": i,
                                         "content_block": start}),
                ("content_block_delta", {"type": "content_block_delta", "index": i,
                                         "delta": delta}),
                ("content_block_stop", {"type": "content_block_stop", "index": i}),
            ]  # fmt: skip
        events += [
            ("message_delta", {"type": "message_delta",
                               "delta": {"stop_reason": turn.stop_reason, "stop_sequence": None},
                               "usage": {"output_tokens": turn.output_tokens}}),
            ("message_stop", {"type": "message_stop"}),
        ]  # fmt: skip
        return 200, "text/event-stream", _sse(events)


def reported_usage(server: _Base) -> dict[str, tuple[int, int, int, int]]:
    """Per model: the (input, output, cache read, cache write) tokens the server reported."""
    totals: dict[str, list[int]] = {}
    for s in server.served:
        t = totals.setdefault(s.model, [0, 0, 0, 0])
        for i, n in enumerate(
            (s.turn.input_tokens, s.turn.output_tokens, s.turn.cache_read, s.turn.cache_write)
        ):
            t[i] += n
    return {m: (t[0], t[1], t[2], t[3]) for m, t in totals.items()}


class ResponsesServer(_Base):
    """The OpenAI Responses API as Codex CLI streams it. A `Turn`'s `tool_use` blocks become
    `function_call` items (`name`, JSON `arguments`), its text an assistant `message`."""

    def answer(self, rec: Recorded) -> tuple[int, str, bytes | None]:
        if rec.method != "POST" or not rec.path.split("?")[0].endswith("/responses"):
            return 200, "application/json", b'{"data": [], "models": []}'
        body = rec.body if isinstance(rec.body, dict) else {}
        model = str(body.get("model") or "unknown")
        turn = self._turn(rec, model)
        if turn is None:
            return 0, "", None
        resp_id = f"resp_{uuid.uuid4().hex[:24]}"
        items = []
        for block in turn.content:
            if block["type"] == "text":
                items.append({
                    "type": "message", "id": f"msg_{uuid.uuid4().hex[:16]}", "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": block["text"], "annotations": []}],
                })  # fmt: skip
            else:
                items.append({
                    "type": "function_call", "id": f"fc_{uuid.uuid4().hex[:16]}",
                    "status": "completed", "call_id": block["id"], "name": block["name"],
                    "arguments": json.dumps(block["input"]),
                })  # fmt: skip
        usage = {
            "input_tokens": turn.input_tokens + turn.cache_read,
            "input_tokens_details": {"cached_tokens": turn.cache_read},
            "output_tokens": turn.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": turn.input_tokens + turn.cache_read + turn.output_tokens,
        }
        response = {"id": resp_id, "object": "response", "model": turn.model or model,
                    "status": "in_progress", "output": []}  # fmt: skip
        events: list[tuple[str, dict[str, Any]]] = [
            ("response.created", {"type": "response.created", "response": response})
        ]
        for i, item in enumerate(items):
            events.append(
                (
                    "response.output_item.added",
                    {"type": "response.output_item.added", "output_index": i, "item": item},
                )
            )
            if item["type"] == "message":
                events.append(
                    (
                        "response.output_text.delta",
                        {
                            "type": "response.output_text.delta",
                            "output_index": i,
                            "content_index": 0,
                            "item_id": item["id"],
                            "delta": item["content"][0]["text"],
                        },
                    )
                )
            events.append(
                (
                    "response.output_item.done",
                    {"type": "response.output_item.done", "output_index": i, "item": item},
                )
            )
        done = {**response, "status": "completed", "output": items, "usage": usage}
        events.append(("response.completed", {"type": "response.completed", "response": done}))
        return 200, "text/event-stream", _sse(events)
