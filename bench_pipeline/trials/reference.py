"""`bench validate --reference`: every task must fail on its base and pass with its reference.

A task whose checks already pass on the base measures nothing; one whose reference patch does
not pass its own checks cannot be solved. No model is called.
"""

from __future__ import annotations

import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from bench_pipeline.formats.git import GitError, local_repo, run_git
from bench_pipeline.formats.model import Task
from bench_pipeline.formats.taskset import FrozenTaskSet
from bench_pipeline.trials.runner import FAILED, INCONCLUSIVE, PASSED, execute_check
from bench_pipeline.workspace.repo import WorkspaceError, apply_patch, create_workspace
from bench_pipeline.workspace.snapshot import snapshot_inputs


@dataclass
class TaskValidation:
    task_id: str
    base: dict[str, str] = field(default_factory=dict)  # check id -> status on the base
    reference: dict[str, str] = field(default_factory=dict)  # check id -> status with reference
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


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
    taskset: FrozenTaskSet, suite_dir: Path, max_parallel: int = 2
) -> list[TaskValidation]:
    coding = [t for t in taskset.tasks if not t.is_text]
    with tempfile.TemporaryDirectory(prefix="bench-validate-") as tmp:
        root = Path(tmp)

        def one(task: Task) -> TaskValidation:
            return _validate_task(
                task, taskset.input_hashes.get(task.id, {}), suite_dir, root / task.id
            )

        with ThreadPoolExecutor(max_workers=max(1, max_parallel)) as pool:
            return list(pool.map(one, coding))


def _validate_task(
    task: Task, hashes: dict[str, str], suite_dir: Path, folder: Path
) -> TaskValidation:
    result = TaskValidation(task.id)
    if not task.checks:
        result.problems.append("has no checks to validate")
        return result
    if not task.reference_patch:
        result.problems.append("has no reference patch (references/<id>.patch or reference_patch)")
        return result
    inputs, home = folder / "inputs", folder / "home"
    home.mkdir(parents=True)
    snapshot_inputs(suite_dir, hashes, inputs)
    assert task.repo and task.base_sha
    for phase in ("base", "reference"):
        workspace = create_workspace(task.repo, task.base_sha, folder / phase)
        if phase == "reference":
            try:
                apply_patch(workspace, (inputs / task.reference_patch).read_text())
            except WorkspaceError as exc:
                result.problems.append(f"reference patch does not apply: {exc}")
                break
        statuses = {c.id: execute_check(c, inputs, workspace, home)[1] for c in task.checks}
        getattr(result, phase).update(statuses)
        shutil.rmtree(workspace, ignore_errors=True)
    broken = [
        f"{cid} on {phase}"
        for phase in ("base", "reference")
        for cid, s in getattr(result, phase).items()
        if s == INCONCLUSIVE
    ]
    if broken:
        result.problems.append(f"grader fault (exit code other than 0/1): {', '.join(broken)}")
    if result.base and all(s == PASSED for s in result.base.values()):
        result.problems.append("checks already pass on the base: the task measures nothing")
    elif result.base and not any(s == FAILED for s in result.base.values()) and not broken:
        result.problems.append("no check fails on the base")
    failing = [cid for cid, s in result.reference.items() if s != PASSED]
    if failing:
        result.problems.append(f"reference patch does not pass: {', '.join(failing)}")
    return result
