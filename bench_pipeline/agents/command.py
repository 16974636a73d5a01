"""`kind: command` — any CLI agent run as an argument array (no shell) in the trial workspace.

The contract every command agent follows (prompt on stdin, home in the work area, session
continuation, reporting) is in `cli_contract`; the presets (`preset: claude-code | codex`)
are instances of it in `presets/`. A user's own `command:` is `UserCommand`:

* Placeholders substituted per argument: `{prompt}` (the prompt as one argument — prefer stdin
  or `{prompt_file}`: a prompt may start with `-` or exceed the argument limit),
  `{prompt_file}`, `{workspace}` (the evidence folder for text tasks), `{usage_file}`,
  `{events_file}`. The prompt is also on stdin.
* Usage: the agent may write JSON to `{usage_file}` ($BENCH_USAGE_FILE):
      {"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost_usd",
       "model", "session_id"}
  all optional. `cost_usd` wins; otherwise the tokens are priced for `model` (or the agent's
  `model`). Nothing usable -> cost unknown with a reason, never zero. A `session_id` makes the
  next attempt a continuation ($BENCH_SESSION_ID set, prompt = findings only).
* Transcript: JSON lines in `{events_file}` ($BENCH_EVENTS_FILE), each
  `{"event": "model_response" | "tool_call" | "tool_result", ...}`, are added to
  transcript.jsonl (redacted).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from bench_pipeline.agents.base import (
    ERROR,
    Agent,
    AgentRequest,
    AgentResult,
    Usage,
    register_agent,
)
from bench_pipeline.agents.cli_contract import (
    PRESETS,
    Attempt,
    CliContract,
    Report,
    executable_problem,
    json_lines,
    run_attempt,
)
from bench_pipeline.agents.pricing import as_cost, as_int, priced_usage
from bench_pipeline.formats.errors import BenchInputError
from bench_pipeline.formats.model import AgentSpec, Prices, Task

PLACEHOLDER = re.compile(r"\{(prompt|prompt_file|workspace|usage_file|events_file)\}")
MAX_ARGUMENT_BYTES = 128 * 1024 - 1  # Linux MAX_ARG_STRLEN (32 pages) less the final NUL


def substitute(argv: list[str], values: dict[str, str]) -> list[str]:
    """Replace the placeholders in each argument in one pass (a prompt containing
    `{workspace}` is not substituted again); unknown `{...}` stay as written."""
    return [PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), arg) for arg in argv]


def usage_from_file(path: Path, prices: Prices, default_model: str | None) -> Usage | None:
    """The generic usage-file contract; None when the agent wrote no file."""
    data = read_usage_file(path)
    if data is None:
        return None
    if isinstance(data, str):
        return Usage.unknown(data)
    keys = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
    counts = [as_int(data.get(k)) for k in keys]
    cost = as_cost(data.get("cost_usd"))
    if cost is not None:
        return Usage(*counts, cost, None)
    bad = [k for k, n in zip(keys, counts, strict=True) if n is None and data.get(k) is not None]
    if data.get("cost_usd") is None and bad:  # (priced without it, the cost would be too low)
        return Usage(
            *counts,
            None,
            f"usage file {path.name}: {bad[0]} {json.dumps(data[bad[0]])[:40]} is not a count "
            "(an integer from 0 to 2^63-1)",
        )
    if data.get("cost_usd") is not None:  # (said, but not a cost: never priced instead)
        return Usage(
            *counts,
            None,
            f"usage file {path.name}: cost_usd {json.dumps(data['cost_usd'])[:40]} is not a "
            "finite number >= 0",
        )
    model = data.get("model") if isinstance(data.get("model"), str) else default_model
    return priced_usage(prices, model, *counts)


def read_usage_file(path: Path) -> dict[str, Any] | str | None:
    """The usage file's object; a problem as a string; None when there is no file."""
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"usage file {path.name} unreadable: {exc}"
    if not isinstance(data, dict):
        return f"usage file {path.name} is not a JSON object"
    return data


