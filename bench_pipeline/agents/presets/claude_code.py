"""`preset: claude-code` — Claude Code (`@anthropic-ai/claude-code` 2.1.x) in print mode.

    claude -p --output-format stream-json --verbose --include-partial-messages
           --dangerously-skip-permissions [--model M] [--effort E] [--max-turns N]
           [--append-system-prompt-file F] [--tools T,...] [--max-budget-usd LEFT]
           [--resume SESSION]
                                                                     (prompt on stdin)

* Root: Claude Code refuses `--dangerously-skip-permissions` as root unless `IS_SANDBOX=1`;
  the preset sets it (a trial is the sandbox it asks for).
* Home: `HOME` and `CLAUDE_CONFIG_DIR` are the trial's agent home in the work area; the
  session log (`projects/*/<session>.jsonl`) is copied into the evidence redacted.
* Skills: each skill file becomes `$CLAUDE_CONFIG_DIR/skills/<name>/SKILL.md` (a user skill,
  with the `name`/`description` front matter Claude Code reads); the system prompt is appended
  to Claude Code's own (replacing it would remove its tool instructions).
* Tools: the default `tools` list keeps Claude Code's own set; a narrower list maps to
  `--tools` (list_files -> Glob,Grep; read_file -> Read; write_file -> Write; edit_file ->
  Edit; run_command -> Bash).
* Base URL: the agent's `base_url`, else `ANTHROPIC_BASE_URL` when allow-listed in `env`.
* Transcript: one `model_response` per API message (content from the `assistant` events,
  per-call usage from the raw stream events), one `tool_call` per `tool_use`, one
  `tool_result` per tool result.
* Usage: the result's per-model `modelUsage` (all calls, auxiliary ones included) priced from
  prices.yaml; a resumed session reports cumulative figures, so the previous attempt's totals
  are subtracted. `total_cost_usd` (also cumulative) is kept beside it as the CLI's own figure.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from bench_pipeline.agents.base import Usage
from bench_pipeline.agents.cli_contract import (
    PRESETS,
    Attempt,
    CliContract,
    Report,
    cannot_run,
    executable_problem,
    json_lines,
    refuse,
    tokens_usage,
)
from bench_pipeline.agents.pricing import as_cost, as_int, priced_usage
from bench_pipeline.formats.model import TOOLS

EXECUTABLE = "claude"
EFFORTS = ("low", "medium", "high", "xhigh", "max")
QUIET = {
    # No update checks, telemetry or error reports: a trial talks only to its model API.
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
}
# The agent file's tool names (the anthropic agent's) -> Claude Code's built-in tools.
TOOL_NAMES = {
    "list_files": ("Glob", "Grep"),
    "read_file": ("Read",),
    "write_file": ("Write",),
    "edit_file": ("Edit",),
    "run_command": ("Bash",),
}
USAGE_KEYS = (
    ("inputTokens", "input_tokens"),
    ("outputTokens", "output_tokens"),
    ("cacheReadInputTokens", "cache_read_input_tokens"),
    ("cacheCreationInputTokens", "cache_creation_input_tokens"),
)


def remaining_budget(budget: float | None, spent: float | None) -> float | None:
    if budget is None:
        return None
    return max(budget - (spent or 0.0), 0.0)


def skill_name(path: str) -> str:
    stem = Path(path).stem.lower()
    return re.sub(r"[^a-z0-9-]+", "-", stem).strip("-") or "skill"


def skill_markdown(name: str, text: str) -> str:
    """Claude Code reads a skill's `name` and `description` from YAML front matter."""
    if text.lstrip().startswith("---"):
        return text
    first = next((ln.strip("# ").strip() for ln in text.splitlines() if ln.strip()), name)
    description = first.replace('"', "'")[:200]
    return f'---\nname: {name}\ndescription: "{description}"\n---\n\n{text}'


