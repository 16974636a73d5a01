"""The command-agent contract: how any CLI agent is run for one attempt of one trial.

Every `kind: command` agent — a user's own `command:` or a preset (`claude-code`, `codex`) —
is an instance of `CliContract` and runs through `run_attempt`:

* Prompt: always on **stdin** and in the file `$BENCH_PROMPT_FILE`, never as an argument the
  CLI could parse as an option (a prompt may start with `-` or be megabytes long).
* Home: `HOME` (and the CLI's own config dir) is `$BENCH_AGENT_HOME`, a directory in the
  per-trial work area that persists across the attempts of one trial and is removed with the
  workspace afterwards; it is never part of the evidence. What a preset keeps of it (its
  session log) is copied into the evidence with every secret redacted.
* Later attempts: when an attempt reported a session id, the next one gets
  `$BENCH_SESSION_ID` and only the failing-check findings as its prompt (the CLI continues that
  session: presets pass `--resume <id>` / `exec resume <id>`); without a session the prompt is
  the task statement followed by the findings, so no attempt runs without the task.
* Reporting: usage (priced from prices.yaml), the session id and transcript events; presets
  parse them from the CLI's streaming JSON, a user's command writes `$BENCH_USAGE_FILE` and
  `$BENCH_EVENTS_FILE` (see `UserCommand`).
* Limits: the trial deadline kills the whole process group (children included); the attempt is
  then TIMEOUT with the usage reported so far, or unknown cost.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from bench_pipeline.agents.base import (
    BUDGET,
    COMPLETED,
    ERROR,
    MAX_TURNS,
    TIMEOUT,
    AgentRequest,
    AgentResult,
    Usage,
)
from bench_pipeline.agents.pricing import add_spend, over_budget, priced_usage
from bench_pipeline.formats.errors import BenchInputError
from bench_pipeline.formats.model import AgentSpec, Prices
from bench_pipeline.formats.registry import KindRegistry
from bench_pipeline.workspace.process import run_command

ERROR_TAIL_CHARS = 2000
TRANSCRIPT_EVENTS = ("model_response", "tool_call", "tool_result")
STATE_KEY = "cli_agent"
# Presets register themselves here by `name` (the `preset:` value of an agent file).
PRESETS = KindRegistry("command preset", "bench_pipeline.agents.presets", "name")
# A cost the CLI reports itself may differ from ours by rounding only.
COST_TOLERANCE = 1e-6
PREFLIGHT_SECONDS = 60.0


def tail(text: str, chars: int = ERROR_TAIL_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= chars else "…" + text[-chars:]


def json_lines(text: str) -> list[dict[str, Any]]:
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


@dataclass
class Attempt:
    """What a contract needs to build and read one attempt."""

    request: AgentRequest
    home: Path  # the agent's HOME in the work area (persists across attempts)
    cwd: Path
    prompt: str  # what this attempt sends (findings only when continuing a session)
    session_id: str | None  # from an earlier attempt: continue it
    state: dict[str, Any]  # the contract's own memory across attempts of this trial
    prompt_file: Path
    usage_file: Path
    events_file: Path

    @property
    def spec(self) -> AgentSpec:
        return self.request.agent

    @property
    def prices(self) -> Prices:
        return self.request.prices


@dataclass
class Report:
    """What a contract read from an attempt's output."""

    usage: Usage | None = None  # None: nothing reported
    events: list[dict[str, Any]] = field(default_factory=list)  # transcript events, in order
    session_id: str | None = None
    answer: str | None = None
    errors: list[str] = field(default_factory=list)  # the CLI said it failed
    max_turns: bool = False  # the CLI stopped at its turn limit
    budget: bool = False  # the CLI stopped at the spending limit it was given
    cli_cost_usd: float | None = None  # the CLI's own cost figure for this attempt


class CliContract(ABC):
    """One way of running a CLI agent. Subclasses: `UserCommand` and the presets."""

    name: ClassVar[str]

    def __init__(self, spec: AgentSpec):
        self.spec = spec

    @abstractmethod
    def argv(self, at: Attempt) -> list[str]: ...

    def env(self, at: Attempt) -> dict[str, str]:
        """Variables the CLI needs on top of the scrubbed, allow-listed environment."""
        return {}

    def setup_home(self, at: Attempt) -> None:  # noqa: B027 - optional hook
        """Write the CLI's config into `at.home` (called before every attempt)."""

    @abstractmethod
    def read(self, output: str, at: Attempt) -> Report: ...

    def session_logs(self, at: Attempt) -> list[Path]:
        """Files under `at.home` worth keeping (redacted) as evidence."""
        return []

    def preflight(self, environ: dict[str, str], source: str) -> None:  # noqa: B027
        """Raise BenchInputError naming the fix for what would fail every trial."""


