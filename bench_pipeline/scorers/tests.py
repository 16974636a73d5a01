"""Grading with a repository's own tests: the `tests` criterion of a task (SWE-bench's rule).

A task's `tests` names hidden test files and two lists of test ids. After the agent finished,
the files are copied into the workspace, the runner runs every test file the lists touch and
writes JUnit XML, the per-test outcomes are read from it, and the workspace is put back as it
was (the agent's next attempt never sees the tests, and the diff never contains them).

Verdict of one run (`grade`):

- `passed`  every FAIL_TO_PASS and PASS_TO_PASS test passed (known-flaky ids are run, reported
            and never counted);
- `failed`  any graded test did not pass: failed, errored, skipped, or absent from the report
            because the workspace's code made it uncollectable (a syntax error, an import error,
            a conftest that cannot be imported: the agent's failure, never unscored);
- `inconclusive`  only a fault of the grader's own machinery, and the reason says which: the
            runner's interpreter cannot be started or has no pytest, a timeout, pytest's
            internal error (exit 3), or no report for a reason we cannot attribute to the code.

Why the criterion is graded as one more check (id `tests`) of the trial rather than only by a
scorer of its own: every launch that scores `checks` (the default) then grades it, the retry
loop's findings and `bench validate --reference` treat it like any check, and a failed test
makes `checks` 0 exactly like a failed check. The registered `tests` scorer adds what a single
check cannot carry: the share of graded tests that passed (`tests:share`, weight 0 = reported
beside the 0/1 score, not counted twice) and the per-test lists in its details.
"""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from bench_pipeline.formats.git import GitError, run_git
from bench_pipeline.formats.model import TestsSpec
from bench_pipeline.formats.taskset import file_sha256
from bench_pipeline.formats.vocabulary import SCORE_INCONCLUSIVE, SCORE_MISSING, SCORE_NOT_SCORED
from bench_pipeline.scorers.base import Scorer, ScoreResult, TrialEvidence, register_scorer
from bench_pipeline.scorers.outcome import outcome_gate
from bench_pipeline.workspace.process import CommandResult, grader_env, run_command
from bench_pipeline.workspace.repo import WorkspaceError

PASSED, FAILED, INCONCLUSIVE = "passed", "failed", "inconclusive"
# Per-test outcomes. Only `passed` counts as passing.
T_PASSED, T_FAILED, T_ERROR, T_SKIPPED, T_MISSING = (
    "passed",
    "failed",
    "error",
    "skipped",
    "missing",
)
F2P, P2P, FLAKY = "fail_to_pass", "pass_to_pass", "flaky"
TESTS_CHECK_ID = "tests"
EVIDENCE_FILE = "tests.json"
MESSAGE_CHARS = 600
FINDING_MESSAGE_CHARS = 300  # per failing test in a `findings: full` prompt


@dataclass
class TestsRun:
    """One run of a task's tests against a workspace."""

    __test__ = False  # not a pytest test class

    status: str  # passed | failed | inconclusive
    reason: str
    tests: list[dict[str, Any]] = field(default_factory=list)  # graded + flaky ids, in order
    exit_code: int | None = None
    timed_out: bool = False
    duration_seconds: float = 0.0
    output: str = ""
    command: list[str] = field(default_factory=list)  # the runner's argv as run

    def ids(self, outcome_list: str, passing: bool) -> list[str]:
        return [
            t["test_id"]
            for t in self.tests
            if t["list"] == outcome_list and (t["outcome"] == T_PASSED) == passing
        ]

    def summary(self) -> dict[str, Any]:
        """What the trial evidence says: tests fixed, still failing, broken, flaky."""
        graded = [t for t in self.tests if t["list"] != FLAKY]
        passed = sum(t["outcome"] == T_PASSED for t in graded)
        return {
            "status": self.status,
            "reason": self.reason,
            "fixed": self.ids(F2P, True),
            "still_failing": self.ids(F2P, False),
            "broken": self.ids(P2P, False),
            "kept_passing": self.ids(P2P, True),
            "flaky": [t["test_id"] for t in self.tests if t["list"] == FLAKY],
            "passed": passed,
            "graded": len(graded),
            "share_passed": passed / len(graded) if graded else None,
            "exit_code": self.exit_code,
            "timed_out": self.timed_out,
            "command": self.command,
            "tests": self.tests,
        }


