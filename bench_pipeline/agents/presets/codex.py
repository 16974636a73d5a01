"""`preset: codex` — Codex CLI (`@openai/codex`) non-interactively, JSON events on stdout.

    codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox
               [-m M] [-c model_reasoning_effort="E"] -                 (prompt on stdin)
    codex exec resume --json ... SESSION -                             (later attempts)

* Home: `CODEX_HOME` (and `HOME`) is the trial's agent home in the work area. Its
  `config.toml` is written per attempt: with a base URL (the agent's `base_url`, else
  `OPENAI_BASE_URL` when allow-listed) a provider `bench` speaking the Responses API with the
  key from `OPENAI_API_KEY`; the system prompt as `developer_instructions`; update checks off.
* Skills: each skill file becomes `$CODEX_HOME/skills/<name>/SKILL.md`.
* Sandbox: Codex's own sandbox is bypassed; the trial is the sandbox (as for Claude Code).
* Limits: Codex has no turn limit option; `max_turns` is not enforced for it (the trial
  deadline and budget still are).
* Transcript: from the session's rollout file (`sessions/**/rollout-*.jsonl`): one
  `model_response` per `token_usage_record` (per-call usage), one `tool_call` per
  `function_call`, one `tool_result` per `function_call_output`; the rollout is copied into
  the evidence redacted.
* Usage: the rollout's per-call `token_usage_record`s of this attempt (OpenAI counts cached
  input inside `input_tokens`, so uncached input = input - cached) priced from prices.yaml —
  also what was spent so far when the CLI is killed; `turn.completed` (cumulative over a
  resumed thread) only when there is no rollout.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench_pipeline.agents.cli_contract import (
    PRESETS,
    Attempt,
    CliContract,
    Report,
    cannot_run,
    executable_problem,
    json_lines,
    refuse,
)
from bench_pipeline.agents.presets.claude_code import skill_markdown, skill_name
from bench_pipeline.agents.pricing import as_int, priced_usage

EXECUTABLE = "codex"
EFFORTS = ("minimal", "low", "medium", "high", "xhigh")
BASE_URL_ENV = "OPENAI_BASE_URL"
KEY_ENV = "OPENAI_API_KEY"


def toml_string(text: str) -> str:
    """A TOML basic string: JSON's escapes are valid TOML escapes."""
    return json.dumps(text, ensure_ascii=False)