@PRESETS.register
class ClaudeCode(CliContract):
    name = "claude-code"

    def config_dir(self, at: Attempt) -> Path:
        return at.home / ".claude"

    def setup_home(self, at: Attempt) -> None:
        config = self.config_dir(at)
        config.mkdir(parents=True, exist_ok=True)
        for skill in self.spec.skills:
            name = skill_name(skill.path)
            folder = config / "skills" / name
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "SKILL.md").write_text(skill_markdown(name, skill.text), encoding="utf-8")
        if self.spec.system_prompt is not None:
            (at.home / "bench" / "system-prompt.md").write_text(
                self.spec.system_prompt.text, encoding="utf-8"
            )

    def argv(self, at: Attempt) -> list[str]:
        argv = [EXECUTABLE, "-p", "--output-format", "stream-json", "--verbose"]
        argv += ["--include-partial-messages", "--dangerously-skip-permissions"]
        if self.spec.model:
            argv += ["--model", self.spec.model]
        if self.spec.effort:
            argv += ["--effort", self.spec.effort]
        argv += ["--max-turns", str(self.spec.max_turns)]
        if tuple(self.spec.tools) != TOOLS:  # restricted: only the mapped built-in tools
            names = [n for t in self.spec.tools for n in TOOL_NAMES.get(t, ())]
            argv += ["--tools", ",".join(names)]
        if self.spec.system_prompt is not None:
            argv += ["--append-system-prompt-file", str(at.home / "bench" / "system-prompt.md")]
        left = remaining_budget(self.spec.budget_usd, at.request.spent_usd)
        if left is not None:
            # A safety net priced by Claude Code itself; our own check uses prices.yaml.
            argv += ["--max-budget-usd", f"{left:.6f}"]
        if at.session_id:
            argv += ["--resume", at.session_id]
        return argv

    def env(self, at: Attempt) -> dict[str, str]:
        env = {"IS_SANDBOX": "1", "CLAUDE_CONFIG_DIR": str(self.config_dir(at)), **QUIET}
        if self.spec.base_url:
            env["ANTHROPIC_BASE_URL"] = self.spec.base_url
        return env

    def session_logs(self, at: Attempt) -> list[Path]:
        projects = self.config_dir(at) / "projects"
        return sorted(projects.glob("*/*.jsonl")) if projects.is_dir() else []

    def preflight(self, environ: dict[str, str], source: str) -> None:
        problem = executable_problem(EXECUTABLE, environ)
        if problem:
            refuse(
                source,
                "preset",
                f"{problem}; install Claude Code with `npm install -g "
                "@anthropic-ai/claude-code` (or `make cli-agents`)",
            )
        broken = cannot_run(EXECUTABLE, environ)
        if broken:
            refuse(
                source,
                "preset",
                f"{broken}; reinstall it where this user may run it (`npm install -g "
                "@anthropic-ai/claude-code`, or `make cli-agents`)",
            )
        if self.spec.effort and self.spec.effort not in EFFORTS:
            refuse(source, "effort", f"Claude Code takes effort {', '.join(EFFORTS)}")
        if "ANTHROPIC_API_KEY" not in self.spec.env:
            refuse(
                source,
                "env",
                "Claude Code reads its key from ANTHROPIC_API_KEY; add it to `env` (the "
                "variables passed through to the agent)",
            )
        if not environ.get("ANTHROPIC_API_KEY"):
            refuse(source, "env", "ANTHROPIC_API_KEY is not set; export it before running")

    # ------------------------------------------------------------------ reading

    def read(self, output: str, at: Attempt) -> Report:
        report = Report()
        calls: dict[str, dict[str, Any]] = {}  # API message id -> its model_response event
        seen_tools: set[str] = set()
        result = None
        for obj in json_lines(output):
            kind = obj.get("type")
            if isinstance(obj.get("session_id"), str):
                report.session_id = obj["session_id"]
            if kind == "stream_event" and isinstance(obj.get("event"), dict):
                self._stream(obj, calls, report)
            elif kind == "assistant" and isinstance(obj.get("message"), dict):
                msg = obj["message"]
                call = self._call(str(msg.get("id")), calls, report, msg.get("model"))
                for block in msg.get("content") or []:
                    if not isinstance(block, dict):
                        continue
                    call["content"].append(block)
                    if block.get("type") == "tool_use" and block.get("id") not in seen_tools:
                        seen_tools.add(str(block.get("id")))
                        report.events.append({
                            "event": "tool_call", "id": block.get("id"),
                            "name": block.get("name"), "input": block.get("input"),
                        })  # fmt: skip
                    if block.get("type") == "text":
                        report.answer = block.get("text")
            elif kind == "user" and isinstance(obj.get("message"), dict):
                for block in obj["message"].get("content") or []:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        report.events.append({
                            "event": "tool_result", "id": block.get("tool_use_id"),
                            "is_error": bool(block.get("is_error")),
                            "content": block.get("content"),
                        })  # fmt: skip
            elif kind == "result":
                result = obj
        for call in calls.values():
            call["usage"] = self._call_usage(at, call)
        if result is not None:
            self._result(result, at, report)
        elif calls:
            # Killed or crashed before its result: the calls that completed are what it spent.
            done = [c["usage"] for c in calls.values() if c["stop_reason"] is not None]
            usage = None
            for u in done:
                usage = u if usage is None else usage + u
            report.usage = usage
        for call in calls.values():
            call["usage"] = call["usage"].__dict__
        return report

    @staticmethod
    def _call(
        msg_id: str, calls: dict[str, dict[str, Any]], report: Report, model: Any = None
    ) -> dict[str, Any]:
        if msg_id not in calls:
            calls[msg_id] = {
                "event": "model_response", "call": len(calls) + 1, "id": msg_id,
                "model": model, "stop_reason": None, "content": [], "tokens": {},
            }  # fmt: skip
            report.events.append(calls[msg_id])
        elif model and not calls[msg_id]["model"]:
            calls[msg_id]["model"] = model
        return calls[msg_id]

    def _stream(self, obj: dict[str, Any], calls: dict[str, dict[str, Any]], rep: Report) -> None:
        ev = obj["event"]
        if ev.get("type") == "message_start" and isinstance(ev.get("message"), dict):
            msg = ev["message"]
            call = self._call(str(msg.get("id")), calls, rep, msg.get("model"))
            call["tokens"].update(msg.get("usage") or {})
        elif ev.get("type") == "message_delta" and obj.get("api_message_id"):
            call = self._call(str(obj["api_message_id"]), calls, rep)
            call["tokens"].update(ev.get("usage") or {})
            call["stop_reason"] = (ev.get("delta") or {}).get("stop_reason")

    def _call_usage(self, at: Attempt, call: dict[str, Any]) -> Usage:
        t = call.pop("tokens")
        counts = [as_int(t.get(k)) for _, k in USAGE_KEYS]
        return priced_usage(at.prices, call["model"] or self.spec.model, *counts)

    def _result(self, res: dict[str, Any], at: Attempt, report: Report) -> None:
        text = res.get("result")
        if isinstance(text, str):
            report.answer = text
        subtype = str(res.get("subtype") or "")
        if subtype == "error_max_turns":
            report.max_turns = True
        elif subtype == "error_max_budget_usd":
            report.budget = True
        elif res.get("is_error") or subtype.startswith("error"):
            report.errors.append(str(text or subtype or "is_error"))
        # Resumed sessions report cumulative totals: subtract what earlier attempts reported.
        before = at.state.get("model_usage", {})
        now: dict[str, list[int]] = {}
        model_usage = res.get("modelUsage")
        if isinstance(model_usage, dict):
            for model, u in model_usage.items():
                if isinstance(u, dict):
                    now[model] = [as_int(u.get(k)) or 0 for k, _ in USAGE_KEYS]
        at.state["model_usage"] = now
        delta = {
            m: tuple(max(c - p, 0) for c, p in zip(v, before.get(m, [0, 0, 0, 0]), strict=True))
            for m, v in now.items()
        }
        delta = {m: d for m, d in delta.items() if any(d)}
        usage = tokens_usage(at.prices, delta, self.spec.model)  # type: ignore[arg-type]
        if usage is None and isinstance(res.get("usage"), dict):
            u = res["usage"]
            usage = priced_usage(
                at.prices, self.spec.model, *[as_int(u.get(k)) for _, k in USAGE_KEYS]
            )
        report.usage = usage
        total = as_cost(res.get("total_cost_usd"))
        if total is not None:
            prior = at.state.get("total_cost_usd") or 0.0
            at.state["total_cost_usd"] = total
            report.cli_cost_usd = max(total - prior, 0.0)
