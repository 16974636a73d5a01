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

import dataclasses
import json
import os
import secrets
import shutil
import stat
import tempfile
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
from bench_pipeline.workspace.process import CommandResult, grader_env, run_command, take_mark
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
    reverted: list[str] = field(default_factory=list)  # plumbing run as before the agent

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
            "plumbing_as_before_the_agent": self.reverted,
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


class SwappedFiles:
    """Files put in place in a workspace while its tests run, and taken out again. What the
    agent had at a path (a file, a symlink, a folder) is moved aside whole and moved back by
    `restore`, so its work comes back exactly as it left it. Nothing is written through a
    symlink unless it is a folder inside the workspace: any other symlink on the way (or a
    file where a folder must be) is moved aside too, and a real folder takes its place."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.inside = workspace.resolve()
        self.aside: Path | None = None  # a folder beside the workspace, same filesystem
        # every change in order, undone in reverse: ("wrote", path), ("made", folder) or
        # ("moved", the agent's path, where it waits)
        self.done: list[tuple[str, Path, Path | None]] = []
        self.skipped: list[Path] = []  # what `restore` could not undo safely

    def _real_path_to(self, folder: Path) -> bool:
        """Whether `folder` is reached from the workspace through folders of the workspace
        only: real ones, or symlinks to folders inside it (as `put` uses them)."""
        here = self.workspace
        for part in folder.relative_to(self.workspace).parts:
            here = here / part
            try:
                mode = here.lstat().st_mode
            except OSError:
                return False
            if stat.S_ISLNK(mode) and not self._folder_inside(here):
                return False
            if not stat.S_ISLNK(mode) and not stat.S_ISDIR(mode):
                return False
        return True

    def put(self, rel: str, data: bytes | None) -> None:
        """`rel` holds `data` until `restore` (None: nothing is there)."""
        dst = self.workspace / rel
        self._real_folders(dst.parent)
        if dst.is_symlink() or dst.exists():
            self._set_aside(dst)
        if data is not None:
            dst.write_bytes(data)
            self.done.append(("wrote", dst, None))

    def _real_folders(self, folder: Path) -> None:
        here = self.workspace
        for part in folder.relative_to(self.workspace).parts:
            here = here / part
            if here.is_symlink() and not self._folder_inside(here):
                self._set_aside(here)  # dangling, a loop, a file, or out of the workspace
            elif here.exists() and not here.is_dir():
                self._set_aside(here)
            if not here.exists():
                here.mkdir()
                self.done.append(("made", here, None))

    def _folder_inside(self, link: Path) -> bool:
        try:
            target = link.resolve(strict=True)
        except (OSError, RuntimeError):  # dangling, or a loop
            return False
        return target.is_dir() and target.is_relative_to(self.inside)

    def _set_aside(self, path: Path) -> None:
        if self.aside is None:
            self.aside = Path(tempfile.mkdtemp(prefix=".grading-", dir=self.workspace.parent))
        spot = self.aside / str(len(self.done))
        os.rename(path, spot)
        self.done.append(("moved", path, spot))

    def restore(self) -> None:
        """Undo every change in reverse order. What ran meanwhile (the code under test) could
        reshape the workspace, e.g. turn a folder on the way into a symlink out of it: a
        change whose path no longer runs through real folders of the workspace is not undone
        there (nothing is unlinked or moved through a symlink); the agent's file waiting
        aside is then dropped with the rest of the aside folder, and the runner puts the
        workspace back as the agent left it (`trials.runner`, from its snapshot)."""
        for kind, path, spot in reversed(self.done):
            if not self._real_path_to(path.parent):
                self.skipped.append(path)
                continue
            if kind == "wrote":
                path.unlink(missing_ok=True)
            elif kind == "made":
                shutil.rmtree(path, ignore_errors=True)
            else:
                assert spot is not None
                os.rename(spot, path)
        self.done = []
        if self.aside is not None:
            shutil.rmtree(self.aside, ignore_errors=True)
            self.aside = None


# pytest reads these from each test file's folder and every folder above it. An agent that adds
# or edits one can turn every failure into a pass (a conftest.py hook that rewrites reports, an
# ini file's `addopts = -p` naming a plugin of its own), so the hidden tests run with each as
# the workspace had it before the agent's first attempt (absent, if it had none), unless the
# task's reference patch changes it (the tests were validated against that version). The
# agent's own come back afterwards: its diff and its next attempt see its work.
# (pytest 9 reads pytest.toml and .pytest.toml first)
PLUMBING = (
    "conftest.py",
    "pytest.toml",
    ".pytest.toml",
    "pytest.ini",
    ".pytest.ini",
    "pyproject.toml",
    "tox.ini",
    "setup.cfg",
)


def plumbing_paths(test_files: list[str]) -> list[str]:
    """The workspace paths pytest would read plumbing from for `test_files`."""
    folders = {""}
    for rel in test_files:
        parts = PurePosixPath(rel).parent.parts
        folders.update("/".join(parts[:n]) for n in range(1, len(parts) + 1))
    return sorted(f"{d}/{name}" if d else name for d in folders for name in PLUMBING)


@dataclass(frozen=True)
class Plumbing:
    """pytest's plumbing files (`PLUMBING`) as a workspace had them before the agent ran: the
    content by path, None where there was none. Kept by the harness, out of the agent's reach."""

    files: dict[str, bytes | None]

    @classmethod
    def snapshot(cls, workspace: Path, spec: TestsSpec, reference_patch: str | None) -> Plumbing:
        keep = patch_paths(reference_patch) if reference_patch else frozenset()
        ids = (*spec.fail_to_pass, *spec.pass_to_pass, *spec.flaky)
        test_files = list(dict.fromkeys(test_file(t) for t in ids))
        files: dict[str, bytes | None] = {}
        for rel in plumbing_paths(test_files):
            entry = _entry(workspace / rel)
            # (the hidden files are placed anyway; a symlink or folder by the name is the repo's)
            if rel not in spec.files and rel not in keep and not isinstance(entry, _Other):
                files[rel] = entry
        return cls(files)


