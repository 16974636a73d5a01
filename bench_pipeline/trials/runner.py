"""One trial: fresh workspace -> attempts of (agent, checks) -> evidence and a result row.

This is plain Python with no Dagster import; the Dagster trial partitions and the CLI both
call `run_trials`, which runs a batch concurrently up to `max_parallel`.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench_pipeline import __version__
from bench_pipeline.agents import make_agent
from bench_pipeline.agents.base import (
    BUDGET,
    COMPLETED,
    MAX_TURNS,
    TIMEOUT,
    AgentRequest,
    TaskFault,
    Usage,
)
from bench_pipeline.agents.offline import NotApplicable
from bench_pipeline.agents.transcript import Transcript
from bench_pipeline.formats.model import Check, Config, Prices, Task, findings_mode
from bench_pipeline.formats.serialize import readable_json
from bench_pipeline.formats.taskset import FrozenTaskSet
from bench_pipeline.formats.vocabulary import (
    ISOLATION_SANDBOX,
    OUTCOME_AGENT_ERROR,
    OUTCOME_BUDGET,
    OUTCOME_CANCELLED,
    OUTCOME_INVALIDATED,
    OUTCOME_NOT_APPLICABLE,
    OUTCOME_SUCCEEDED,
    OUTCOME_TASK_ERROR,
    OUTCOME_WORKSPACE_ERROR,
)
from bench_pipeline.scorers import tests as repo_tests
from bench_pipeline.trials import completion
from bench_pipeline.workspace import evidence, sandbox
from bench_pipeline.workspace.process import CommandResult, grader_env, run_command, scrubbed_env
from bench_pipeline.workspace.repo import (
    BackgroundRemoval,
    WorkspaceError,
    create_workspace,
    put_back_staged,
    remove_workspace,
    stage_workspace,
)
from bench_pipeline.workspace.snapshot import InputsChangedError, changed_inputs, snapshot_inputs

PASSED, FAILED, INCONCLUSIVE = "passed", "failed", "inconclusive"
FINDING_OUTPUT_CHARS = 2000
# Environment variable names whose values are secrets wherever they appear.
SECRET_HINTS = ("KEY", "TOKEN", "SECRET", "PASSWORD")


@dataclass(frozen=True)
class TrialSpec:
    task: Task
    config: Config
    repetition: int
    is_baseline: bool = False

    @property
    def trial_id(self) -> str:
        return f"{self.task.id}/{self.config.id}/{self.repetition}"


@dataclass
class TrialContext:
    """Run-wide facts every trial of a benchmark run shares."""

    run_id: str
    suite: str
    suite_dir: Path
    taskset: FrozenTaskSet
    prices: Prices
    evidence_root: Path  # <evidence>/<run_id>
    work_root: Path  # where workspaces are made; removed after each trial
    prepare_commands: tuple[tuple[str, ...], ...] = ()
    environ: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    cancelled: Callable[[], bool] = lambda: False
    keep_workspaces: bool = False
    attempt_no: int = 1
    # Called with the final workspace after grading (e.g. commit and push it for CI); what it
    # returns is stored under "finalize" in the trial's metadata.json.
    finalize_workspace: Callable[[Path, TrialSpec], dict[str, Any]] | None = None
    on_trial_done: Callable[[dict[str, Any], list[dict[str, Any]]], None] | None = None
    # Called with the trial row and its per-test rows (TEST_RESULTS) before on_trial_done.
    on_test_results: Callable[[dict[str, Any], list[dict[str, Any]]], None] | None = None
    prepare_cache: Path | None = None  # where prepare caches live (None: no cache)
    # where the workspaces' object stores live, one per repository and base commit (None: a
    # workspace borrows every object of the source repository, commits after its base too)
    objects_cache: Path | None = None
    # Per-run facts every trial would otherwise recompute (~1 ms a text case): the secrets in
    # `environ`, and each config's hash and frozen agent dict. Filled on first use.
    _secrets: list[str] | None = field(default=None, init=False, repr=False)
    _configs: dict[int, tuple[Config, str, dict[str, Any]]] = field(
        default_factory=dict, init=False, repr=False
    )

    def secrets(self) -> list[str]:
        if self._secrets is None:
            self._secrets = [
                v for k, v in self.environ.items() if any(h in k.upper() for h in SECRET_HINTS)
            ]
        return self._secrets

    def config_facts(self, config: Config) -> tuple[str, dict[str, Any]]:
        """(hash, frozen agent dict) of a config of this run (frozen: the same every trial)."""
        # By identity (the value keeps the config alive, so its id is not reused).
        facts = self._configs.get(id(config))
        if facts is None:
            facts = self._configs[id(config)] = (config, config.hash, config.agent.frozen_dict())
        return facts[1], facts[2]


@dataclass
class TrialOutcome:
    row: dict[str, Any]  # a TRIALS row
    checks: list[dict[str, Any]]  # CHECK_RESULTS rows (every attempt)
    tests: list[dict[str, Any]] = field(default_factory=list)  # TEST_RESULTS rows


def run_trials(
    ctx: TrialContext, specs: Iterable[TrialSpec], max_parallel: int
) -> list[TrialOutcome]:
    """Run trials concurrently (threads: the work is in child processes), started in the given
    order, at most `max_parallel` at once and at most each config's own `max_parallel` of its
    trials (specs of several configs share one pool: a rate-limited config waits for its slot
    while the others go on). Outcomes come back in the order of `specs`."""
    specs = list(specs)
    width = min(max_parallel, len(specs))
    with BackgroundRemoval() as removal:  # every trial's folders are gone when this returns
        if width <= 1:
            return [run_trial(ctx, s, remove=removal.remove) for s in specs]
        return _run_pool(ctx, specs, width, removal.remove)


def _run_pool(
    ctx: TrialContext,
    specs: list[TrialSpec],
    width: int,
    remove: Callable[[Path, Path | None], None],
) -> list[TrialOutcome]:
    pending = list(enumerate(specs))
    running: Counter[str] = Counter()
    outcomes: dict[int, TrialOutcome] = {}
    slots = threading.Condition()

    def next_spec() -> tuple[int, TrialSpec] | None:
        with slots:
            while pending:
                for i, (index, spec) in enumerate(pending):
                    if running[spec.config.id] < max(1, spec.config.max_parallel):
                        running[spec.config.id] += 1
                        del pending[i]
                        return index, spec
                slots.wait()
            return None

    def worker() -> None:
        while (item := next_spec()) is not None:
            index, spec = item
            try:
                outcomes[index] = run_trial(ctx, spec, remove=remove)
            finally:
                with slots:
                    running[spec.config.id] -= 1
                    slots.notify_all()

    with ThreadPoolExecutor(max_workers=width, thread_name_prefix="trial") as pool:
        for future in [pool.submit(worker) for _ in range(width)]:
            future.result()
    return [outcomes[i] for i in range(len(specs))]


def run_trial(
    ctx: TrialContext,
    spec: TrialSpec,
    remove: Callable[[Path, Path | None], None] = remove_workspace,
) -> TrialOutcome:
    """Run one trial. Never raises for a trial-level problem: it becomes the trial's outcome.
    `remove(folder, up_to)` removes its work folders after (`run_trials` does it in the
    background)."""
    started_at = datetime.now(UTC)
    start = time.monotonic()
    task, config = spec.task, spec.config
    trial_dir = ctx.evidence_root / task.id / config.id / f"rep{spec.repetition}"
    if trial_dir.exists():  # a crashed earlier attempt of this trial: start clean
        shutil.rmtree(trial_dir)
    trial_dir.mkdir(parents=True)
    transcript = Transcript(trial_dir / "transcript.jsonl", ctx.secrets())
    state = _TrialState(ctx, spec, trial_dir, transcript, start)
    try:
        state.execute()
    except Exception as exc:  # a bug in an agent or in us: keep the trial, record why
        if isinstance(exc, InputsChangedError):
            state.outcome = OUTCOME_INVALIDATED  # graded files no longer as frozen: infrastructure
        elif isinstance(exc, WorkspaceError):
            state.outcome = OUTCOME_WORKSPACE_ERROR
        else:
            state.outcome = OUTCOME_AGENT_ERROR
        state.error = f"{type(exc).__name__}: {exc}"
        (trial_dir / "error.txt").write_text(transcript.redact(traceback.format_exc()))
    try:
        transcript.close()  # every event is written; finish() caps the file
        outcome = state.finish(started_at, time.monotonic() - start)
    finally:
        transcript.close()
        if not ctx.keep_workspaces and state.work_dir is not None:
            remove(state.work_dir, ctx.work_root)
        if state.private_dir is not None:
            remove(state.private_dir, None)
    if ctx.on_test_results and outcome.tests:
        ctx.on_test_results(outcome.row, outcome.tests)
    if ctx.on_trial_done:
        ctx.on_trial_done(outcome.row, outcome.checks)
    return outcome


def _fresh_folder(path: Path) -> Path:
    """`path` as an empty folder (what an earlier grading left there removed)."""
    if path.is_symlink():
        path.unlink()
    elif path.exists():
        remove_workspace(path)
    path.mkdir(parents=True)
    return path


def _grading_runtime(task: Task) -> tuple[Path, ...]:
    """The environment of the interpreter a `tests` criterion names (`tests.python`), visible
    read-only to the graders: the task author chose it, the agent did not."""
    python = task.tests.python if task.tests is not None else None
    if not python or not os.path.isabs(python):
        return ()
    root = Path(python).parent.parent  # <venv>/bin/python -> <venv>
    return (root,) if root != Path("/") else ()


class _TrialState:
    def __init__(
        self,
        ctx: TrialContext,
        spec: TrialSpec,
        trial_dir: Path,
        transcript: Transcript,
        start: float,
    ):
        self.ctx, self.spec, self.dir, self.transcript = ctx, spec, trial_dir, transcript
        self.agent_spec = spec.config.agent
        self.deadline = start + self.agent_spec.timeout_seconds
        self.inputs_dir = trial_dir / "inputs"
        self.input_hashes = ctx.taskset.input_hashes.get(spec.task.id, {})
        # Private to the trial and outside the evidence: what the agent writes there (its home,
        # /tmp, the prompt and usage files) is neither visible to others nor kept as evidence.
        self.private_root = (
            ctx.work_root / ctx.run_id / spec.task.id / spec.config.id / f"rep{spec.repetition}"
        )
        self.home = self.private_root / "home"
        self.tmp = self.private_root / "tmp"
        self.scratch = self.private_root / "scratch"
        self.grading_home = self.home  # (a fresh one for each grading: `_grade`)
        self.prepared_home: Path | None = None  # what prepare left in the home, if anything
        self.workspace: Path | None = None
        # The trial's work area (workspace, agent home, /tmp, exchange files), removed after;
        # None when the trial needs none (see `execute`).
        self.work_dir: Path | None = self.private_root
        self.isolation: sandbox.Isolation | None = None
        self.isolation_note: str | None = None
        self.usage = Usage()
        self.answer_model: str | None = None  # the model that answered, when the agent says
        self.outcome = OUTCOME_SUCCEEDED
        self.error: str | None = None
        self.iterations = 0
        self.retries = 0
        self.agent_seconds = 0.0
        self.grading_seconds = 0.0
        self.attempts: list[dict[str, Any]] = []
        self.check_rows: list[dict[str, Any]] = []
        self.final_checks: list[dict[str, Any]] = []
        self.answer: str | None = None
        self.turns: list[dict[str, Any]] = []
        # What the tests criterion reads and writes while the trial runs lives in a private temp
        # folder, neither in the workspace nor in the evidence folder (whose path reaches
        # agents through {prompt_file}): the hidden files and each attempt's test output, which
        # would otherwise leak more than `findings` allows. The output moves to the evidence at
        # the end of the trial.
        self.private_dir: Path | None = None
        # the workspace as last graded is indexed in the harness's git folder, and no agent
        # attempt ran since (`_grade`, `repo.stage_workspace`)
        self.staged = False
        self.hidden_dir: Path | None = None
        self.hidden_hashes: dict[str, str] = {}
        self.plumbing: repo_tests.Plumbing | None = None
        hidden = set(spec.task.tests.suite_files) if spec.task.tests is not None else set()
        hidden -= {f for c in spec.task.checks for f in c.files}  # a check that names one sees it
        self.visible_hashes = {k: v for k, v in self.input_hashes.items() if k not in hidden}
        self.test_rows: list[dict[str, Any]] = []
        self.final_tests: dict[str, Any] | None = None

    # ---------------------------------------------------------------- steps

    def execute(self) -> None:
        task = self.spec.task
        agent = make_agent(self.agent_spec)
        if (skip := agent.not_applicable(task)) is not None:
            message, reason = skip
            self._set(OUTCOME_NOT_APPLICABLE, message)
            self.usage = Usage.unknown(f"not run: {reason}")
            return
        if not task.is_text or agent.starts_processes:
            if self.private_root.exists():  # a crashed earlier attempt of this trial
                remove_workspace(self.private_root)
            for folder in (self.home, self.tmp, self.scratch):
                folder.mkdir(parents=True)
        else:  # an in-process agent on a text case: nothing would use them
            self.work_dir = None
        snapshot_inputs(self.ctx.suite_dir, self.visible_hashes, self.inputs_dir)
        if not task.is_text:
            assert task.repo and task.base_sha
            self.workspace = create_workspace(
                task.repo, task.base_sha, self.private_root / "repo", self.ctx.objects_cache
            )
            if task.tests is not None:
                self.private_dir = Path(tempfile.mkdtemp(prefix="bench-grading-"))
                self.hidden_dir = self.private_dir / "hidden"
                self.hidden_hashes = repo_tests.materialize(
                    task.tests, self.ctx.suite_dir, self.input_hashes, task.repo, self.hidden_dir
                )
        self._isolate()
        if not task.is_text:
            cache = self.ctx.prepare_cache
            cache.mkdir(parents=True, exist_ok=True)
            with sandbox.isolated(self.isolation and self.isolation.for_prepare((cache,))):
                self._prepare()
            if self.outcome != OUTCOME_SUCCEEDED:
                return
            if any(self.home.iterdir()):
                # The home as prepare left it (a `pip install --user`, a tool's config), before
                # any agent ran: each grading's fresh home starts as this copy, so graders see
                # what prepare set up and nothing an attempt put there.
                self.prepared_home = self.private_root / "prepared-home"
                try:
                    shutil.copytree(self.home, self.prepared_home, symlinks=True)
                except OSError as exc:
                    raise WorkspaceError(f"cannot keep the home prepare left: {exc}") from None
            if task.tests is not None:  # (what pytest reads besides the tests, before the agent)
                reference = self.inputs_dir / (task.reference_patch or "")
                self.plumbing = repo_tests.Plumbing.snapshot(
                    self.workspace,
                    task.tests,
                    reference.read_text(errors="replace")
                    if task.reference_patch and reference.is_file()
                    else None,
                )
        state: dict[str, Any] = {}
        prompt = task.prompt
        for attempt in range(1, self.agent_spec.max_iterations + 1):
            if self.ctx.cancelled():
                self._set(OUTCOME_CANCELLED, "cancelled before the attempt started")
                return
            self.iterations = attempt
            if not self._run_agent(agent, attempt, prompt, state):
                return
            if task.is_text or not (task.checks or task.tests):
                return
            checks = self._grade(attempt)
            if self.outcome != OUTCOME_SUCCEEDED:
                return
            failing = [c for c in checks if c["status"] != PASSED]
            if not failing or attempt == self.agent_spec.max_iterations or not agent.takes_feedback:
                return
            prompt = findings_prompt(failing, findings_mode(task))
            self.transcript.write("findings", attempt=attempt, prompt=prompt)
            self._put_back_after_grading(attempt)

    def _isolate(self) -> None:
        """Decide how this trial's processes run (see workspace/sandbox.py)."""
        try:
            mode, self.isolation_note = sandbox.resolve_mode(self.agent_spec.isolation)
        except sandbox.SandboxUnavailable as exc:
            raise WorkspaceError(f"isolation: sandbox is unavailable: {exc}") from None
        self.isolation = sandbox.trial_isolation(
            self.agent_spec,
            mode,
            workspace=self.workspace,
            private=(self.home, self.scratch),
            tmp=self.tmp,
            token=self.spec.trial_id,
        )

    def _prepare(self) -> None:
        from bench_pipeline.trials.prepare import run_prepare

        task = self.spec.task
        assert self.workspace is not None and task.repo and task.base_sha
        result = run_prepare(
            (*self.ctx.prepare_commands, *task.prepare),
            self.workspace,
            self.home,
            self.dir,
            self.deadline,
            task.repo,
            task.base_sha,
            self.ctx.prepare_cache,
            redact=self.transcript.redact,
            cancelled=self.ctx.cancelled,
        )
        if not result.ok:
            self._set(OUTCOME_WORKSPACE_ERROR, result.error or "prepare failed")

    def _run_agent(self, agent: Any, attempt: int, prompt: str, state: dict[str, Any]) -> bool:
        """One attempt of the agent; False when the trial ends here (failure or not applicable)."""
        env = scrubbed_env(allow=self.agent_spec.env, home=self.home)
        request = AgentRequest(
            task=self.spec.task,
            agent=self.agent_spec,
            workspace=self.workspace,
            prompt=prompt,
            attempt=attempt,
            deadline=self.deadline,
            spent_usd=self.usage.cost_usd if self.usage.cost_unknown_reason is None else None,
            inputs_dir=self.inputs_dir,
            evidence_dir=self.dir,
            transcript=self.transcript,
            prices=self.ctx.prices,
            env=env,
            state=state,
            cancelled=self.ctx.cancelled,
            work_dir=self.work_dir,
            scratch_dir=self.scratch
            if self.work_dir is not None
            and self.isolation is not None
            and self.isolation.mode == ISOLATION_SANDBOX
            else None,
        )
        t0 = time.monotonic()
        self.staged = False
        self.transcript.write("attempt_start", attempt=attempt, prompt=prompt)
        try:
            with sandbox.isolated(self.isolation):
                result = agent.run(request)
        except NotApplicable as exc:
            self._set(OUTCOME_NOT_APPLICABLE, str(exc))
            self.usage = Usage.unknown(f"not run: {exc.reason}")
            return False
        except TaskFault as exc:
            self._set(OUTCOME_TASK_ERROR, str(exc))
            return False
        finally:
            self.agent_seconds += time.monotonic() - t0
            if request.scratch_dir is not None:
                self._keep_exchange(request.scratch_dir)
        self.usage = self.usage + result.usage if self.iterations > 1 else result.usage
        self.retries += result.retries
        self.answer = result.answer if result.answer is not None else self.answer
        self.answer_model = result.model or self.answer_model
        self.turns = result.turns or self.turns
        self.attempts.append(
            {
                "attempt": attempt,
                "status": result.status,
                "error": result.error,
                "usage": asdict(result.usage),
            }
        )
        self.transcript.write(
            "attempt_end", attempt=attempt, status=result.status, error=result.error
        )
        if not self._inputs_intact("after the agent"):
            return False
        if self.ctx.cancelled():
            self._set(OUTCOME_CANCELLED, "cancelled during the attempt")
            return False
        if result.status in (TIMEOUT, BUDGET, MAX_TURNS):
            why = {
                TIMEOUT: f"timeout: the trial exceeded {self.agent_spec.timeout_seconds:g} s",
                BUDGET: f"budget: known spend above budget_usd {self.agent_spec.budget_usd}",
                MAX_TURNS: f"max_turns: {self.agent_spec.max_turns} tool-use steps used",
            }[result.status]
            self._set(OUTCOME_BUDGET, f"{why} ({result.error})" if result.error else why)
            return False
        if result.status != COMPLETED:
            self._set(OUTCOME_AGENT_ERROR, result.error or f"agent ended with {result.status}")
            return False
        budget = self.agent_spec.budget_usd
        if budget is not None and self.usage.cost_usd is not None and self.usage.cost_usd > budget:
            self._set(
                OUTCOME_BUDGET, f"budget: spent ${self.usage.cost_usd:.4f} > budget_usd {budget}"
            )
            return False
        return True

    def _keep_exchange(self, scratch: Path) -> None:
        """Sandboxed agents exchange the prompt and usage files through a private folder: keep
        copies in the evidence (redacted, at most the file cap each) as the process mode does."""
        cap = evidence.caps()["file_bytes"]
        for path in sorted(scratch.glob("*-attempt*.*")):
            if path.is_file() and not path.is_symlink():
                with open(path, "rb") as fh:
                    self._write(path.name, fh.read(cap).decode("utf-8", errors="replace"))

    def _grade(self, attempt: int) -> list[dict[str, Any]]:
        t0 = time.monotonic()
        if not self._inputs_intact("before grading"):
            return []
        if self.workspace is not None:
            # What the graders see, indexed: grading runs the agent's code, which can change
            # the workspace (copy the hidden tests somewhere, leave their bytecode); the
            # next attempt, the patch and a CI push get this state, not what grading left.
            stage_workspace(self.workspace)
            self.staged = True
        # The tests runner writes its report into its attempt's folder, which alone of the
        # private folder it sees: the hidden tests' own folder stays out of the sandbox (code
        # under test that changed them invalidated its trial: unscored).
        private = (self._private_folder(f"attempt{attempt}/tests"),) if self.private_dir else ()
        # A home and /tmp of the grading's own, fresh each time: the agent's persist across its
        # attempts, and code under test copied the hidden tests into them.
        self.grading_home = _fresh_folder(self.private_root / "grading-home")
        if self.prepared_home is not None:
            try:
                shutil.copytree(
                    self.prepared_home, self.grading_home, symlinks=True, dirs_exist_ok=True
                )
            except OSError as exc:
                raise WorkspaceError(f"cannot give the graders prepare's home: {exc}") from None
        grading_tmp = _fresh_folder(self.private_root / "grading-tmp")
        graders = (
            self.isolation.for_graders(
                self.inputs_dir,
                private,
                _grading_runtime(self.spec.task),
                workspace=self.workspace,
                home=self.grading_home,
                tmp=grading_tmp,
                agent_private=(self.home, self.scratch),
            )
            if self.isolation
            else None
        )
        with sandbox.isolated(graders):
            checks = [self._run_check(check, attempt) for check in self.spec.task.checks]
            if self.spec.task.tests is not None:
                checks.append(self._run_tests(attempt))
        self.grading_seconds += time.monotonic() - t0
        if not self._inputs_intact("after grading"):
            return []
        self.final_checks = checks
        return checks

    def _run_check(self, check: Check, attempt: int) -> dict[str, Any]:
        result, status = execute_check(
            check, self.inputs_dir, self.workspace, self.grading_home, self.ctx.cancelled
        )  # type: ignore[arg-type]
        log = f"attempt{attempt}/checks/{check.id}.log"
        self._write(log, result.output)
        row = {
            "id": check.id,
            "description": check.description,
            "status": status,
            "exit_code": result.exit_code,
            "timed_out": result.timed_out,
            "duration_seconds": round(result.duration_seconds, 4),
            "reason": check_reason(check, result, status),
            "output": self.transcript.redact(result.output[-FINDING_OUTPUT_CHARS:]),
            "log": log,
        }
        self.check_rows.append(
            {
                "check_id": check.id,
                "attempt": attempt,
                "status": status,
                "exit_code": result.exit_code,
                "timed_out": result.timed_out,
                "duration_seconds": result.duration_seconds,
            }
        )
        return row

    def _run_tests(self, attempt: int) -> dict[str, Any]:
        """The task's `tests` criterion, as one check row (id `tests`) plus per-test rows."""
        spec = self.spec.task.tests
        assert spec is not None and self.workspace is not None and self.hidden_dir is not None
        run = repo_tests.run_tests(
            spec,
            self.workspace,
            self.hidden_dir,
            self.hidden_hashes,
            self.grading_home,
            self._private(f"attempt{attempt}/tests"),
            self.ctx.cancelled,
            self.plumbing,
        )
        log = f"attempt{attempt}/tests/output.log"
        self._private(log).write_text(self.transcript.redact(run.output), encoding="utf-8")
        summary = run.summary()
        self.final_tests = summary
        results = self._private(f"attempt{attempt}/tests/results.json")
        results.write_text(self.transcript.redact(json.dumps(summary, indent=2)), encoding="utf-8")
        self.test_rows.extend(repo_tests.test_rows(run, attempt))
        row = repo_tests.check_row(run, spec, summary, log, FINDING_OUTPUT_CHARS)
        row["output"] = self.transcript.redact(row["output"])
        self.check_rows.append(
            {
                "check_id": row["id"],
                "attempt": attempt,
                "status": run.status,
                "exit_code": run.exit_code,
                "timed_out": run.timed_out,
                "duration_seconds": run.duration_seconds,
            }
        )
        return row

    def _private(self, rel: str) -> Path:
        assert self.private_dir is not None
        path = self.private_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def _put_back_after_grading(self, attempt: int) -> None:
        """The workspace as the agent left it before grading (`repo.put_back_staged`)."""
        if self.workspace is None or not self.staged:
            return
        changed = put_back_staged(self.workspace)
        if changed:
            self.transcript.write(
                "grading_changes_undone", attempt=attempt, paths=changed[:20], count=len(changed)
            )

    def _private_folder(self, rel: str) -> Path:
        path = self._private(rel)
        path.mkdir(exist_ok=True)
        return path

    def _publish_private(self) -> None:
        """Move each attempt's test output from the private folder into the evidence."""
        if self.private_dir is None:
            return
        for folder in sorted(self.private_dir.glob("attempt*")):
            shutil.copytree(folder, self.dir / folder.name, dirs_exist_ok=True)

    def _inputs_intact(self, when: str) -> bool:
        changed = changed_inputs(self.inputs_dir, self.visible_hashes)
        if self.hidden_dir is not None:
            changed += repo_tests.changed_hidden(self.hidden_dir, self.hidden_hashes)
        if changed:
            self._set(OUTCOME_INVALIDATED, f"grader integrity: {', '.join(changed)} changed {when}")
            self.transcript.write("invalidated", files=changed, when=when)
            return False
        return True

    def _set(self, outcome: str, error: str) -> None:
        if self.outcome == OUTCOME_SUCCEEDED:  # the first failure is the cause; keep it
            self.outcome, self.error = outcome, error

    def _write(self, rel: str, text: str) -> None:
        path = self.dir / rel
        text = self.transcript.redact(text)
        try:  # the folder exists from the trial's start, unless an agent removed it
            path.write_text(text, encoding="utf-8")
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")

    # ---------------------------------------------------------------- result

    def finish(self, started_at: datetime, duration: float) -> TrialOutcome:
        spec, task, ctx = self.spec, self.spec.task, self.ctx
        self._publish_private()
        finalize: dict[str, Any] = {}
        if (
            ctx.finalize_workspace
            and self.workspace is not None
            and self.outcome == OUTCOME_SUCCEEDED
        ):
            try:
                self._put_back_after_grading(self.iterations)
                finalize = ctx.finalize_workspace(self.workspace, spec)
            except Exception as exc:  # CI push failures must not lose the trial
                finalize = {"error": f"{type(exc).__name__}: {exc}"}
        caps = evidence.caps()
        kept: dict[str, dict[str, Any]] = {}
        if self.workspace is not None and task.base_sha and self.workspace.exists():
            try:
                kept["changes.patch"] = evidence.write_patch(
                    self.workspace,
                    task.base_sha,
                    self.dir / "changes.patch",
                    caps["patch_bytes"],
                    self.transcript.redact,
                    staged=self.staged,
                )
            except WorkspaceError as exc:
                self._set(OUTCOME_WORKSPACE_ERROR, f"cannot diff the workspace: {exc}")
        if self.answer is not None:
            self._write("answer.txt", self.answer)
        if self.turns:
            self._write("turns.json", readable_json(self.turns))
        # Only where the task has checks: a text case's "[]" cost a file creation (~0.25 ms
        # here, a twentieth of its harness cost) to say what the missing file says.
        if task.checks or self.final_checks:
            self._write("checks.json", readable_json(self.final_checks))
        if self.final_tests is not None:  # tests fixed / still failing / broken, final attempt
            self._write(repo_tests.EVIDENCE_FILE, json.dumps(self.final_tests, indent=2))
        # The attempts are metadata.json's `attempts` (written last, never cut by the caps):
        # a file of their own said the same thing at the cost of another file creation.
        if self.transcript.truncated:
            kept["transcript.jsonl"] = {
                "bytes": self.transcript.written,
                "full_bytes": self.transcript.full_bytes,
                "truncated": True,
            }
        kept.update(evidence.cap_files(self.dir, caps["file_bytes"], skip=("changes.patch",)))
        outputs = list(self.isolation.truncated_outputs) if self.isolation else []
        truncated = bool(outputs) or any(v.get("truncated") for v in kept.values())
        usage = self.usage
        cost, unknown = usage.cost_usd, usage.cost_unknown_reason
        if cost is None and unknown is None:
            unknown = "the agent reported no usage"
        a = self.agent_spec
        config_hash, frozen_agent = ctx.config_facts(spec.config)
        row: dict[str, Any] = {
            "run_id": ctx.run_id,
            "suite": ctx.suite,
            "task_set_revision": ctx.taskset.revision,
            "trial_id": spec.trial_id,
            "task_id": task.id,
            "config_id": spec.config.id,
            "repetition": spec.repetition,
            "tags": list(task.tags),
            "holdout": task.holdout,
            "difficulty": task.difficulty,
            "agent": a.name,
            "agent_kind": a.kind,
            "model": self.answer_model or a.model,
            "effort": a.effort,
            "config_hash": config_hash,
            "factory_ref": spec.config.factory_ref,
            "factory_sha": spec.config.factory_sha,
            "is_baseline": spec.is_baseline,
            "outcome": self.outcome,
            "error": self.transcript.redact(self.error) if self.error else None,
            "iterations": self.iterations,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cache_read_tokens": usage.cache_read_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
            "cost_usd": cost if unknown is None else None,
            "cost_unknown_reason": unknown,
            "duration_seconds": round(duration, 4),
            "agent_seconds": round(self.agent_seconds, 4),
            "grading_seconds": round(self.grading_seconds, 4),
            "retries": self.retries,
            "started_at": started_at,
            "finished_at": datetime.now(UTC),
            "evidence_dir": str(self.dir),
            "engine_version": __version__,
            "attempt_no": ctx.attempt_no,
            "isolation": self.isolation.mode if self.isolation else None,
            "network": self.isolation.network if self.isolation else None,
            "evidence_truncated": truncated,
        }
        metadata = {
            **{k: v for k, v in row.items() if k not in ("started_at", "finished_at")},
            "started_at": started_at.isoformat(),
            "finished_at": row["finished_at"].isoformat(),
            "config": frozen_agent,
            "config_overrides": dict(spec.config.overrides),
            "input_hashes": self.input_hashes,
            "hidden_test_hashes": self.hidden_hashes,
            "base_sha": task.base_sha,
            "attempts": self.attempts,
            "finalize": finalize,
            "isolation_note": self.isolation_note,
            "evidence": {"caps": caps, "truncated": truncated, "files": kept, "outputs": outputs},
        }
        self._write("metadata.json", readable_json(metadata))
        checks = [{"run_id": ctx.run_id, "trial_id": spec.trial_id, **c} for c in self.check_rows]
        keys = {k: row[k] for k in ("run_id", "trial_id", "task_id", "config_id", "repetition")}
        tests = [{**keys, **t} for t in self.test_rows]
        return TrialOutcome(row, checks, tests)