# --------------------------------------------------------------------------- hidden files


def materialize(
    spec: TestsSpec,
    suite_dir: Path,
    frozen: dict[str, str],
    repo: str | None,
    dest: Path,
) -> dict[str, str]:
    """Put the hidden test files under `dest` (workspace-relative layout; a private folder
    outside the workspace and the evidence) and return their sha256 by path, re-checked before
    every copy into the workspace. Suite files must still match the hashes frozen at launch."""
    hashes: dict[str, str] = {}
    for rel in spec.files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if spec.source_dir is not None:
            suite_rel = f"{spec.source_dir}/{rel}"
            shutil.copyfile(suite_dir / suite_rel, target)
            if suite_rel in frozen and file_sha256(target) != frozen[suite_rel]:
                raise WorkspaceError(
                    f"hidden test file {suite_rel} changed since the task set was frozen"
                )
        else:
            from bench_pipeline.formats.git import local_repo

            assert repo and spec.from_sha
            try:
                data = run_git(["show", f"{spec.from_sha}:{rel}"], local_repo(repo))
            except GitError as exc:  # the repo moved or lost the commit: infrastructure
                raise WorkspaceError(f"hidden test file {rel} at {spec.from_ref}: {exc}") from None
            target.write_bytes(data)
        target.chmod(0o444)
        hashes[rel] = file_sha256(target)
    return hashes


def changed_hidden(dest: Path, hashes: dict[str, str]) -> list[str]:
    return [
        rel
        for rel, sha in hashes.items()
        if not (dest / rel).is_file() or file_sha256(dest / rel) != sha
    ]


class _Placed:
    """The hidden files copied into a workspace; `restore` puts back what was there."""

    def __init__(self, workspace: Path, source: Path, files: tuple[str, ...]):
        self.saved: dict[Path, bytes | None] = {}
        self.made: list[Path] = []
        for rel in files:
            dst = workspace / rel
            if dst not in self.saved:
                self.saved[dst] = dst.read_bytes() if dst.is_file() else None
            parent, missing = dst.parent, []
            while not parent.exists():
                missing.append(parent)
                parent = parent.parent
            self.made.extend(reversed(missing))
            dst.parent.mkdir(parents=True, exist_ok=True)
            if dst.is_dir() or dst.is_symlink():
                # the agent put something else here: the test file replaces it while grading
                shutil.rmtree(dst) if dst.is_dir() else dst.unlink()
            shutil.copyfile(source / rel, dst)

    def restore(self) -> None:
        for dst, data in self.saved.items():
            if data is None:
                dst.unlink(missing_ok=True)
            else:
                dst.write_bytes(data)
        for d in reversed(self.made):
            shutil.rmtree(d, ignore_errors=True)


# --------------------------------------------------------------------------- JUnit XML


def test_file(test_id: str) -> str:
    return test_id.split("::", 1)[0]