def patch_paths(patch: str) -> frozenset[str]:
    """The paths a git diff changes: both sides of each file's header (which also names a new
    empty file, a deleted one and a pure rename, that have no ---/+++ lines), and the
    ---/+++ and rename lines."""
    paths = set()
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            paths.update(_header_paths(line[len("diff --git ") :]))
        for prefix, side in (
            ("--- ", "a/"),
            ("+++ ", "b/"),
            ("rename from ", ""),
            ("rename to ", ""),
        ):
            if line.startswith(prefix):
                name = _unquote(line[len(prefix) :].split("\t", 1)[0])
                if name.startswith(side):
                    paths.add(name[len(side) :])
    paths.discard("dev/null")
    return frozenset(paths)


def _header_paths(rest: str) -> list[str]:
    """The two paths of `diff --git a/X b/Y` (after the prefix): quoted ones are read as
    quoted; unquoted, an unchanged name (`a/X b/X`) is split in the middle, and a renamed one
    has its own rename lines."""
    if rest.startswith('"') or rest.endswith('"'):
        names, at = [], 0
        while at < len(rest) and len(names) < 2:
            if rest[at] == " ":
                at += 1
            elif rest[at] == '"':
                end = at + 1
                while end < len(rest) and rest[end] != '"':
                    end += 2 if rest[end] == "\\" else 1
                names.append(_unquote(rest[at : end + 1]))
                at = end + 1
            else:
                end = rest.find(" ", at)
                end = len(rest) if end < 0 else end
                names.append(rest[at:end])
                at = end
        return [n[2:] for n in names if n[:2] in ("a/", "b/")]
    n = (len(rest) - 5) // 2
    if rest[:2] == "a/" and rest[2 + n : 5 + n] == " b/" and rest[2 : 2 + n] == rest[5 + n :]:
        return [rest[2 : 2 + n]]
    return []


_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def _unquote(name: str) -> str:
    """A path as git prints one with unusual characters: in double quotes, with C escapes and
    octal bytes (raw UTF-8 where core.quotePath is off)."""
    if not (len(name) >= 2 and name[0] == name[-1] == '"'):
        return name
    body, out, at = name[1:-1], bytearray(), 0
    while at < len(body):
        char = body[at]
        if char != "\\" or at + 1 == len(body):
            out += char.encode()
            at += 1
        elif body[at + 1] in "01234567":
            digits = body[at + 1 : at + 4]
            out.append(int(digits, 8) & 0xFF)
            at += 1 + len(digits)
        else:
            out.append(_ESCAPES.get(body[at + 1], ord(body[at + 1])))
            at += 2
    return out.decode("utf-8", "replace")


def _place_hidden(spec: TestsSpec, workspace: Path, hidden_dir: Path) -> SwappedFiles:
    """The hidden test files put in the workspace (`restore` takes them out again). If a
    copy fails half-way, what was placed is taken out before the error goes on."""
    placed = SwappedFiles(workspace)
    try:
        for rel in spec.files:
            placed.put(rel, (hidden_dir / rel).read_bytes())
    except BaseException:
        placed.restore()
        raise
    return placed


