"""`kind: http-chat` — an OpenAI-compatible chat-completions endpoint for text and scenario tasks.

`POST {url}/chat/completions` with `{"model", "messages"}`; a bearer key from the variable named
by `api_key_env` when set. The request goes over kept-alive `http.client` connections (the
standard library: ~0.1 ms of CPU a request against httpx's ~0.6 ms, most of a text case's
harness cost against a fast endpoint), through httpx when a proxy variable (`HTTPS_PROXY`,
`ALL_PROXY`, ...) applies to the URL. The system prompt and skills (if any) go first as one
`system` message. A scenario task (`turns`) sends each turn's user message with the whole
conversation so far; a single-prompt text task is one turn. Every turn is recorded in
`AgentResult.turns`: user, response, latency_ms (of the request that succeeded), prompt and
completion tokens, cost (unknown when the model has no price), retries.

Attempts: a scenario is replayed from its first turn on every attempt (its turns are the test);
a single-prompt task continues its conversation (kept in `request.state`) with `request.prompt`
(the failing-check findings) as the next user message.

Token convention: OpenAI's `prompt_tokens` include cached tokens; we record
`input_tokens = prompt_tokens - cached_tokens` and `cache_read_tokens = cached_tokens`.
"""

from __future__ import annotations

import json
import os
import select
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit

from bench_pipeline.agents.base import (
    BUDGET,
    COMPLETED,
    ERROR,
    TIMEOUT,
    Agent,
    AgentRequest,
    AgentResult,
    Usage,
    register_agent,
)
from bench_pipeline.agents.pricing import add_spend, as_int, over_budget, priced_usage
from bench_pipeline.agents.tls import shared_ssl_context
from bench_pipeline.formats.errors import BenchInputError
from bench_pipeline.formats.model import AgentSpec

if TYPE_CHECKING:  # http.client, urllib.request and httpx load with the first request
    import http.client

    import httpx

STATE_KEY = "chat_messages"
RETRYABLE_STATUS = {408, 409, 429}


class _Stop(Exception):
    def __init__(self, status: str, error: str, retries: int = 0):
        super().__init__(error)
        self.status = status
        self.error = error
        self.retries = retries


def endpoint(url: str) -> str:
    url = url.rstrip("/")
    return url if url.endswith("/chat/completions") else f"{url}/chat/completions"


