"""`kind: command` — any CLI agent run as an argument array (no shell) in the trial workspace.

Placeholders substituted per argument: `{prompt}`, `{prompt_file}` (the prompt written to a file
in the evidence folder), `{workspace}` (the evidence folder for text tasks) and `{usage_file}`.

Usage contract: the agent may write JSON to `{usage_file}`:
    {"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost_usd", "model"}
all optional. `cost_usd` wins; otherwise the tokens are priced for `model` (or the agent's
`model`). Nothing usable -> cost unknown with a reason, never zero.

Presets: `claude-code` (parses Claude Code's `--output-format json` result) and `codex`
(parses `codex exec --json` events). An explicit usage file still wins over the parsed output.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

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
from bench_pipeline.agents.pricing import add_spend, as_cost, as_int, over_budget, priced_usage
from bench_pipeline.formats.errors import BenchInputError
from bench_pipeline.formats.model import AgentSpec, Prices
from bench_pipeline.workspace.process import run_command

PRESETS = ("claude-code", "codex")
PLACEHOLDER = re.compile(r"\{(prompt|prompt_file|workspace|usage_file)\}")
ERROR_TAIL_CHARS = 2000


def preset_command(preset: str, model: str | None = None) -> list[str]:
    """The argument array a preset runs (documented in the README)."""
    if preset == "claude-code":
        argv = ["claude", "-p", "{prompt}", "--output-format", "json"]
        argv.append("--dangerously-skip-permissions")
        if model:
            argv += ["--model", model]
        return argv
    if preset == "codex":
        argv = ["codex", "exec", "--json", "--skip-git-repo-check"]
        if model:
            argv += ["-m", model]
        return [*argv, "{prompt}"]
    raise ValueError(f"unknown command preset '{preset}' (valid: {', '.join(PRESETS)})")


def substitute(argv: list[str], values: dict[str, str]) -> list[str]:
    """Replace the placeholders in each argument in one pass (a prompt containing
    `{workspace}` is not substituted again); unknown `{...}` stay as written."""
    return [PLACEHOLDER.sub(lambda m: values[m.group(1)], arg) for arg in argv]


def tail(text: str, chars: int = ERROR_TAIL_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= chars else "…" + text[-chars:]


# ---------------------------------------------------------------- usage parsing


def usage_from_file(path: Path, prices: Prices, default_model: str | None) -> Usage | None:
    """The generic usage-file contract; None when the agent wrote no file."""
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return Usage.unknown(f"usage file {path.name} unreadable: {exc}")
    if not isinstance(data, dict):
        return Usage.unknown(f"usage file {path.name} is not a JSON object")
    counts = [
        as_int(data.get(k))
        for k in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
    ]
    cost = as_cost(data.get("cost_usd"))
    if cost is not None:
        return Usage(*counts, cost, None)
    model = data.get("model") if isinstance(data.get("model"), str) else default_model
    return priced_usage(prices, model, *counts)


def json_objects(text: str) -> list[dict[str, Any]]:
    """Every JSON object in `text`: the whole text if it is one, else one per line."""
    stripped = text.strip()
    try:
        whole = json.loads(stripped)
        if isinstance(whole, dict):
            return [whole]
    except ValueError:
        pass
    found = []
    for line in stripped.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            found.append(obj)
    return found


def parse_claude_code(output: str, prices: Prices, model: str | None) -> dict[str, Any] | None:
    """Claude Code's `--output-format json` result object -> usage, is_error, result text."""
    results = [
        o for o in json_objects(output) if o.get("type") == "result" or "total_cost_usd" in o
    ]
    if not results:
        return None
    res = results[-1]
    u = res.get("usage") if isinstance(res.get("usage"), dict) else {}
    counts = [
        as_int(u.get(k))
        for k in (
            "input_tokens",
            "output_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
        )
    ]
    cost = as_cost(res.get("total_cost_usd"))
    usage = Usage(*counts, cost, None) if cost is not None else priced_usage(prices, model, *counts)
    text = res.get("result")
    return {
        "usage": usage,
        "is_error": bool(res.get("is_error")),
        "answer": text if isinstance(text, str) else None,
        "subtype": res.get("subtype"),
    }


def parse_codex(output: str, prices: Prices, model: str | None) -> dict[str, Any] | None:
    """`codex exec --json` events: sum `turn.completed` usage (OpenAI-style: input_tokens
    include the cached ones, so uncached input = input - cached), last agent message, errors."""
    events = [o for o in json_objects(output) if isinstance(o.get("type"), str)]
    if not events:
        return None
    inp = cached = out = 0
    saw_usage = False
    answer = None
    errors = []
    for ev in events:
        kind = ev["type"]
        if kind == "turn.completed" and isinstance(ev.get("usage"), dict):
            u = ev["usage"]
            saw_usage = True
            inp += as_int(u.get("input_tokens")) or 0
            cached += as_int(u.get("cached_input_tokens")) or 0
            out += as_int(u.get("output_tokens")) or 0
        elif kind == "item.completed" and isinstance(ev.get("item"), dict):
            item = ev["item"]
            if item.get("type") in ("agent_message", "assistant_message") and isinstance(
                item.get("text"), str
            ):
                answer = item["text"]
        elif kind in ("turn.failed", "error"):
            err = ev.get("error") if isinstance(ev.get("error"), dict) else ev
            errors.append(str(err.get("message") or err))
    if saw_usage:
        usage = priced_usage(prices, model, max(inp - cached, 0), out, cached, 0)
    else:
        usage = Usage.unknown("codex reported no turn.completed usage")
    return {"usage": usage, "is_error": bool(errors), "answer": answer, "errors": errors}