def _changed(plumbing: Plumbing | None, workspace: Path) -> list[str]:
    """The plumbing paths whose content in the workspace is not what `plumbing` recorded."""
    before = plumbing.files if plumbing is not None else {}
    return [rel for rel, data in before.items() if _entry(workspace / rel) != data]


class _Other:
    """A symlink or a folder where a plumbing file could be: equal to no content."""


def _entry(path: Path) -> bytes | None | _Other:
    """A plumbing path's content: its bytes when a regular file, None when absent."""
    if path.is_symlink() or (path.exists() and not path.is_file()):
        return _Other()
    return path.read_bytes() if path.exists() else None


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


# `python -m pytest` as it starts, but for two things. `-m` puts the working folder (the
# workspace) first on sys.path before pytest is imported, so a pytest.py the agent left there
# ran instead of pytest and wrote the report it liked: here pytest and its built-in plugins
# (with the standard modules they import) come from the interpreter's own path first, then the
# workspace goes first on sys.path, as `-m` has it, for the code under test and its tests. And
# pytest's own exit code is printed after a mark (random per run, read from stdin first): a
# process the code under test ended with another code (`os._exit(3)` in an atexit hook, which
# alone reads as pytest's internal error, a grader fault) is told apart.
# Nothing of the workspace (the working folder `here`) on sys.path: one rule for the test run's
# launcher and the probe, which must not see a module there that the launcher would not.
_OFF_WORKSPACE = (
    "sys.path[:] = [p for p in sys.path[1:]"
    " if not (os.path.realpath(p or '.') + os.sep).startswith(here)]"
)
PYTEST_MAIN = r"""
def _bench_pytest():
    import importlib, os, sys
    mark = sys.stdin.readline().strip()
    here = os.path.realpath(os.getcwd()) + os.sep
    path = sys.path[1:]
    # (nothing of the workspace while pytest starts: not the working folder, which -c put
    # first, nor a PYTHONPATH entry inside it, such as a task's `env: {PYTHONPATH: src}`)
    @OFF_WORKSPACE@
    import pytest, _pytest.config
    plugins = ["_pytest." + name for name in getattr(_pytest.config, "default_plugins", ())]
    # (and what pytest imports later by itself, read off a run: its debugger, a TOML reader)
    for name in [*plugins, "faulthandler", "pdb", "tomllib"]:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    sys.path[:] = [os.getcwd(), *path]
    code = int(_pytest.config.main()) & 0xFF  # (as the process ends with it)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os.write(1, ("\n%s:%d\n" % (mark, code)).encode())
    return code


raise SystemExit(_bench_pytest())
""".replace("@OFF_WORKSPACE@", _OFF_WORKSPACE)
# What tells a missing pytest from a test run the workspace's code ended before pytest wrote
# its report: the same interpreter, asked on its own, with nothing of the workspace on its path
# (as PYTEST_MAIN starts pytest: neither the working folder nor a PYTHONPATH entry inside it,
# where a pytest.py that raises ImportError would make the agent's failure a missing pytest).
PYTEST_PROBE = (
    f"import os, sys\nhere = os.path.realpath(os.getcwd()) + os.sep\n{_OFF_WORKSPACE}\n"
    "import pytest\n"
)


def runner_argv(spec: TestsSpec, files: list[str], junit: Path) -> list[str]:
    if spec.runner == "command":
        return [a.replace("{junit}", str(junit)) for a in spec.command]
    return [
        spec.python,
        "-c",
        PYTEST_MAIN,
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
    plumbing: Plumbing | None = None,
) -> TestsRun:
    """Copy the hidden files in, run the tests, read the report, restore the workspace.

    With `plumbing`, where the agent changed any of pytest's plumbing files (`PLUMBING`), the
    tests run twice: as the agent left the workspace, and with those files as they were before
    it. A test passes only if it passed both times: a conftest.py hook that forges passes
    fails the second run, and one that breaks the test run (the agent's failure, never
    unscored) fails the first."""
    changed = changed_hidden(hidden_dir, hidden_hashes)
    if changed:
        return TestsRun(INCONCLUSIVE, f"grader fault: hidden test files changed: {changed}")
    ids = list(dict.fromkeys((*spec.fail_to_pass, *spec.pass_to_pass, *spec.flaky)))
    # (before the run and after it: a conftest.py can put the original back as pytest exits)
    touched = _changed(plumbing, workspace)
    as_left = _run_once(spec, ids, workspace, hidden_dir, home, out_dir, cancelled, None)
    touched += [rel for rel in _changed(plumbing, workspace) if rel not in touched]
    if not touched or (cancelled is not None and cancelled()):
        return as_left
    assert plumbing is not None
    out_dir = out_dir / "plumbing-as-before"
    as_before = _run_once(spec, ids, workspace, hidden_dir, home, out_dir, cancelled, plumbing)
    return _both(as_left, as_before, touched)


