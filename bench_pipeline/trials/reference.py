"""`bench validate --reference`: every task must fail on its base and pass with its reference.

A task whose checks already pass on the base measures nothing; one whose reference patch does
not pass its own checks cannot be solved. No model is called.

A `tests` criterion is validated test by test (SWE-bench's rule): every FAIL_TO_PASS test fails
on the base and passes with the reference, every PASS_TO_PASS test passes on both. With
`repeat` K each phase runs K times in fresh checkouts (prepare included); a test whose outcome
changes between repeats is reported flaky and left out of the verdict, never silently counted.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from bench_pipeline.formats.git import GitError, local_repo, run_git
from bench_pipeline.formats.model import Task, TestsSpec
from bench_pipeline.formats.taskset import FrozenTaskSet
from bench_pipeline.scorers.tests import T_PASSED, TESTS_CHECK_ID, materialize, run_tests
from bench_pipeline.trials.prepare import run_prepare
from bench_pipeline.trials.runner import FAILED, INCONCLUSIVE, PASSED, execute_check
from bench_pipeline.workspace.repo import WorkspaceError, apply_patch, create_workspace
from bench_pipeline.workspace.snapshot import snapshot_inputs

PREPARE_TIMEOUT = 1800.0  # per validation checkout


@dataclass
class TaskValidation:
    task_id: str
    base: dict[str, str] = field(default_factory=dict)  # check id -> status on the base
    reference: dict[str, str] = field(default_factory=dict)  # check id -> status with reference
    problems: list[str] = field(default_factory=list)
    # `tests` criterion: test id -> outcomes over the repeats, per phase
    tests_base: dict[str, list[str]] = field(default_factory=dict)
    tests_reference: dict[str, list[str]] = field(default_factory=dict)
    flaky: list[str] = field(default_factory=list)  # mixed outcomes within a phase: not graded
    repeat: int = 1

    @property
    def ok(self) -> bool:
        return not self.problems

    def tests_summary(self, spec: TestsSpec | None) -> str:
        if spec is None:
            return ""
        f2p = [t for t in spec.fail_to_pass if t not in self.flaky and t not in spec.flaky]
        p2p = [t for t in spec.pass_to_pass if t not in self.flaky and t not in spec.flaky]
        fixed = sum(_always(self.tests_reference.get(t), True) for t in f2p)
        kept = sum(
            _always(self.tests_base.get(t), True) and _always(self.tests_reference.get(t), True)
            for t in p2p
        )
        return f"fail_to_pass {fixed}/{len(f2p)} fixed, pass_to_pass {kept}/{len(p2p)} kept"


def _always(outcomes: list[str] | None, passing: bool) -> bool:
    return bool(outcomes) and all((o == T_PASSED) == passing for o in outcomes)


def reference_apply_problem(task: Task, suite_dir: Path) -> str | None:
    """Why the task's reference patch does not apply to its base (`git apply --check`), or
    None. Checked against a throwaway index of the source repository: its working tree and
    its own index are never touched, and no workspace is made."""
    if task.is_text or not task.reference_patch or not task.repo or not task.base_sha:
        return None
    patch = suite_dir / task.reference_patch
    try:
        body = patch.read_bytes()
    except OSError as exc:
        return f"cannot read {task.reference_patch}: {exc.strerror}"
    with tempfile.TemporaryDirectory(prefix="bench-apply-check-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        try:
            repo = local_repo(task.repo)
            run_git(["read-tree", task.base_sha], repo, env=env)
            run_git(["apply", "--cached", "--check", "-"], repo, body, env=env)
        except GitError as exc:
            detail = str(exc).split(": ", 1)[-1].strip().splitlines()
            return f"{task.reference_patch} does not apply to {task.base_ref} ({task.base_sha[:10]}): {detail[0] if detail else 'git apply failed'}"
    return None


def validate_reference(
    taskset: FrozenTaskSet,
    suite_dir: Path,
    max_parallel: int = 2,
    repeat: int = 1,
    prepare_commands: tuple[tuple[str, ...], ...] = (),
) -> list[TaskValidation]:
    """Validate every coding task; with `repeat` > 1 each phase runs that many times and a
    test (or check) with mixed outcomes within a phase is reported flaky instead of graded."""
    coding = [t for t in taskset.tasks if not t.is_text]
    with tempfile.TemporaryDirectory(prefix="bench-validate-") as tmp:
        root = Path(tmp)

        def one(task: Task) -> TaskValidation:
            return _validate_task(
                task,
                taskset.input_hashes.get(task.id, {}),
                suite_dir,
                root / task.id,
                max(1, repeat),
                prepare_commands,
            )

        with ThreadPoolExecutor(max_workers=max(1, max_parallel)) as pool:
            return list(pool.map(one, coding))


def _validate_task(
    task: Task,
    hashes: dict[str, str],
    suite_dir: Path,
    folder: Path,
    repeat: int = 1,
    prepare_commands: tuple[tuple[str, ...], ...] = (),
) -> TaskValidation:
    result = TaskValidation(task.id, repeat=repeat)
    if not task.checks and task.tests is None:
        result.problems.append("has no checks or tests to validate")
        return result
    if not task.reference_patch:
        result.problems.append("has no reference patch (references/<id>.patch or reference_patch)")
        return result
    inputs, home = folder / "inputs", folder / "home"
    home.mkdir(parents=True)
    snapshot_inputs(suite_dir, hashes, inputs)
    assert task.repo and task.base_sha
    hidden, hidden_hashes = folder / "hidden-tests", {}
    if task.tests is not None:
        hidden_hashes = materialize(task.tests, suite_dir, hashes, task.repo, hidden)
    commands = (*prepare_commands, *task.prepare)
    check_runs: dict[str, dict[str, list[str]]] = {"base": {}, "reference": {}}
    for phase in ("base", "reference"):
        for k in range(1, repeat + 1):
            workspace = create_workspace(task.repo, task.base_sha, folder / phase)
            if phase == "reference":
                try:
                    apply_patch(workspace, (inputs / task.reference_patch).read_text())
                except WorkspaceError as exc:
                    result.problems.append(f"reference patch does not apply: {exc}")
                    return result
            if commands:
                evidence = folder / f"prepare-{phase}-{k}"
                evidence.mkdir(parents=True, exist_ok=True)
                prep = run_prepare(
                    commands,
                    workspace,
                    home,
                    evidence,
                    time.monotonic() + PREPARE_TIMEOUT,
                    task.repo,
                    task.base_sha,
                    None,
                )
                if not prep.ok:
                    result.problems.append(f"on {phase}: {prep.error}")
                    return result
            for c in task.checks:
                check_runs[phase].setdefault(c.id, []).append(
                    execute_check(c, inputs, workspace, home)[1]
                )
            if task.tests is not None:
                run = run_tests(
                    task.tests,
                    workspace,
                    hidden,
                    hidden_hashes,
                    home,
                    folder / f"tests-{phase}-{k}",
                )
                check_runs[phase].setdefault(TESTS_CHECK_ID, []).append(run.status)
                target = result.tests_base if phase == "base" else result.tests_reference
                for t in run.tests:
                    target.setdefault(t["test_id"], []).append(t["outcome"])
                if run.status == INCONCLUSIVE:
                    result.problems.append(f"tests on {phase}: {run.reason}")
            shutil.rmtree(workspace, ignore_errors=True)
    for phase in ("base", "reference"):
        for cid, statuses in check_runs[phase].items():
            getattr(result, phase)[cid] = statuses[0] if len(set(statuses)) == 1 else "flaky"
    if task.tests is not None:
        _judge_tests(task.tests, result)
    _judge_checks(task, result)
    return result


def _judge_tests(spec: TestsSpec, result: TaskValidation) -> None:
    """FAIL_TO_PASS fail on base and pass with the reference; PASS_TO_PASS pass on both.
    A test whose outcome changes between repeats of one phase is flaky: listed, not graded."""
    for tid in dict.fromkeys((*spec.fail_to_pass, *spec.pass_to_pass, *spec.flaky)):
        for outcomes in (result.tests_base.get(tid, []), result.tests_reference.get(tid, [])):
            if len({o == T_PASSED for o in outcomes}) > 1 and tid not in result.flaky:
                result.flaky.append(tid)
    skip = set(result.flaky) | set(spec.flaky)
    wrong = []
    if not [t for t in spec.fail_to_pass if t not in skip]:
        wrong.append("no fail_to_pass test left to grade: the task measures nothing")
    # FAIL_TO_PASS must fail on the base, PASS_TO_PASS pass there; both pass with the reference.
    expected = [(t, False, "") for t in spec.fail_to_pass]
    expected += [(t, True, "pass_to_pass ") for t in spec.pass_to_pass]
    for tid, passes_on_base, label in expected:
        if tid in skip:
            continue
        if not _always(result.tests_base.get(tid), passes_on_base):
            wrong.append(
                f"{label}{tid} {'does not pass' if passes_on_base else 'passes'} on the base"
            )
        if not _always(result.tests_reference.get(tid), True):
            seen = "" if passes_on_base else f" ({_seen(result, tid)})"
            wrong.append(f"{label}{tid} does not pass with the reference{seen}")
    if wrong:
        more = f" and {len(wrong) - 5} more" if len(wrong) > 5 else ""
        result.problems.append("tests: " + "; ".join(wrong[:5]) + more)


def _seen(result: TaskValidation, tid: str) -> str:
    return "/".join(result.tests_reference.get(tid, [])) or "not run"


def _judge_checks(task: Task, result: TaskValidation) -> None:
    checks = {c.id for c in task.checks}
    base = {k: v for k, v in result.base.items() if k in checks}
    reference = {k: v for k, v in result.reference.items() if k in checks}
    flaky = [
        f"{cid} on {p}"
        for p, d in (("base", base), ("reference", reference))
        for cid, s in d.items()
        if s == "flaky"
    ]
    if flaky:
        result.problems.append(f"check outcome changes between repeats: {', '.join(flaky)}")
    broken = [
        f"{cid} on {phase}"
        for phase, statuses in (("base", base), ("reference", reference))
        for cid, s in statuses.items()
        if s == INCONCLUSIVE
    ]
    if broken:
        result.problems.append(f"grader fault (an undeclared exit code): {', '.join(broken)}")
    if not checks:
        return
    if task.tests is None:  # with tests, the base is judged test by test instead
        if base and all(s == PASSED for s in base.values()):
            result.problems.append("checks already pass on the base: the task measures nothing")
        elif base and not any(s == FAILED for s in base.values()) and not broken:
            result.problems.append("no check fails on the base")
    failing = [cid for cid, s in reference.items() if s != PASSED]
    if failing:
        result.problems.append(f"reference patch does not pass: {', '.join(failing)}")