def parse_junit(path: Path) -> dict[str, dict[str, Any]]:
    """Outcomes by pytest node id from a JUnit XML report (xunit1: `file` on each case).

    A collection error is a case named after the module with an `<error>`; it is returned under
    the file's path with the id `<file>::` so that every id of that file can inherit it.
    """
    root = ET.parse(path).getroot()
    out: dict[str, dict[str, Any]] = {}
    for case in root.iter("testcase"):
        name = case.get("name", "")
        file = case.get("file") or ""
        classname = case.get("classname") or ""
        if not file and classname:
            # xunit2 (no `file`): best effort from the dotted class name
            file = classname.replace(".", "/") + ".py"
        if not classname:
            test_id = f"{file}::"  # a module that failed to collect
        else:
            module = PurePosixPath(file).with_suffix("").as_posix().replace("/", ".")
            inner = classname[len(module) :].lstrip(".") if classname.startswith(module) else ""
            test_id = "::".join(p for p in (file, *inner.split("."), name) if p)
        outcome, message = T_PASSED, ""
        for tag, word in (("failure", T_FAILED), ("error", T_ERROR), ("skipped", T_SKIPPED)):
            el = case.find(tag)
            if el is not None:
                outcome = word
                message = _essential(el.text or "") or el.get("message") or ""
                break
        previous = out.get(test_id)
        if previous is not None and previous["outcome"] != T_PASSED:
            continue  # a teardown error after a pass is reported twice; keep the bad one
        out[test_id] = {
            "outcome": outcome,
            "duration_seconds": float(case.get("time") or 0.0),
            "message": message.strip()[-MESSAGE_CHARS:],
        }
    return out


def _essential(text: str) -> str:
    """pytest's failing source line (`>`), its error lines (`E`) and the location line; the
    text as it is for runners that do not write that shape."""
    lines = text.strip().splitlines()
    keep = [ln for ln in lines if ln.startswith((">", "E "))]
    if not keep:
        return text.strip()
    return "\n".join(keep + lines[-1:])


# --------------------------------------------------------------------------- running


def runner_argv(spec: TestsSpec, files: list[str], junit: Path) -> list[str]:
    if spec.runner == "command":
        return [a.replace("{junit}", str(junit)) for a in spec.command]
    return [
        spec.python,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-o",
        "junit_family=xunit1",
        f"--junitxml={junit}",
        *files,
    ]