# ---------------------------------------------------------------- the agent


@register_agent
class CommandAgent(Agent):
    kind = "command"

    @classmethod
    def spec_problem(cls, spec: AgentSpec) -> tuple[str, str] | None:
        if not spec.command and not spec.preset:
            return "command", "is required for kind 'command' (or set preset: claude-code|codex)"
        return None

    def argv_template(self) -> list[str]:
        if self.spec.command:
            return list(self.spec.command)
        if self.spec.preset:
            return preset_command(self.spec.preset, self.spec.model)
        return []

    def preflight(self, environ: dict[str, str]) -> None:
        source = self.spec.source_file or f"agents/{self.spec.name}.yaml"
        if self.spec.preset and self.spec.preset not in PRESETS and not self.spec.command:
            raise BenchInputError(
                source,
                "preset",
                f"unknown preset '{self.spec.preset}'; use one of: {', '.join(PRESETS)}",
            )
        argv = self.argv_template()
        if not argv:
            raise BenchInputError(
                source,
                "command",
                "a command agent needs `command` (an argument array) or `preset` "
                f"({', '.join(PRESETS)})",
            )
        exe = argv[0]
        if exe in ("python", "python3"):
            return  # run_command maps these to the harness's interpreter
        if os.sep in exe:
            if os.path.isabs(exe) and not os.access(exe, os.X_OK):
                raise BenchInputError(
                    source, "command", f"'{exe}' is not an executable file; fix the path"
                )
            return  # relative paths resolve against the workspace at run time
        path = environ.get("PATH", os.environ.get("PATH", ""))
        if shutil.which(exe, path=path) is None:
            key = "preset" if not self.spec.command else "command"
            raise BenchInputError(
                source,
                key,
                f"executable '{exe}' not found on PATH; install it or set `command` to its "
                "full path",
            )

    def run(self, request: AgentRequest) -> AgentResult:
        n = request.attempt
        evidence = request.evidence_dir
        evidence.mkdir(parents=True, exist_ok=True)
        exchange = request.scratch_dir or evidence  # visible to the agent's processes
        cwd = request.workspace if request.workspace is not None else exchange
        prompt_file = exchange / f"prompt-attempt{n}.md"
        prompt_file.write_text(request.prompt, encoding="utf-8")
        usage_file = exchange / f"usage-attempt{n}.json"
        usage_file.unlink(missing_ok=True)
        argv = substitute(
            self.argv_template(),
            {
                "prompt": request.prompt,
                "prompt_file": str(prompt_file),
                "workspace": str(cwd),
                "usage_file": str(usage_file),
            },
        )
        if not argv:
            return AgentResult(ERROR, Usage.unknown("agent did not run"), "no command to run")
        timeout = request.seconds_left()
        request.transcript.write(
            "agent_command", attempt=n, argv=argv, cwd=str(cwd), timeout_seconds=timeout
        )
        if timeout <= 0:
            return AgentResult(TIMEOUT, Usage.unknown("agent did not run"), "no time left")

        res = run_command(argv, cwd, request.env, timeout, cancelled=request.cancelled)
        log = evidence / f"agent-attempt{n}.log"
        log.write_text(request.transcript.redact(res.output), encoding="utf-8")

        parsed = None
        if self.spec.preset == "claude-code":
            parsed = parse_claude_code(res.output, request.prices, self.spec.model)
        elif self.spec.preset == "codex":
            parsed = parse_codex(res.output, request.prices, self.spec.model)
        usage = usage_from_file(usage_file, request.prices, self.spec.model)
        if usage is None:
            usage = parsed["usage"] if parsed else Usage.unknown("agent reported no usage")

        if res.timed_out:
            status, error = TIMEOUT, f"killed after {timeout:.1f}s (trial deadline)"
        elif res.cancelled:
            status, error = ERROR, "cancelled"
        elif res.exit_code != 0:
            code = "could not start" if res.exit_code is None else f"exit code {res.exit_code}"
            status, error = ERROR, f"agent {code}: {tail(res.output)}"
        elif parsed and parsed["is_error"]:
            detail = "; ".join(parsed.get("errors") or []) or parsed.get("answer") or ""
            status, error = ERROR, f"agent reported an error: {tail(detail or res.output)}"
        else:
            status, error = COMPLETED, None

        request.spent_usd = add_spend(request.spent_usd, usage)
        if status == COMPLETED and over_budget(self.spec.budget_usd, request.spent_usd):
            status = BUDGET
            error = f"spent ${request.spent_usd:.4f} > budget ${self.spec.budget_usd}"

        answer = None
        if request.workspace is None:
            answer = parsed["answer"] if parsed and parsed.get("answer") else res.output.strip()
        request.transcript.write(
            "agent_command_result",
            attempt=n,
            exit_code=res.exit_code,
            timed_out=res.timed_out,
            cancelled=res.cancelled,
            duration_seconds=round(res.duration_seconds, 3),
            status=status,
            output_tail=tail(res.output, 10_000),
            usage=usage.__dict__,
            log=log.name,
        )
        return AgentResult(status, usage, error, answer)