def agent_home(request: AgentRequest) -> Path:
    """The agent's home for this trial: in the work area, never in the evidence."""
    st = request.state.setdefault(STATE_KEY, {})
    if "home" not in st:
        if request.work_dir is not None:
            home = request.work_dir / "home"  # the sandbox's private, writable home
        else:  # an agent driven outside the runner (tests, tools): a private temp dir
            home = Path(tempfile.mkdtemp(prefix="bench-agent-home-"))
        home.mkdir(parents=True, exist_ok=True)
        st["home"] = str(home)
    return Path(st["home"])


def attempt_prompt(request: AgentRequest, session_id: str | None) -> str:
    if request.attempt == 1 or session_id:
        return request.prompt
    # No session to continue: a fresh run must see the task as well as the findings.
    return f"{request.task.prompt}\n\n{request.prompt}"


def run_attempt(contract: CliContract, request: AgentRequest) -> AgentResult:
    n = request.attempt
    evidence = request.evidence_dir
    evidence.mkdir(parents=True, exist_ok=True)
    exchange = request.scratch_dir or evidence
    cwd = request.workspace if request.workspace is not None else exchange
    st = request.state.setdefault(STATE_KEY, {})
    home = agent_home(request)
    session_id = st.get("session_id")
    run_dir = home / "bench"
    run_dir.mkdir(parents=True, exist_ok=True)
    at = Attempt(
        request=request,
        home=home,
        cwd=cwd,
        prompt=attempt_prompt(request, session_id),
        session_id=session_id,
        state=st.setdefault(contract.name, {}),
        # Where the agent's processes can see them: the evidence folder, or in a sandbox (which
        # hides the evidence) the trial's exchange folder, copied into the evidence after.
        prompt_file=exchange / f"prompt-attempt{n}.md",
        usage_file=exchange / f"usage-attempt{n}.json",  # numbers only: kept as evidence
        events_file=run_dir / f"events-attempt{n}.jsonl",
    )
    at.prompt_file.write_text(at.prompt, encoding="utf-8")
    for path in (at.usage_file, at.events_file):
        path.unlink(missing_ok=True)
    contract.setup_home(at)
    argv = contract.argv(at)
    env = {
        **request.env,
        "HOME": str(home),
        "BENCH_AGENT_HOME": str(home),
        "BENCH_ATTEMPT": str(n),
        "BENCH_PROMPT_FILE": str(at.prompt_file),
        "BENCH_USAGE_FILE": str(at.usage_file),
        "BENCH_EVENTS_FILE": str(at.events_file),
        "BENCH_WORKSPACE": str(cwd),
        **({"BENCH_SESSION_ID": session_id} if session_id else {}),
        **contract.env(at),
    }
    timeout = request.seconds_left()
    request.transcript.write(
        "agent_command", attempt=n, argv=argv, cwd=str(cwd), timeout_seconds=timeout,
        resumed_session=session_id, preset=contract.name,
    )  # fmt: skip
    if timeout <= 0:
        return AgentResult(TIMEOUT, Usage.unknown("agent did not run"), "no time left")

    res = run_command(argv, cwd, env, timeout, stdin_text=at.prompt, cancelled=request.cancelled)
    log = evidence / f"agent-attempt{n}.log"
    log.write_text(request.transcript.redact(res.output), encoding="utf-8")
    report = contract.read(res.output, at)
    if at.usage_file.exists():  # the agent wrote it; keep it, but never a secret in it
        raw = at.usage_file.read_text(encoding="utf-8", errors="replace")
        at.usage_file.write_text(request.transcript.redact(raw), encoding="utf-8")
    for event in report.events:
        name = event.get("event")
        if name in TRANSCRIPT_EVENTS:
            data = {k: v for k, v in event.items() if k != "event"}
            request.transcript.write(str(name), **{**data, "attempt": n})
    if report.session_id:
        st["session_id"] = report.session_id
    _keep_session_logs(contract, at)

    usage = report.usage or Usage.unknown(
        "killed before it reported usage" if res.timed_out else "agent reported no usage"
    )
    disagreement = None
    if report.cli_cost_usd is not None and usage.cost_usd is not None:
        if abs(report.cli_cost_usd - usage.cost_usd) > COST_TOLERANCE:
            disagreement = (
                f"the CLI reports ${report.cli_cost_usd:.6f}, prices.yaml gives "
                f"${usage.cost_usd:.6f}"
            )
            request.transcript.write(
                "cost_disagreement", attempt=n, cli_cost_usd=report.cli_cost_usd,
                priced_cost_usd=usage.cost_usd, note=disagreement,
            )  # fmt: skip

    if res.timed_out:
        status, error = TIMEOUT, f"killed after {timeout:.1f}s (trial deadline)"
    elif res.cancelled:
        status, error = ERROR, "cancelled"
    elif report.budget:
        status, error = (
            BUDGET,
            f"the CLI stopped at the remaining budget of ${contract.spec.budget_usd}",
        )
    elif report.max_turns:
        status, error = MAX_TURNS, f"the CLI stopped at max_turns={contract.spec.max_turns}"
    elif res.exit_code != 0:
        code = "could not start" if res.exit_code is None else f"exit code {res.exit_code}"
        detail = "; ".join(report.errors) or res.output
        status, error = ERROR, f"agent {code}: {tail(detail)}"
    elif report.errors:
        status, error = ERROR, f"agent reported an error: {tail('; '.join(report.errors))}"
    else:
        status, error = COMPLETED, None

    request.spent_usd = add_spend(request.spent_usd, usage)
    if status == COMPLETED and over_budget(contract.spec.budget_usd, request.spent_usd):
        status = BUDGET
        error = f"spent ${request.spent_usd:.4f} > budget ${contract.spec.budget_usd}"
    if error:
        error = request.transcript.redact(error)

    answer = None
    if request.workspace is None:
        answer = report.answer if report.answer else res.output.strip()
    request.transcript.write(
        "agent_command_result",
        attempt=n,
        exit_code=res.exit_code,
        timed_out=res.timed_out,
        cancelled=res.cancelled,
        duration_seconds=round(res.duration_seconds, 3),
        status=status,
        session_id=report.session_id,
        output_tail=tail(res.output, 10_000),
        usage=usage.__dict__,
        cli_cost_usd=report.cli_cost_usd,
        cost_disagreement=disagreement,
        log=log.name,
    )
    return AgentResult(status, usage, error, answer)