@PRESETS.register
class Codex(CliContract):
    name = "codex"

    def codex_home(self, at: Attempt) -> Path:
        return at.home / ".codex"

    def base_url(self, at: Attempt) -> str | None:
        return self.spec.base_url or at.request.env.get(BASE_URL_ENV)

    def setup_home(self, at: Attempt) -> None:
        home = self.codex_home(at)
        home.mkdir(parents=True, exist_ok=True)
        lines = ["check_for_update_on_startup = false"]
        if self.spec.system_prompt is not None:
            lines.append(f"developer_instructions = {toml_string(self.spec.system_prompt.text)}")
        url = self.base_url(at)
        # No usage analytics or feedback uploads: a trial talks only to its model API. (Tables
        # go last: a bare key after a table header would belong to the table.)
        tables = ["[analytics]", "enabled = false", "[feedback]", "enabled = false"]
        if url:
            url = url.rstrip("/")
            url = url if url.endswith("/v1") else f"{url}/v1"
            lines += [
                'model_provider = "bench"',
                "[model_providers.bench]",
                'name = "bench"',
                f"base_url = {toml_string(url)}",
                f'env_key = "{KEY_ENV}"',
                'wire_api = "responses"',
            ]
        (home / "config.toml").write_text("\n".join(lines + tables) + "\n", encoding="utf-8")
        for skill in self.spec.skills:
            name = skill_name(skill.path)
            folder = home / "skills" / name
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "SKILL.md").write_text(skill_markdown(name, skill.text), encoding="utf-8")

    def argv(self, at: Attempt) -> list[str]:
        argv = [EXECUTABLE, "exec"]
        if at.session_id:
            argv.append("resume")
        argv += ["--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]
        if self.spec.model:
            argv += ["-m", self.spec.model]
        if self.spec.effort:
            argv += ["-c", f"model_reasoning_effort={toml_string(self.spec.effort)}"]
        if at.session_id:
            argv.append(at.session_id)
        return [*argv, "-"]  # `-`: the prompt is read from stdin

    def env(self, at: Attempt) -> dict[str, str]:
        return {"CODEX_HOME": str(self.codex_home(at))}

    def rollouts(self, at: Attempt) -> list[Path]:
        sessions = self.codex_home(at) / "sessions"
        return sorted(sessions.rglob("rollout-*.jsonl")) if sessions.is_dir() else []

    def session_logs(self, at: Attempt) -> list[Path]:
        return self.rollouts(at)

    def preflight(self, environ: dict[str, str], source: str) -> None:
        problem = executable_problem(EXECUTABLE, environ)
        if problem:
            refuse(
                source,
                "preset",
                f"{problem}; install Codex CLI with `npm install -g @openai/codex` "
                "(or `make cli-agents`)",
            )
        broken = cannot_run(EXECUTABLE, environ)
        if broken:
            refuse(
                source,
                "preset",
                f"{broken}; reinstall it where this user may run it (`npm install -g "
                "@openai/codex`, or `make cli-agents`)",
            )
        if self.spec.effort and self.spec.effort not in EFFORTS:
            refuse(source, "effort", f"Codex takes effort {', '.join(EFFORTS)}")
        if KEY_ENV not in self.spec.env:
            refuse(
                source,
                "env",
                f"Codex reads its key from {KEY_ENV}; add it to `env` (the variables passed "
                "through to the agent)",
            )
        if not environ.get(KEY_ENV):
            refuse(source, "env", f"{KEY_ENV} is not set; export it before running")

    # ------------------------------------------------------------------ reading

    def read(self, output: str, at: Attempt) -> Report:
        report = Report()
        inp = cached = out = 0
        saw_usage = False
        for ev in json_lines(output):
            kind = ev.get("type")
            if kind == "thread.started" and isinstance(ev.get("thread_id"), str):
                report.session_id = ev["thread_id"]
            elif kind == "turn.completed" and isinstance(ev.get("usage"), dict):
                u = ev["usage"]
                saw_usage = True
                inp += as_int(u.get("input_tokens")) or 0
                cached += as_int(u.get("cached_input_tokens")) or 0
                out += as_int(u.get("output_tokens")) or 0
            elif kind == "item.completed" and isinstance(ev.get("item"), dict):
                item = ev["item"]
                if item.get("type") == "agent_message" and isinstance(item.get("text"), str):
                    report.answer = item["text"]
            elif kind in ("turn.failed", "error"):
                err = ev.get("error") if isinstance(ev.get("error"), dict) else ev
                report.errors.append(str(err.get("message") or err))
        calls = self._rollout_events(at, report)
        if calls:
            # Per call, this attempt only (a resumed thread's turn.completed is cumulative).
            total = None
            for call in calls:
                total = call if total is None else total + call
            report.usage = total
        elif saw_usage:
            report.usage = priced_usage(
                at.prices, self.spec.model, max(inp - cached, 0), out, cached, 0
            )
        return report

    def _rollout_events(self, at: Attempt, report: Report) -> list[Any]:
        """Transcript events from the rollout lines this attempt added; per-call usages."""
        usages = []
        done = at.state.setdefault("rollout_lines", {})
        pending: list[dict[str, Any]] = []
        for path in self.rollouts(at):
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
            start = done.get(str(path), 0)
            done[str(path)] = len(lines)
            for line in lines[start:]:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                payload = rec.get("payload") if isinstance(rec, dict) else None
                if not isinstance(payload, dict):
                    continue
                kind, ptype = rec.get("type"), payload.get("type")
                if kind == "response_item" and ptype in ("function_call", "custom_tool_call"):
                    args: Any = payload.get("arguments", payload.get("input"))
                    try:
                        args = json.loads(args) if isinstance(args, str) else args
                    except ValueError:
                        pass
                    pending.append({"type": "tool_use", "id": payload.get("call_id"),
                                    "name": payload.get("name"), "input": args})  # fmt: skip
                    report.events.append({"event": "tool_call", "id": payload.get("call_id"),
                                          "name": payload.get("name"), "input": args})  # fmt: skip
                elif kind == "response_item" and ptype in (
                    "function_call_output", "custom_tool_call_output"
                ):  # fmt: skip
                    report.events.append({"event": "tool_result", "id": payload.get("call_id"),
                                          "is_error": False,
                                          "content": payload.get("output")})  # fmt: skip
                elif kind == "response_item" and ptype == "message":
                    if payload.get("role") == "assistant":
                        pending.append({"type": "text", "text": "".join(
                            c.get("text", "") for c in payload.get("content") or []
                            if isinstance(c, dict))})  # fmt: skip
                elif kind == "token_usage_record" and isinstance(payload.get("usage"), dict):
                    u = payload["usage"]
                    i, c = (
                        as_int(u.get("input_tokens")) or 0,
                        as_int(u.get("cached_input_tokens")) or 0,
                    )
                    usage = priced_usage(at.prices, self.spec.model, max(i - c, 0),
                                         as_int(u.get("output_tokens")) or 0, c, 0)  # fmt: skip
                    usages.append(usage)
                    # The record follows the items of its response: they are its content.
                    report.events.insert(
                        len(report.events) - sum(1 for b in pending if b["type"] == "tool_use"),
                        {"event": "model_response", "call": len(usages),
                         "id": payload.get("response_id"), "model": self.spec.model,
                         "content": pending, "usage": usage.__dict__},
                    )  # fmt: skip
                    pending = []
        return usages