def run_tests(
    spec: TestsSpec,
    workspace: Path,
    hidden_dir: Path,
    hidden_hashes: dict[str, str],
    home: Path,
    out_dir: Path,
    cancelled: Callable[[], bool] | None = None,
) -> TestsRun:
    """Copy the hidden files in, run the tests, read the report, restore the workspace."""
    changed = changed_hidden(hidden_dir, hidden_hashes)
    if changed:
        return TestsRun(INCONCLUSIVE, f"grader fault: hidden test files changed: {changed}")
    out_dir.mkdir(parents=True, exist_ok=True)
    junit = out_dir / "junit.xml"
    junit.unlink(missing_ok=True)
    ids = list(dict.fromkeys((*spec.fail_to_pass, *spec.pass_to_pass, *spec.flaky)))
    placed = _Placed(workspace, hidden_dir, spec.files)
    try:
        files = list(dict.fromkeys(test_file(t) for t in ids))
        present = [f for f in files if (workspace / f).is_file()]
        # grader_env turns plugin autoload off; `plugins: true` turns it back on
        overrides = [("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)] if spec.plugins else []
        overrides += list(spec.env)
        result = (
            run_command(
                runner_argv(spec, present, junit),
                workspace,
                grader_env(home, overrides),
                spec.timeout_seconds,
                cancelled=cancelled,
            )
            if present
            else None
        )
    finally:
        placed.restore()
    return grade(spec, ids, result, junit if junit.is_file() else None, present)


def run_whole_files(
    spec: TestsSpec,
    workspace: Path,
    hidden_dir: Path,
    home: Path,
    out_dir: Path,
    run_files: list[str] | None = None,
) -> tuple[CommandResult | None, dict[str, dict[str, Any]]]:
    """Run every test in the spec's files (ids not known yet: drafting a task) and return the
    runner's result and the report by test id (empty when no report was written)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    junit = out_dir / "junit.xml"
    junit.unlink(missing_ok=True)
    placed = _Placed(workspace, hidden_dir, spec.files)
    try:
        result = run_command(
            runner_argv(spec, run_files if run_files is not None else list(spec.files), junit),
            workspace,
            grader_env(home, spec.env),
            spec.timeout_seconds,
        )
    finally:
        placed.restore()
    return result, parse_junit(junit) if junit.is_file() else {}


def grade(
    spec: TestsSpec,
    ids: list[str],
    result: CommandResult | None,
    junit: Path | None,
    present: list[str],
) -> TestsRun:
    lists = {t: F2P for t in spec.fail_to_pass} | {t: P2P for t in spec.pass_to_pass}
    lists |= {t: FLAKY for t in spec.flaky}
    base = {
        "exit_code": result.exit_code if result else None,
        "timed_out": result.timed_out if result else False,
        "duration_seconds": round(result.duration_seconds, 4) if result else 0.0,
        "output": result.output if result else "",
        "command": [str(a) for a in result.argv] if result else [],
    }
    if result is not None:
        fault = _grader_fault(spec, result, junit)
        if fault is not None:
            return TestsRun(INCONCLUSIVE, f"grader fault: {fault}", **base)
    try:
        report = parse_junit(junit) if junit is not None else {}
    except ET.ParseError as exc:
        return TestsRun(INCONCLUSIVE, f"grader fault: unreadable JUnit report ({exc})", **base)
    no_report_reason = None
    if result is not None and junit is None:
        no_report_reason = _no_report_reason(result)
    tests = []
    for tid in ids:
        entry = report.get(tid)
        if entry is None:
            module_error = report.get(f"{test_file(tid)}::")
            if module_error is not None:
                entry = {**module_error, "outcome": T_ERROR}
            elif test_file(tid) not in present:
                entry = {"outcome": T_MISSING, "duration_seconds": 0.0, "message": "file absent"}
            else:
                why = no_report_reason or "not in the test report"
                entry = {"outcome": T_MISSING, "duration_seconds": 0.0, "message": why}
        tests.append({"test_id": tid, "list": lists[tid], **entry})
    graded = [t for t in tests if t["list"] != FLAKY]
    bad = [t for t in graded if t["outcome"] != T_PASSED]
    if not bad:
        return TestsRun(PASSED, f"all {len(graded)} graded tests passed", tests, **base)
    shown = ", ".join(f"{t['test_id']} ({t['list']}: {t['outcome']})" for t in bad[:5])
    more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
    reason = f"{len(bad)}/{len(graded)} graded tests did not pass: {shown}{more}"
    if no_report_reason:
        reason += f" ({no_report_reason})"
    return TestsRun(FAILED, reason, tests, **base)


def _grader_fault(spec: TestsSpec, result: CommandResult, junit: Path | None) -> str | None:
    """The runner itself failed, not the code under test; None when the run is gradable."""
    if result.cancelled:
        return "cancelled while the tests ran"
    if result.timed_out:
        return f"the tests timed out after {spec.timeout_seconds:g} s"
    if result.exit_code is None:
        return result.output.strip().splitlines()[0] if result.output.strip() else "not started"
    if junit is not None:
        if spec.runner == "pytest" and result.exit_code == 3:
            return "pytest internal error (exit 3)"
        return None
    if "No module named pytest" in result.output:
        return f"the interpreter {result.argv[0]} has no pytest installed"
    if spec.runner == "pytest" and result.exit_code in WORKSPACE_EXIT_CODES:
        return None  # the workspace's code or configuration stopped pytest: failed
    return f"the runner wrote no JUnit report (exit {result.exit_code})"


# pytest exit codes without a report that the workspace causes once the grader itself was
# validated (`bench validate --reference` ran the same command): 1 a conftest failed to import,
# 2 interrupted (collection errors), 4 usage error from the workspace's own configuration
# (pytest.ini/setup.cfg/pyproject addopts, a conftest), 5 nothing collected. Exit 3 (pytest's
# internal error) stays a grader fault.
WORKSPACE_EXIT_CODES = (1, 2, 4, 5)


def _no_report_reason(result: CommandResult) -> str | None:
    """Why the workspace's code kept pytest from writing a report, when pytest says so."""
    out = result.output
    if "while loading conftest" in out or ("conftest" in out and "Error" in out):
        return "a conftest.py in the workspace cannot be imported"
    if result.exit_code in WORKSPACE_EXIT_CODES:
        return f"pytest stopped with exit {result.exit_code} before writing a report"
    return None


# --------------------------------------------------------------------------- the scorer


@register_scorer
class TestsScorer(Scorer):
    """`tests`: 1 when every graded test passed; `tests:share` (weight 0) the share passed."""

    __test__ = False
    name = "tests"

    def score(self, trial: TrialEvidence) -> list[ScoreResult]:
        spec = trial.task.tests
        if spec is None:
            return [ScoreResult(self.name, SCORE_NOT_SCORED, reason="task has no tests criterion")]
        gate = outcome_gate(trial)
        if gate is not None:
            return [gate.result(self.name)]
        path = trial.evidence_dir / EVIDENCE_FILE
        if not path.is_file():
            return [ScoreResult(self.name, SCORE_MISSING, reason="no tests.json in the evidence")]
        data = json.loads(path.read_text(encoding="utf-8"))
        details = {k: data.get(k) for k in ("fixed", "still_failing", "broken", "flaky")}
        details["tests"] = [
            {k: t.get(k) for k in ("test_id", "list", "outcome")} for t in data.get("tests", [])
        ]
        status = data.get("status")
        if status == INCONCLUSIVE or status not in (PASSED, FAILED):
            reason = data.get("reason") or f"unknown status {status!r}"
            return [ScoreResult(self.name, SCORE_INCONCLUSIVE, reason=reason, details=details)]
        share = data.get("share_passed")
        common = {"group": self.name}
        main = ScoreResult.scored(
            self.name,
            1.0 if status == PASSED else 0.0,
            reason=data.get("reason", ""),
            details=details,
            **common,
        )
        out = [main]
        if share is not None:
            out.append(
                ScoreResult.scored(
                    f"{self.name}:share",
                    float(share),
                    reason=f"{data.get('passed')}/{data.get('graded')} graded tests passed",
                    weight=0.0,
                    **common,
                )
            )
        return out


def test_rows(run: TestsRun, attempt: int) -> list[dict[str, Any]]:
    """TEST_RESULTS rows of one attempt (the trial's keys are added by the runner)."""
    keep = ("test_id", "list", "outcome", "duration_seconds")
    return [{"attempt": attempt, **{k: t[k] for k in keep}} for t in run.tests]


def check_row(
    run: TestsRun, spec: TestsSpec, summary: dict[str, Any], log: str, max_chars: int
) -> dict[str, Any]:
    """The criterion as one check result (id `tests`) of the attempt: what `checks` grades and
    what the next attempt's findings show (`output` for full, `names_output` for names)."""
    findings = describe_for_findings(summary, "full")
    return {
        "id": TESTS_CHECK_ID,
        "description": (
            f"the repository's tests: {len(spec.fail_to_pass)} must go from failing to "
            f"passing, {len(spec.pass_to_pass)} must keep passing"
        ),
        "status": run.status,
        "exit_code": run.exit_code,
        "timed_out": run.timed_out,
        "duration_seconds": run.duration_seconds,
        "reason": run.reason,
        # the head: the failing ids come first, each with its message trimmed
        "output": f"{run.reason}\n{findings}"[:max_chars],
        "names_output": describe_for_findings(summary, "names"),
        "log": log,
    }


def describe_for_findings(run: dict[str, Any], mode: str) -> str:
    """The failing tests as the next attempt sees them (`findings: full | names`)."""
    bad = [t for t in run.get("tests", []) if t["list"] != FLAKY and t["outcome"] != T_PASSED]
    lines = []
    for t in bad:
        lines.append(f"  - {t['test_id']} ({t['list']}: {t['outcome']})")
        if mode == "full" and t.get("message"):
            message = t["message"][:FINDING_MESSAGE_CHARS]
            lines.append("      " + message.replace("\n", "\n      "))
    return "\n".join(lines)