def _run_once(
    spec: TestsSpec,
    ids: list[str],
    workspace: Path,
    hidden_dir: Path,
    home: Path,
    out_dir: Path,
    cancelled: Callable[[], bool] | None,
    plumbing: Plumbing | None,
) -> TestsRun:
    """One run of the tests: the hidden files placed (and with `plumbing`, pytest's plumbing
    files as it has them), the report read, the workspace put back."""
    out_dir.mkdir(parents=True, exist_ok=True)
    junit = out_dir / "junit.xml"
    junit.unlink(missing_ok=True)
    placed = _place_hidden(spec, workspace, hidden_dir)
    try:
        files = list(dict.fromkeys(test_file(t) for t in ids))
        present = [f for f in files if (workspace / f).is_file()]
        for rel in _changed(plumbing, workspace):
            assert plumbing is not None
            placed.put(rel, plumbing.files[rel])
        # grader_env turns plugin autoload off; `plugins: true` turns it back on
        overrides = [("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)] if spec.plugins else []
        overrides += list(spec.env)
        env = grader_env(home, overrides)
        result = _run_runner(spec, present, junit, workspace, env, cancelled) if present else None
        report = junit if junit.is_file() else None
        missing = result is not None and report is None and _no_pytest(spec, workspace, env)
    finally:
        placed.restore()
    return grade(spec, ids, result, report, present, pytest_missing=missing)


def _run_runner(
    spec: TestsSpec,
    files: list[str],
    junit: Path,
    workspace: Path,
    env: dict[str, str],
    cancelled: Callable[[], bool] | None = None,
) -> CommandResult:
    """The runner's run, its result's `pytest_exit` (pytest's own code, from its mark, when
    the process ended with it) set and the mark taken out of its output."""
    argv = runner_argv(spec, files, junit)
    if spec.runner != "pytest":
        return run_command(argv, workspace, env, spec.timeout_seconds, cancelled=cancelled)
    mark = secrets.token_hex(16)
    result = run_command(
        argv, workspace, env, spec.timeout_seconds, stdin_text=mark + "\n", cancelled=cancelled
    )
    found = take_mark(result.output, mark)
    if found is None:
        return result
    output, code = found
    own = code if code is not None and code == result.exit_code else None
    return dataclasses.replace(result, output=output, pytest_exit=own)


def _no_pytest(spec: TestsSpec, workspace: Path, env: dict[str, str]) -> bool:
    """Whether the tests' interpreter cannot import pytest at all (a grader fault, where a run
    without a report is otherwise the workspace's doing): asked by a run of its own, not read
    from the test run's output, which the code under test can write."""
    if spec.runner != "pytest":
        return False
    probe = run_command([spec.python, "-c", PYTEST_PROBE], workspace, env, spec.timeout_seconds)
    return probe.exit_code != 0 and not probe.timed_out


def _both(as_left: TestsRun, as_before: TestsRun, touched: list[str]) -> TestsRun:
    """The verdict of the two runs of `run_tests`: per test, the outcome of the run where it
    did not pass. A run that is inconclusive only with the agent's files (the other ran) is
    the agent's doing: every test that passed without them fails with them."""
    files = ", ".join(touched)
    merged = {
        "exit_code": as_before.exit_code,
        "timed_out": as_left.timed_out or as_before.timed_out,
        "duration_seconds": round(as_left.duration_seconds + as_before.duration_seconds, 4),
        "output": f"{as_left.output}\n--- again, with {files} as before the agent ---\n"
        f"{as_before.output}",
        "command": as_before.command,
        "reverted": touched,
    }
    if as_before.status == INCONCLUSIVE:
        return TestsRun(INCONCLUSIVE, as_before.reason, as_before.tests, **merged)
    if as_left.status == INCONCLUSIVE:
        why = f"with the agent's {files}, the tests cannot run ({as_left.reason})"
        tests = [
            {**t, "outcome": T_ERROR, "message": why} if t["outcome"] == T_PASSED else t
            for t in as_before.tests
        ]
    else:
        left = {t["test_id"]: t for t in as_left.tests}
        tests = [
            left.get(t["test_id"], t) if t["outcome"] == T_PASSED else t for t in as_before.tests
        ]
        failed_only_as_left = any(
            t["outcome"] == T_PASSED and left.get(t["test_id"], t)["outcome"] != T_PASSED
            for t in as_before.tests
        )
        why = f"with the agent's {files}: {as_left.reason}" if failed_only_as_left else ""
    note = (
        f" (run twice, the second time with {files} as before the agent: a test passes only if "
        "it passed both times)"
    )
    run = _verdict(tests, merged, note)
    if run.status == FAILED and why:
        run.reason += f": {why}"
    return run


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
    placed = _place_hidden(spec, workspace, hidden_dir)
    try:
        files = run_files if run_files is not None else list(spec.files)
        result = _run_runner(spec, files, junit, workspace, grader_env(home, spec.env))
    finally:
        placed.restore()
    return result, parse_junit(junit) if junit.is_file() else {}


def grade(
    spec: TestsSpec,
    ids: list[str],
    result: CommandResult | None,
    junit: Path | None,
    present: list[str],
    *,
    pytest_missing: bool = False,
) -> TestsRun:
    """The verdict of one run: `pytest_missing` (`_no_pytest`), asked only when the run wrote
    no report, makes it the grader's fault."""
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
        fault = _grader_fault(spec, result, junit, pytest_missing)
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
    return _verdict(tests, base, f" ({no_report_reason})" if no_report_reason else "")


def _verdict(tests: list[dict[str, Any]], run: dict[str, Any], after: str = "") -> TestsRun:
    """Passed when every graded (non-flaky) test passed, else failed naming the first five
    that did not; `after` ends the reason (why, or how the tests were run)."""
    graded = [t for t in tests if t["list"] != FLAKY]
    bad = [t for t in graded if t["outcome"] != T_PASSED]
    if not bad:
        return TestsRun(PASSED, f"all {len(graded)} graded tests passed{after}", tests, **run)
    shown = ", ".join(f"{t['test_id']} ({t['list']}: {t['outcome']})" for t in bad[:5])
    more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
    reason = f"{len(bad)}/{len(graded)} graded tests did not pass: {shown}{more}{after}"
    return TestsRun(FAILED, reason, tests, **run)


def _grader_fault(
    spec: TestsSpec, result: CommandResult, junit: Path | None, pytest_missing: bool = False
) -> str | None:
    """The runner itself failed, not the code under test; None when the run is gradable."""
    if result.cancelled:
        return "cancelled while the tests ran"
    if result.timed_out:
        return f"the tests timed out after {spec.timeout_seconds:g} s"
    if result.exit_code is None:
        return result.output.strip().splitlines()[0] if result.output.strip() else "not started"
    if junit is not None:
        # (pytest's own exit 3, by its mark: the code under test can end the process with 3
        # after the report, e.g. from an atexit hook, to have its failures unscored)
        if spec.runner == "pytest" and result.exit_code == 3 and result.pytest_exit == 3:
            return "pytest internal error (exit 3)"
        return None
    if pytest_missing:
        return f"the interpreter {result.argv[0]} has no pytest installed"
    if spec.runner == "pytest":
        # pytest writes its report whenever its session ends (an internal error too): a run
        # that ended without one was ended by what it ran, the workspace's code (os._exit, a
        # signal, a crash) or its configuration, once the grader was validated: failed
        return None
    return f"the runner wrote no JUnit report (exit {result.exit_code})"


# pytest exit codes without a report that the workspace causes once the grader itself was
# validated (`bench validate --reference` ran the same command): 1 a conftest failed to import,
# 2 interrupted (collection errors), 4 usage error from the workspace's own configuration
# (pytest.ini/setup.cfg/pyproject addopts, a conftest), 5 nothing collected. Any other exit
# without a report is the workspace's too (`_grader_fault`); exit 3 with a report (pytest's
# internal error) stays a grader fault.
WORKSPACE_EXIT_CODES = (1, 2, 4, 5)


def _no_report_reason(result: CommandResult) -> str | None:
    """Why the workspace's code kept pytest from writing a report, when pytest says so."""
    out = result.output
    if "while loading conftest" in out or ("conftest" in out and "Error" in out):
        return "a conftest.py in the workspace cannot be imported"
    if result.exit_code in WORKSPACE_EXIT_CODES:
        return f"pytest stopped with exit {result.exit_code} before writing a report"
    if result.exit_code is not None and (result.exit_code < 0 or result.exit_code > 128):
        # (-N from a plain process, 128 + N through the sandbox's bubblewrap)
        number = -result.exit_code if result.exit_code < 0 else result.exit_code - 128
        return (
            f"the test process was killed by signal {number} (exit {result.exit_code}) before "
            "pytest wrote a report"
        )
    if result.exit_code is not None:
        return (
            f"the test process ended with exit {result.exit_code} before pytest wrote a report "
            "(the code under test ended it, e.g. os._exit)"
        )
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
