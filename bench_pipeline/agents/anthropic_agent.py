"""`kind: anthropic` — the built-in coding agent: a tool-use loop on the Messages API.

* Client: `anthropic.Anthropic(api_key=<ANTHROPIC_API_KEY from request.env>, base_url=spec.base_url
  or request.env ANTHROPIC_BASE_URL or the public API, max_retries=0)`. Retries are ours:
  429, 408, 409, 5xx (529 overloaded included) and connection errors/timeouts, exponential
  backoff from `RETRY_BASE_DELAY` (honouring `retry-after`, capped by `RETRY_MAX_DELAY` and the
  trial deadline), counted in `AgentResult.retries`.
* System: the system prompt then each skill as text blocks, `cache_control: ephemeral` on the
  last one (this caches tools + system). The last block of the newest message also carries
  `cache_control` so that each tool-use step reads the conversation so far from the cache.
* Effort -> extended thinking (`thinking={"type": "enabled", "budget_tokens": N}`): low/None ->
  no thinking, medium -> 4096, high -> 16384; `max_tokens` = budget + `max_output_tokens` so it
  always exceeds the budget. (SDK 2.14 also knows `output_config={"effort": ...}` and adaptive
  thinking, but which values a model accepts depends on the model; the manual budget is the one
  setting shared by every thinking-capable Claude model, so it is what we send.)
* Limits: `max_turns` tool-use steps per attempt (-> MAX_TURNS), the trial deadline (-> TIMEOUT),
  `request.cancelled`, and the budget: after every call its cost is added to
  `request.spent_usd`; known spend above `budget_usd` stops with BUDGET. An unpriced model has
  unknown cost; the budget then cannot be enforced and the transcript says so.
* Text tasks get no tools and return the final text as `answer`; a scenario task (`turns`)
  sends each turn with the conversation so far and records per-turn entries in
  `AgentResult.turns` (as http-chat does), replayed from turn 1 on every attempt.
* The conversation lives in `request.state["anthropic_messages"]`: a later attempt appends
  `request.prompt` (with the failing-check findings) as a new user message to the same history.
"""

from __future__ import annotations

import json
import time
from typing import Any, ClassVar

from bench_pipeline.agents.base import (
    BUDGET,
    COMPLETED,
    ERROR,
    MAX_TURNS,
    TIMEOUT,
    Agent,
    AgentRequest,
    AgentResult,
    Usage,
    register_agent,
)
from bench_pipeline.agents.pricing import add_spend, over_budget, priced_usage
from bench_pipeline.agents.tls import shared_ssl_context
from bench_pipeline.agents.tools import Toolbox
from bench_pipeline.formats.errors import BenchInputError
from bench_pipeline.lazy import anthropic

API_KEY_ENV = "ANTHROPIC_API_KEY"
BASE_URL_ENV = "ANTHROPIC_BASE_URL"
DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_MODEL = "claude-sonnet-4-6"
STATE_KEY = "anthropic_messages"
THINKING_BUDGETS: dict[str | None, int | None] = {
    None: None,
    "low": None,
    "medium": 4096,
    "high": 16384,
}
RETRYABLE_STATUS = {408, 409, 429}
DEFAULT_SYSTEM_PROMPT = (
    "You are a careful software engineer working in a git repository (your tools operate "
    "inside it). Make the change the user asks for, run the relevant tests, and finish with a "
    "short summary of what you changed."
)
DEFAULT_TEXT_SYSTEM_PROMPT = "Answer the user's request directly and accurately."
TRANSCRIPT_TEXT_LIMIT = 2000


class _Stop(Exception):
    """Ends the loop with a status (raised from the retry helper)."""

    def __init__(self, status: str, error: str):
        super().__init__(error)
        self.status = status
        self.error = error


def thinking_budget(effort: str | None) -> int | None:
    return THINKING_BUDGETS.get(effort)


def block_param(block: Any) -> dict[str, Any]:
    """A response content block as a request content block (what we send back next call)."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return {"type": "text", "text": block.text}
    if kind == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    if kind == "thinking":
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if kind == "redacted_thinking":
        return {"type": "redacted_thinking", "data": block.data}
    return block.model_dump(mode="json", exclude_none=True)


def shorten(text: str, limit: int = TRANSCRIPT_TEXT_LIMIT) -> str:
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more chars]"


def last_user_text(messages: list[dict[str, Any]]) -> str:
    for msg in reversed(messages):
        if msg["role"] != "user":
            continue
        content = msg["content"]
        if isinstance(content, str):
            return shorten(content)
        parts = []
        for block in content:
            if block.get("type") == "text":
                parts.append(block["text"])
            elif block.get("type") == "tool_result":
                body = block.get("content")
                parts.append(f"[tool_result {block.get('tool_use_id')}] {body}")
        return shorten("\n".join(parts))
    return ""


def with_cache_breakpoint(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of the history with `cache_control` on the last block of the last message."""
    if not messages:
        return messages
    out = list(messages)
    last = dict(out[-1])
    content = last["content"]
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    if blocks and blocks[-1].get("type") in ("text", "tool_result", "tool_use", "image"):
        blocks[-1] = {**blocks[-1], "cache_control": {"type": "ephemeral"}}
    last["content"] = blocks
    out[-1] = last
    return out