def substitute(argv: Iterable[str], inputs: Path, workspace: Path | None) -> list[str]:
    """`{inputs}` and `{workspace}` replaced in each argument (never through a shell)."""
    out = []
    for arg in argv:
        arg = arg.replace("{inputs}", str(inputs))
        if workspace is not None:
            arg = arg.replace("{workspace}", str(workspace))
        out.append(arg)
    return out


def execute_check(
    check: Check,
    inputs_dir: Path,
    workspace: Path,
    home: Path,
    cancelled: Callable[[], bool] | None = None,
) -> tuple[CommandResult, str]:
    """Run one deterministic check in the workspace; returns its result and status. A Python
    grader runs under `completion.LAUNCHER`: a passing code without its mark fails."""
    argv = substitute(check.command, inputs=inputs_dir, workspace=workspace)
    launched = completion.launch(argv, workspace)
    env = grader_env(home, check.env)
    if launched is None:
        result = run_command(argv, workspace, env, check.timeout_seconds, cancelled=cancelled)
        return result, check_status(result.exit_code, check.passed_codes, check.failed_codes)
    wrapped, mark = launched
    result = run_command(
        wrapped, workspace, env, check.timeout_seconds, stdin_text=mark + "\n", cancelled=cancelled
    )
    result, done = completion.finished(result, argv, mark)
    status = check_status(result.exit_code, check.passed_codes, check.failed_codes)
    # (a grader that never ran to its end: whatever code its process left, the code under
    # test ended it; not so a timeout, a cancel or a grader that could not start)
    ended = result.exit_code is not None and not result.timed_out and not result.cancelled
    return result, FAILED if ended and not done else status