def response_text(body: Any) -> str | None:
    """choices[0].message.content as text (string or a list of text parts)."""
    try:
        content = body["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return None


def usage_of(body: Any, prices: Any, model: str | None) -> tuple[Usage, int | None, int | None]:
    u = body.get("usage") if isinstance(body, dict) else None
    if not isinstance(u, dict):
        return Usage.unknown("endpoint reported no usage"), None, None
    prompt = as_int(u.get("prompt_tokens"))
    completion = as_int(u.get("completion_tokens"))
    details = u.get("prompt_tokens_details")
    cached = as_int(details.get("cached_tokens")) if isinstance(details, dict) else None
    uncached = None if prompt is None else max(prompt - (cached or 0), 0)
    usage = priced_usage(prices, model, uncached, completion, cached, None)
    return usage, prompt, completion


@register_agent
class HttpChatAgent(Agent):
    kind = "http-chat"
    starts_processes = False

    @classmethod
    def spec_problem(cls, spec: AgentSpec) -> tuple[str, str] | None:
        if not spec.url:
            return "url", "is required for kind 'http-chat': the chat-completions base URL"
        return None

    RETRY_BASE_DELAY: ClassVar[float] = 1.0
    RETRY_MAX_DELAY: ClassVar[float] = 60.0
    MAX_RETRIES: ClassVar[int] = 8
    MAX_CALL_SECONDS: ClassVar[float] = 600.0

    def preflight(self, environ: dict[str, str]) -> None:
        source = self.spec.source_file or f"agents/{self.spec.name}.yaml"
        if not self.spec.url:
            raise BenchInputError(
                source, "url", "an http-chat agent needs `url` (the API base, e.g. .../v1)"
            )
        var = self.spec.api_key_env
        if var:
            if var not in self.spec.env:
                raise BenchInputError(
                    source, "env", f"add {var} to `env` so the key reaches the agent"
                )
            if not environ.get(var):
                raise BenchInputError(
                    source, "api_key_env", f"environment variable {var} is not set; export it"
                )

    def system_message(self) -> dict[str, str] | None:
        texts = [self.spec.system_prompt.text] if self.spec.system_prompt else []
        texts += [s.text for s in self.spec.skills]
        texts = [t for t in texts if t.strip()]
        return {"role": "system", "content": "\n\n".join(texts)} if texts else None

    def run(self, request: AgentRequest) -> AgentResult:
        if not self.spec.url:
            return AgentResult(ERROR, Usage.unknown("agent did not run"), "no `url` configured")
        headers = {"content-type": "application/json"}
        if self.spec.api_key_env:
            key = request.env.get(self.spec.api_key_env)
            if not key:
                return AgentResult(
                    ERROR,
                    Usage.unknown("agent did not run"),
                    f"{self.spec.api_key_env} is not in the agent's environment",
                )
            headers["authorization"] = f"Bearer {key}"

        scenario = bool(request.task.turns)
        if scenario:
            messages: list[dict[str, Any]] = []
            users = [t.user for t in request.task.turns]
        else:
            messages = request.state.setdefault(STATE_KEY, [])
            users = [request.prompt]
        system = self.system_message()
        if system and not messages:
            messages.append(system)

        records: list[dict[str, Any]] = []
        usage: Usage | None = None
        retries = 0
        status, error, answer = COMPLETED, None, None
        client = shared_client()
        for index, user in enumerate(users, start=1):
            messages.append({"role": "user", "content": user})
            try:
                record, turn_usage, text, turn_retries = self._turn(
                    client, request, headers, messages, index
                )
            except _Stop as stop:
                status, error = stop.status, request.transcript.redact(stop.error)
                retries += stop.retries
                break
            retries += turn_retries
            records.append(record)
            messages.append({"role": "assistant", "content": text})
            answer = text
            usage = turn_usage if usage is None else usage + turn_usage
            request.spent_usd = add_spend(request.spent_usd, turn_usage)
            if over_budget(self.spec.budget_usd, request.spent_usd):
                status = BUDGET
                error = (
                    f"known spend ${request.spent_usd:.4f} exceeds budget "
                    f"${self.spec.budget_usd} after turn {index}"
                )
                break
        if usage is None:
            usage = Usage.unknown("no chat turn completed")
        request.transcript.write(
            "agent_attempt_end",
            attempt=request.attempt,
            status=status,
            error=error,
            turns=len(records),
            retries=retries,
            usage=usage.__dict__,
            spent_usd=request.spent_usd,
        )
        return AgentResult(status, usage, error, answer, records, retries)

    def _turn(
        self,
        client: ChatClient,
        request: AgentRequest,
        headers: dict[str, str],
        messages: list[dict[str, Any]],
        index: int,
    ) -> tuple[dict[str, Any], Usage, str, int]:
        url = endpoint(self.spec.url or "")
        payload: dict[str, Any] = {"messages": messages}
        if self.spec.model:
            payload["model"] = self.spec.model
        request.transcript.write(
            "chat_request",
            attempt=request.attempt,
            turn=index,
            url=url,
            model=self.spec.model,
            message_count=len(messages),
            user=messages[-1]["content"],
        )
        failures = 0
        while True:
            if request.cancelled():
                raise _Stop(ERROR, "cancelled", failures)
            left = request.seconds_left()
            if left <= 0:
                raise _Stop(TIMEOUT, f"trial deadline reached at turn {index}", failures)
            started = time.monotonic()
            try:
                resp = client.post(url, payload, headers, timeout=min(left, self.MAX_CALL_SECONDS))
                latency_ms = (time.monotonic() - started) * 1000
                if resp.status_code < 400:
                    body = _json_body(resp, index)
                    break
                retryable = resp.status_code in RETRYABLE_STATUS or resp.status_code >= 500
                detail = f"HTTP {resp.status_code}: {resp.text[:500]}"
                retry_after = _retry_after(resp)
            except TransportError as exc:
                retryable, retry_after = True, None
                detail = str(exc)
            if not retryable:
                raise _Stop(ERROR, f"turn {index}: {detail}", failures)
            failures += 1
            if failures > self.MAX_RETRIES:
                raise _Stop(
                    ERROR,
                    f"turn {index}: {self.MAX_RETRIES} retries failed: {detail}",
                    failures - 1,
                )
            delay = min(self.RETRY_BASE_DELAY * 2 ** (failures - 1), self.RETRY_MAX_DELAY)
            if retry_after is not None:
                delay = max(delay, min(retry_after, self.RETRY_MAX_DELAY))
            request.transcript.write(
                "api_retry", attempt=request.attempt, turn=index, retry=failures, error=detail,
                delay_seconds=delay,
            )  # fmt: skip
            if delay >= request.seconds_left():
                raise _Stop(TIMEOUT, f"deadline reached while retrying ({detail})", failures - 1)
            time.sleep(delay)

        text = response_text(body)
        if text is None:
            raise _Stop(ERROR, f"turn {index}: no choices[0].message.content in the response")
        usage, prompt_tokens, completion_tokens = usage_of(body, request.prices, self.spec.model)
        record = {
            "turn": index,
            "user": messages[-1]["content"],
            "response": text,
            "latency_ms": round(latency_ms, 1),
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "cache_read_tokens": usage.cache_read_tokens,
            "cost_usd": usage.cost_usd,
            "cost_unknown_reason": usage.cost_unknown_reason,
            "retries": failures,
        }
        request.transcript.write(
            "chat_response", attempt=request.attempt, turn=index, body=body,
            latency_ms=record["latency_ms"], usage=usage.__dict__,
        )  # fmt: skip
        return record, usage, text, failures


class TransportError(Exception):
    """The request got no HTTP response (refused, reset, timed out, TLS failed): retryable.
    Its text is `<exception type>: <message>` of the cause."""


def _json_body(resp: ChatResponse, index: int) -> Any:
    try:
        return resp.json()
    except ValueError as exc:
        raise _Stop(ERROR, f"turn {index}: response is not JSON: {exc}") from None


class InvalidURL(Exception):
    """The agent's `url` cannot be requested (raised out of the trial, as httpx's was)."""


@dataclass
class ChatResponse:
    status_code: int
    content: bytes
    headers: Any  # case-insensitive `.get` (http.client's message or httpx's headers)

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.content)