def _keep_session_logs(contract: CliContract, at: Attempt) -> None:
    """Copy the CLI's session logs into the evidence, every secret redacted."""
    dest = at.request.evidence_dir / "agent-session"
    for path in contract.session_logs(at):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        dest.mkdir(exist_ok=True)
        (dest / path.name).write_text(at.request.transcript.redact(text), encoding="utf-8")


# ---------------------------------------------------------------- helpers for presets


def tokens_usage(
    prices: Prices,
    per_model: dict[str, tuple[int, int, int, int]],
    fallback_model: str | None,
) -> Usage | None:
    """Sum (input, output, cache read, cache write) per model, each priced from prices.yaml."""
    if not per_model:
        return None
    total: Usage | None = None
    for model, counts in per_model.items():
        u = priced_usage(prices, model or fallback_model, *counts)
        total = u if total is None else total + u
    return total


def executable_problem(exe: str, environ: dict[str, str]) -> str | None:
    """Why `exe` cannot be started from PATH, or None."""
    path = environ.get("PATH", os.environ.get("PATH", ""))
    if shutil.which(exe, path=path) is None:
        return f"executable '{exe}' not found on PATH"
    return None


def cannot_run(exe: str, environ: dict[str, str]) -> str | None:
    """Why `exe --version` fails for the user running bench (a CLI installed where this user
    may not execute it, a broken install), or None."""
    with tempfile.TemporaryDirectory(prefix="bench-preflight-") as home:
        env = {"PATH": environ.get("PATH", os.environ.get("PATH", "")), "HOME": home}
        found = shutil.which(exe, path=env["PATH"]) or exe  # the one on *that* PATH
        res = run_command([found, "--version"], Path(home), env, PREFLIGHT_SECONDS)
    if res.exit_code == 0:
        return None
    who = f"uid {os.geteuid()}" if hasattr(os, "geteuid") else "this user"
    why = "timed out" if res.timed_out else tail(res.output, 300) or f"exit {res.exit_code}"
    return f"`{exe} --version` fails as {who}: {why}"


def refuse(source: str, key: str, message: str) -> None:
    raise BenchInputError(source, key, message)