def check_status(
    exit_code: int | None, passed: tuple[int, ...] = (0,), failed: tuple[int, ...] = (1,)
) -> str:
    """The check's declared codes (default 0 = passed, 1 = the behaviour is absent); any other
    code, a timeout or a command that cannot start = grader fault (inconclusive)."""
    if exit_code in passed:
        return PASSED
    if exit_code in failed:
        return FAILED
    return INCONCLUSIVE


def check_reason(check: Check, result: CommandResult, status: str) -> str:
    """Why a check ended as it did, in words that name the grader fault when there is one."""
    if result.cancelled:
        return "cancelled while the check ran"
    if result.timed_out:
        return f"timed out after {check.timeout_seconds:g} s (grader fault)"
    if result.exit_code is None:
        first = result.output.strip().splitlines()[0] if result.output.strip() else "not started"
        return f"grader fault: {first}"
    if status == INCONCLUSIVE:
        return (
            f"exit {result.exit_code} is neither a passed code {list(check.passed_codes)} nor "
            f"a failed code {list(check.failed_codes)} (grader fault)"
        )
    if status == FAILED and result.exit_code in check.passed_codes:
        return f"exit {result.exit_code}, but {completion.UNFINISHED}"
    if status == FAILED and result.exit_code not in check.failed_codes:
        return f"exit {result.exit_code}: {completion.ENDED_EARLY}"
    return f"exit {result.exit_code}"


def findings_prompt(failing: list[dict[str, Any]], mode: str = "full") -> str:
    """What the agent is told after a failed attempt (`findings`): the failing checks with their
    output (`full`), their ids and descriptions only (`names`; failing test ids for `tests`),
    or only that the attempt failed (`none`)."""
    lines = [
        "Your previous attempt did not pass these acceptance checks. Fix the code and try again.",
        "",
    ]
    if mode == "none":
        return lines[0]
    for c in failing:
        lines.append(f"- {c['id']} ({c['status']}): {c['description']}")
        if mode == "names":
            if c.get("names_output"):
                lines.append(c["names_output"])
            continue
        output = (c.get("output") or "").strip()
        if output:
            lines.append("  output:\n    " + output[-FINDING_OUTPUT_CHARS:].replace("\n", "\n    "))
    return "\n".join(lines)