class ChatClient:
    """POSTs JSON over kept-alive connections, one idle list per (scheme, host, port), shared by
    every trial of the process and thread-safe (a connection serves one request at a time).
    Keeps no cookies and follows no redirects (as httpx's defaults), so no trial sees what an
    endpoint set for another. A proxy from the environment (as httpx and urllib read it:
    `HTTP(S)_PROXY`, `ALL_PROXY`, `NO_PROXY`) sends the request through httpx instead."""

    def __init__(self) -> None:
        self._idle: dict[tuple[str, str, int], list[http.client.HTTPConnection]] = {}
        self._lock = threading.Lock()
        self._proxied: dict[tuple[str | None, ...], bool] = {}
        self._httpx: httpx.Client | None = None

    def post(self, url: str, payload: Any, headers: dict[str, str], timeout: float) -> ChatResponse:
        import http.client

        try:
            parts = urlsplit(url)
        except ValueError as exc:  # e.g. "Invalid IPv6 URL": not retryable, as httpx's
            raise InvalidURL(f"{url}: {exc}") from None
        scheme, host = parts.scheme.lower(), parts.hostname or ""
        if scheme not in ("http", "https") or self._proxy_applies(scheme, host):
            return self._via_httpx(url, payload, headers, timeout)
        try:
            port = parts.port or (443 if scheme == "https" else 80)
        except ValueError as exc:  # a port that is not a number: not retryable, as httpx's
            raise InvalidURL(f"{url}: {exc}") from None
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
        sent = {"accept": "*/*", "user-agent": USER_AGENT, **headers}
        key = (scheme, host, port)
        conn = self._take(key) or self._connect(scheme, host, port, timeout)
        try:
            conn.timeout = timeout
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
            conn.request("POST", target, body=body, headers=sent)
            resp = conn.getresponse()
            content = resp.read()
        except http.client.InvalidURL as exc:  # not retryable, as httpx's
            conn.close()
            raise InvalidURL(f"{url}: {exc}") from None
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise TransportError(f"{type(exc).__name__}: {exc}") from exc
        if resp.will_close:
            conn.close()
        else:
            with self._lock:
                self._idle.setdefault(key, []).append(conn)
        return ChatResponse(resp.status, content, resp.headers)

    def _take(self, key: tuple[str, str, int]) -> http.client.HTTPConnection | None:
        """An idle connection the server has not closed (as httpcore checks before reuse: a
        readable idle socket is at EOF or holds bytes nobody asked for)."""
        while True:
            with self._lock:
                idle = self._idle.get(key)
                conn = idle.pop() if idle else None
            if conn is None:
                return None
            sock = conn.sock
            try:
                if sock is None:
                    stale = True
                else:
                    poller = select.poll()  # poll, not select: no limit on the descriptor
                    poller.register(sock, select.POLLIN)
                    stale = bool(poller.poll(0))
            except (OSError, ValueError):  # closed underneath us
                stale = True
            if not stale:
                return conn
            conn.close()

    @staticmethod
    def _connect(scheme: str, host: str, port: int, timeout: float) -> http.client.HTTPConnection:
        import http.client

        if scheme == "https":
            return http.client.HTTPSConnection(
                host, port, timeout=timeout, context=shared_ssl_context()
            )
        return http.client.HTTPConnection(host, port, timeout=timeout)

    def _proxy_applies(self, scheme: str, host: str) -> bool:
        # urllib's reading of the environment costs ~0.1 ms; the variables' values are the key
        key = (scheme, host, *(os.environ.get(name) for name in PROXY_VARIABLES))
        if key not in self._proxied:
            import urllib.request

            proxies = urllib.request.getproxies()
            proxy = proxies.get(scheme) or proxies.get("all")
            self._proxied[key] = bool(proxy) and not urllib.request.proxy_bypass(host)
        return self._proxied[key]

    def _via_httpx(
        self, url: str, payload: Any, headers: dict[str, str], timeout: float
    ) -> ChatResponse:
        import httpx  # ~0.1 s (an https endpoint has paid it already: agents/tls.py builds on it)

        with self._lock:
            if self._httpx is None:
                import http.cookiejar

                jar = http.cookiejar.CookieJar(
                    http.cookiejar.DefaultCookiePolicy(allowed_domains=[])
                )
                self._httpx = httpx.Client(verify=shared_ssl_context(), cookies=jar)
            client = self._httpx
        try:
            resp = client.post(url, json=payload, headers=headers, timeout=timeout)
        except httpx.TransportError as exc:
            raise TransportError(f"{type(exc).__name__}: {exc}") from exc
        return ChatResponse(resp.status_code, resp.content, resp.headers)


USER_AGENT = "bench_pipeline-http-chat"
PROXY_VARIABLES = tuple(
    f(name)
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
    for f in (str, str.upper)
)
_client: ChatClient | None = None
_client_lock = threading.Lock()


def shared_client() -> ChatClient:
    """One client for every trial of the process: its connections to an endpoint are kept
    alive between cases (a new client per trial paid ~1 ms to build and a TCP, or TLS,
    handshake per request)."""
    global _client
    with _client_lock:
        if _client is None:
            _client = ChatClient()
        return _client


def _retry_after(resp: ChatResponse) -> float | None:
    try:
        value = resp.headers.get("retry-after")
        return float(value) if value is not None else None
    except ValueError:
        return None