class UserCommand(CliContract):
    """A user's own `command:` under the contract (see the module docstring)."""

    name = "command"

    def argv(self, at: Attempt) -> list[str]:
        return substitute(
            list(self.spec.command),
            {
                "prompt": at.prompt,
                "prompt_file": str(at.prompt_file),
                "workspace": str(at.cwd),
                "usage_file": str(at.usage_file),
                "events_file": str(at.events_file),
            },
        )

    def read(self, output: str, at: Attempt) -> Report:
        report = Report(usage=usage_from_file(at.usage_file, at.prices, self.spec.model))
        data = read_usage_file(at.usage_file)
        if isinstance(data, dict) and isinstance(data.get("session_id"), str):
            report.session_id = data["session_id"]
        if at.events_file.exists():
            text = at.events_file.read_text(encoding="utf-8", errors="replace")
            report.events = [e for e in json_lines(text) if isinstance(e.get("event"), str)]
        return report


# ---------------------------------------------------------------- the agent


@register_agent
class CommandAgent(Agent):
    kind = "command"

    @classmethod
    def spec_problem(cls, spec: AgentSpec) -> tuple[str, str] | None:
        if not spec.command and not spec.preset:
            return "command", "is required for kind 'command' (or set preset: claude-code|codex)"
        return None

    def contract(self) -> CliContract | None:
        """`command:` wins over `preset:` (a preset with a custom command is the user's)."""
        if self.spec.command:
            return UserCommand(self.spec)
        if self.spec.preset and self.spec.preset in PRESETS:
            return PRESETS.get(self.spec.preset)(self.spec)
        return None

    def task_problem(self, task: Task) -> tuple[str, str] | None:
        """A prompt substituted into one argument must fit the kernel's limit for a single
        argument (MAX_ARG_STRLEN, 128 KiB on Linux); `{prompt_file}` has no such limit."""
        longest = max(
            [len(task.prompt.encode("utf-8"))] + [len(t.user.encode("utf-8")) for t in task.turns]
        )
        # Presets pass the prompt on stdin; only a user's own command can put it in argv.
        uses_argument = any("{prompt}" in arg for arg in self.spec.command or ())
        if uses_argument and longest > MAX_ARGUMENT_BYTES:
            return (
                "prompt",
                f"is {longest:,} bytes, more than one command-line argument may hold "
                f"({MAX_ARGUMENT_BYTES:,}) for agent '{self.spec.name}', whose command passes "
                "{prompt}; pass {prompt_file} instead",
            )
        return None

    def preflight(self, environ: dict[str, str]) -> None:
        source = self.spec.source_file or f"agents/{self.spec.name}.yaml"
        contract = self.contract()
        if contract is None:
            if self.spec.preset:
                raise BenchInputError(
                    source,
                    "preset",
                    f"unknown preset '{self.spec.preset}'; use one of: {', '.join(PRESETS.names())}",
                )
            raise BenchInputError(
                source,
                "command",
                "a command agent needs `command` (an argument array) or `preset` "
                f"({', '.join(PRESETS.names())})",
            )
        if not isinstance(contract, UserCommand):
            contract.preflight(environ, source)
            return
        exe = self.spec.command[0]
        if exe in ("python", "python3"):
            return  # run_command maps these to the harness's interpreter
        if os.sep in exe:
            if os.path.isabs(exe) and not os.access(exe, os.X_OK):
                raise BenchInputError(
                    source, "command", f"'{exe}' is not an executable file; fix the path"
                )
            return  # relative paths resolve against the workspace at run time
        problem = executable_problem(exe, environ)
        if problem:
            raise BenchInputError(
                source, "command", f"{problem}; install it or set `command` to its full path"
            )

    def run(self, request: AgentRequest) -> AgentResult:
        contract = self.contract()
        if contract is None:
            return AgentResult(ERROR, Usage.unknown("agent did not run"), "no command to run")
        return run_attempt(contract, request)