def add_user_text(messages: list[dict[str, Any]], text: str) -> None:
    """Append a user turn; merge into a trailing user message (tool results) if there is one."""
    if messages and messages[-1]["role"] == "user":
        content = messages[-1]["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        messages[-1]["content"] = [*blocks, {"type": "text", "text": text}]
    else:
        messages.append({"role": "user", "content": [{"type": "text", "text": text}]})


@register_agent
class AnthropicAgent(Agent):
    kind = "anthropic"

    # Backoff for transient API errors; tests shrink these to stay fast.
    RETRY_BASE_DELAY: ClassVar[float] = 1.0
    RETRY_MAX_DELAY: ClassVar[float] = 60.0
    MAX_RETRIES: ClassVar[int] = 8  # consecutive retries of one call
    MAX_CALL_SECONDS: ClassVar[float] = 600.0

    @property
    def model(self) -> str:
        return self.spec.model or DEFAULT_MODEL

    def preflight(self, environ: dict[str, str]) -> None:
        source = self.spec.source_file or f"agents/{self.spec.name}.yaml"
        if API_KEY_ENV not in self.spec.env:
            raise BenchInputError(
                source,
                "env",
                f"the anthropic agent reads its key from {API_KEY_ENV}; add {API_KEY_ENV} to "
                "`env` (the variables passed through to the agent)",
            )
        if not environ.get(API_KEY_ENV):
            raise BenchInputError(
                source,
                "env",
                f"environment variable {API_KEY_ENV} is not set; export it before running",
            )

    # ------------------------------------------------------------------ setup

    def system_blocks(self, text_task: bool) -> list[dict[str, Any]]:
        texts = []
        if self.spec.system_prompt is not None:
            texts.append(self.spec.system_prompt.text)
        else:
            texts.append(DEFAULT_TEXT_SYSTEM_PROMPT if text_task else DEFAULT_SYSTEM_PROMPT)
        texts += [skill.text for skill in self.spec.skills]
        blocks: list[dict[str, Any]] = [{"type": "text", "text": t} for t in texts if t.strip()]
        if blocks:
            blocks[-1]["cache_control"] = {"type": "ephemeral"}
        return blocks

    def base_params(self, toolbox: Toolbox | None, text_task: bool) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.model, "max_tokens": self.spec.max_output_tokens}
        system = self.system_blocks(text_task)
        if system:
            params["system"] = system
        budget = thinking_budget(self.spec.effort)
        if budget:
            params["thinking"] = {"type": "enabled", "budget_tokens": budget}
            params["max_tokens"] = budget + self.spec.max_output_tokens
        if toolbox is not None and toolbox.definitions():
            params["tools"] = toolbox.definitions()
        return params

    def client(self, request: AgentRequest, api_key: str) -> anthropic.Anthropic:
        base_url = self.spec.base_url or request.env.get(BASE_URL_ENV) or DEFAULT_BASE_URL
        # The process's one TLS context: building one per trial costs ~50-80 ms of CA loading.
        http_client = anthropic.DefaultHttpxClient(verify=shared_ssl_context())
        return anthropic.Anthropic(
            api_key=api_key, base_url=base_url, max_retries=0, http_client=http_client
        )

    # ------------------------------------------------------------------ run

    def run(self, request: AgentRequest) -> AgentResult:
        api_key = request.env.get(API_KEY_ENV)
        if not api_key:
            return AgentResult(
                ERROR,
                Usage.unknown("agent did not run"),
                f"{API_KEY_ENV} is not in the agent's environment (add it to the agent's `env`)",
            )
        text_task = request.workspace is None
        toolbox = None
        if not text_task:
            toolbox = Toolbox(
                request.workspace,  # type: ignore[arg-type]
                request.env,
                request.seconds_left,
                self.spec.tools,
                request.cancelled,
            )
        params = self.base_params(toolbox, text_task)
        st = _RunState()  # per run: one agent instance may serve parallel trials
        turns: list[dict[str, Any]] = []
        with self.client(request, api_key) as client:
            if text_task and request.task.turns:
                # A scenario is replayed from its first turn on every attempt.
                status, error = self._scenario(st, client, request, params, turns)
            else:
                messages: list[dict[str, Any]] = request.state.setdefault(STATE_KEY, [])
                add_user_text(messages, request.prompt)
                status, error = self._loop(st, client, request, params, messages, toolbox)
        usage = st.usage if st.calls else Usage.unknown("no model call completed")
        if error:
            error = request.transcript.redact(error)
        request.transcript.write(
            "agent_attempt_end",
            attempt=request.attempt,
            status=status,
            error=error,
            calls=st.calls,
            tool_steps=st.steps,
            retries=st.retries,
            usage=usage.__dict__,
            spent_usd=request.spent_usd,
        )
        answer = st.final_text if text_task else None
        return AgentResult(status, usage, error, answer, turns, st.retries)

    def _scenario(
        self,
        st: _RunState,
        client: anthropic.Anthropic,
        request: AgentRequest,
        params: dict[str, Any],
        turns: list[dict[str, Any]],
    ) -> tuple[str, str | None]:
        """Multi-turn text scenario: each turn's user message with the conversation so far."""
        messages: list[dict[str, Any]] = []
        for index, turn in enumerate(request.task.turns, start=1):
            add_user_text(messages, turn.user)
            first_call = len(st.call_usages)
            started = time.monotonic()
            status, error = self._loop(st, client, request, params, messages, None)
            calls = st.call_usages[first_call:]
            if calls:
                u = calls[0]
                for more in calls[1:]:
                    u = u + more
                turns.append(
                    {
                        "turn": index,
                        "user": turn.user,
                        "response": st.final_text,
                        "latency_ms": round((time.monotonic() - started) * 1000, 1),
                        "prompt_tokens": (u.input_tokens or 0)
                        + (u.cache_read_tokens or 0)
                        + (u.cache_write_tokens or 0),
                        "completion_tokens": u.output_tokens,
                        "cache_read_tokens": u.cache_read_tokens,
                        "cost_usd": u.cost_usd,
                        "cost_unknown_reason": u.cost_unknown_reason,
                    }
                )
            if status != COMPLETED:
                return status, error
        return COMPLETED, None

    def _loop(
        self,
        st: _RunState,
        client: anthropic.Anthropic,
        request: AgentRequest,
        params: dict[str, Any],
        messages: list[dict[str, Any]],
        toolbox: Toolbox | None,
    ) -> tuple[str, str | None]:
        while True:
            if request.cancelled():
                return ERROR, "cancelled"
            if request.seconds_left() <= 0:
                return TIMEOUT, "trial deadline reached"
            try:
                response = self._create(st, client, request, params, messages)
            except _Stop as stop:
                return stop.status, stop.error
            content = [block_param(b) for b in response.content]
            messages.append({"role": "assistant", "content": content})
            tool_uses = [b for b in content if b["type"] == "tool_use"]
            st.final_text = "".join(b["text"] for b in content if b["type"] == "text")

            if over_budget(self.spec.budget_usd, request.spent_usd):
                self._close_pending(messages, tool_uses, "not run: budget exhausted")
                return BUDGET, (
                    f"known spend ${request.spent_usd:.4f} exceeds budget ${self.spec.budget_usd}"
                )
            if response.stop_reason == "refusal":
                return ERROR, "the model refused (stop_reason=refusal)"
            if tool_uses:
                if st.steps >= self.spec.max_turns:
                    self._close_pending(messages, tool_uses, "not run: tool-step limit reached")
                    return MAX_TURNS, f"reached max_turns={self.spec.max_turns} tool-use steps"
                st.steps += 1
                results = []
                for block in tool_uses:
                    results.append(self._run_tool(request, toolbox, block))
                messages.append({"role": "user", "content": results})
                continue
            if response.stop_reason == "max_tokens":
                if st.steps >= self.spec.max_turns:
                    return MAX_TURNS, "output cut at max_tokens and no steps left"
                st.steps += 1
                add_user_text(messages, "Your reply was cut off at max_tokens; please continue.")
                continue
            return COMPLETED, None

    def _run_tool(
        self, request: AgentRequest, toolbox: Toolbox | None, block: dict[str, Any]
    ) -> dict[str, Any]:
        request.transcript.write(
            "tool_call", attempt=request.attempt, id=block["id"], name=block["name"],
            input=block["input"],
        )  # fmt: skip
        if toolbox is None:
            text, is_error = "no tools are available for this task", True
        elif request.cancelled():
            text, is_error = "cancelled", True
        else:
            outcome = toolbox.call(block["name"], block["input"])
            text, is_error = outcome.text, outcome.is_error
        request.transcript.write(
            "tool_result", attempt=request.attempt, id=block["id"], name=block["name"],
            is_error=is_error, content=text,
        )  # fmt: skip
        result: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": block["id"],
            "content": text,
        }
        if is_error:
            result["is_error"] = True
        return result

    @staticmethod
    def _close_pending(
        messages: list[dict[str, Any]], tool_uses: list[dict[str, Any]], reason: str
    ) -> None:
        """Answer unexecuted tool calls so that a later attempt's history stays valid."""
        if tool_uses:
            messages.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": b["id"], "content": reason,
                         "is_error": True}
                        for b in tool_uses
                    ],
                }
            )  # fmt: skip

    # ------------------------------------------------------------------ one call

    def _create(
        self,
        st: _RunState,
        client: anthropic.Anthropic,
        request: AgentRequest,
        params: dict[str, Any],
        messages: list[dict[str, Any]],
    ) -> Any:
        sent = with_cache_breakpoint(messages)
        request.transcript.write(
            "model_request",
            attempt=request.attempt,
            call=st.calls + 1,
            model=params["model"],
            max_tokens=params["max_tokens"],
            thinking=params.get("thinking"),
            tools=[t["name"] for t in params.get("tools", [])],
            message_count=len(sent),
            last_user=last_user_text(messages),
        )
        failures = 0
        while True:
            left = request.seconds_left()
            if left <= 0:
                raise _Stop(TIMEOUT, "trial deadline reached before the model answered")
            try:
                response = client.messages.create(
                    **params, messages=sent, timeout=min(left, self.MAX_CALL_SECONDS)
                )
                break
            except anthropic.APIStatusError as exc:
                code = exc.status_code
                retryable = code in RETRYABLE_STATUS or code >= 500
                retry_after = _retry_after(exc)
                detail = f"HTTP {code}: {_error_message(exc)}"
            except anthropic.APIConnectionError as exc:
                retryable, retry_after = True, None
                detail = f"{type(exc).__name__}: {exc}"
            if not retryable:
                raise _Stop(ERROR, f"API error {detail}")
            failures += 1
            if failures > self.MAX_RETRIES:
                raise _Stop(ERROR, f"API error after {self.MAX_RETRIES} retries: {detail}")
            delay = min(self.RETRY_BASE_DELAY * 2 ** (failures - 1), self.RETRY_MAX_DELAY)
            if retry_after is not None:
                delay = max(delay, min(retry_after, self.RETRY_MAX_DELAY))
            request.transcript.write(
                "api_retry", attempt=request.attempt, retry=failures, error=detail,
                delay_seconds=delay,
            )  # fmt: skip
            if delay >= request.seconds_left():
                raise _Stop(TIMEOUT, f"trial deadline reached while retrying ({detail})")
            st.retries += 1
            if _sleep(delay, request):
                raise _Stop(ERROR, "cancelled")

        st.calls += 1
        usage = self._usage(request, response)
        st.usage = st.usage + usage if st.calls > 1 else usage
        st.call_usages.append(usage)
        request.spent_usd = add_spend(request.spent_usd, usage)
        if usage.cost_usd is None and not st.warned_unknown:
            st.warned_unknown = True
            request.transcript.write(
                "cost_unknown",
                attempt=request.attempt,
                reason=usage.cost_unknown_reason,
                budget_usd=self.spec.budget_usd,
                note="cost unknown: the budget cannot be enforced for this spend",
            )
        request.transcript.write(
            "model_response",
            attempt=request.attempt,
            call=st.calls,
            id=response.id,
            model=response.model,
            stop_reason=response.stop_reason,
            content=[b.model_dump(mode="json", exclude_none=True) for b in response.content],
            usage=usage.__dict__,
            spent_usd=request.spent_usd,
        )
        return response

    def _usage(self, request: AgentRequest, response: Any) -> Usage:
        u = response.usage
        counts = (
            u.input_tokens,
            u.output_tokens,
            getattr(u, "cache_read_input_tokens", None) or 0,
            getattr(u, "cache_creation_input_tokens", None) or 0,
        )
        usage = priced_usage(request.prices, self.model, *counts)
        if usage.cost_usd is None and response.model and response.model != self.model:
            alt = priced_usage(request.prices, response.model, *counts)
            if alt.cost_usd is not None:
                return alt
        return usage


class _RunState:
    def __init__(self) -> None:
        self.calls = 0
        self.steps = 0
        self.retries = 0
        self.usage = Usage.unknown("no model call completed")
        self.final_text = ""
        self.warned_unknown = False
        self.call_usages: list[Usage] = []


def _retry_after(exc: anthropic.APIStatusError) -> float | None:
    try:
        value = exc.response.headers.get("retry-after")
        return float(value) if value is not None else None
    except (AttributeError, ValueError):
        return None


def _error_message(exc: anthropic.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and err.get("message"):
            return f"{err.get('type', 'error')}: {err['message']}"
        return json.dumps(body)[:500]
    return str(exc)[:500]


def _sleep(seconds: float, request: AgentRequest) -> bool:
    """Sleep in slices; True if cancelled meanwhile."""
    end = time.monotonic() + seconds
    while True:
        if request.cancelled():
            return True
        left = end - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(left, 0.2))
