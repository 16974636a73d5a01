"""`bench tasks from-commit REPO SHA --suite S`: draft a task from a past commit.

- `base_ref` = the commit's parent (full sha, so the draft never moves);
- `references/<id>.patch` = the commit's change to every file that is not a test file;
- test files = files under a `tests/` (or `test/`) folder, or named `test_*.py` / `*_test.py`;
- a `tests` criterion (graded with the repository's own tests, SWE-bench style): the test
  files the commit added or changed, taken `from_ref` the commit itself (hidden from the agent,
  copied in only to grade), and the test ids measured by running them with pytest (JUnit XML)
  twice in fresh checkouts - on the parent, and on the parent with the reference patch:
  FAIL_TO_PASS = the tests that do not pass before and pass after; PASS_TO_PASS = the tests of
  those files that pass on both. Tests that fail after the change too are left out (named in
  the notes). The suite's `prepare` commands run first in each checkout, as in a trial;
- the prompt is the commit message, marked as a draft for the user to rewrite (describe the
  problem, not the fix), and the title its subject.

The suite is created (`suite.yaml` with `repo` and `agent`) when it does not exist yet; when it
exists and points at another repository, the task carries its own `repo`. Nothing is overwritten.
Check the draft with `bench validate --reference`: it must fail on its base and pass with its
reference.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import yaml

from bench_pipeline.formats.errors import BenchInputError
from bench_pipeline.formats.git import (
    GitError,
    git,
    is_git_repo,
    is_url,
    local_repo,
    rev_parse,
    run_git,
)
from bench_pipeline.formats.loader import read_yaml
from bench_pipeline.formats.model import ID_PATTERN, valid_id


@dataclass
class Draft:
    task_id: str
    suite: str
    task_file: Path
    reference: Path
    tests: list[str]
    runner: str
    base_sha: str
    notes: list[str]
    fail_to_pass: list[str] = field(default_factory=list)
    pass_to_pass: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- pure helpers


def is_test_file(path: str) -> bool:
    p = PurePosixPath(path)
    if any(part in ("tests", "test") for part in p.parts[:-1]):
        return True
    return bool(re.match(r"^(test_.*|.*_test)\.py$", p.name))


def is_test_module(path: str) -> bool:
    return bool(re.search(r"(^|/)(test_[^/]*|[^/]*_test)\.py$", path))


def slug(subject: str, max_len: int = 48) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", subject.lower()).strip("-")
    s = s[:max_len].rstrip("-")
    return s


def draft_prompt(message: str, sha: str) -> str:
    body = message.strip()
    return (
        f"{body}\n\n"
        f"(DRAFT from commit {sha[:12]}: rewrite this as the problem to solve, not the fix; "
        "say which behaviour must change and what must keep working.)\n"
    )


def task_document(
    task_id: str,
    title: str,
    base_sha: str,
    prompt: str,
    tests: list[str],
    sha: str,
    repo: str | None,
    fail_to_pass: list[str],
    pass_to_pass: list[str],
) -> dict:
    modules = [t for t in tests if is_test_module(t)]
    doc: dict = {"id": task_id, "title": title}
    if repo is not None:
        doc["repo"] = repo
    doc["base_ref"] = base_sha
    doc["prompt"] = prompt
    doc["tags"] = ["from-commit"]
    doc["criteria"] = [f"the tests commit {sha[:12]} added or changed pass: {', '.join(modules)}"]
    doc["tests"] = {
        "from_ref": sha,
        "files": tests,
        "runner": "pytest",
        "fail_to_pass": fail_to_pass,
        "pass_to_pass": pass_to_pass,
        "timeout_seconds": 300,
    }
    return doc


def measure_tests(
    repo: str, parent: str, patch: str, sha: str, tests: list[str], prepare: tuple, tmp: Path
) -> tuple[list[str], list[str], list[str]]:
    """(fail_to_pass, pass_to_pass, failing after) by running the commit's test files on the
    parent and on the parent with the reference patch, each in a fresh checkout."""
    from bench_pipeline.formats.model import TestsSpec
    from bench_pipeline.scorers.tests import T_PASSED, materialize, run_whole_files
    from bench_pipeline.trials.prepare import run_prepare
    from bench_pipeline.workspace.repo import WorkspaceError, apply_patch, create_workspace

    spec = TestsSpec(files=tuple(tests), from_ref=sha, from_sha=sha)
    hidden, home = tmp / "hidden", tmp / "home"
    home.mkdir(parents=True)
    materialize(spec, tmp, {}, repo, hidden)
    outcomes: dict[str, dict[str, str]] = {}
    for phase in ("before", "after"):
        workspace = create_workspace(repo, parent, tmp / phase)
        if phase == "after":
            try:
                apply_patch(workspace, patch)
            except WorkspaceError as exc:
                raise BenchInputError(
                    None, "SHA", f"the code change does not apply: {exc}"
                ) from None
        if prepare:
            evidence = tmp / f"prepare-{phase}"
            evidence.mkdir()
            prep = run_prepare(
                prepare, workspace, home, evidence, time.monotonic() + 1800, repo, parent, None
            )
            if not prep.ok:
                raise BenchInputError(None, "prepare", f"on the parent: {prep.error}")
        modules = [t for t in tests if is_test_module(t)]
        result, report = run_whole_files(
            spec, workspace, hidden, home, tmp / f"junit-{phase}", modules
        )
        if not report:
            why = (result.output.strip().splitlines() or ["no output"])[-1] if result else ""
            raise BenchInputError(
                None,
                "SHA",
                f"pytest wrote no report for the commit's tests {phase} the change: {why}",
            )
        outcomes[phase] = {tid: r["outcome"] for tid, r in report.items() if not tid.endswith("::")}
    before, after = outcomes["before"], outcomes["after"]
    f2p = [t for t, o in after.items() if o == T_PASSED and before.get(t) != T_PASSED]
    p2p = [t for t, o in after.items() if o == T_PASSED and before.get(t) == T_PASSED]
    failing = [t for t, o in after.items() if o != T_PASSED]
    return f2p, p2p, failing


# --------------------------------------------------------------------------- git


def code_patch(repo: Path, parent: str, sha: str, files: list[str]) -> str:
    """The commit's change to `files` as the text of a reference patch (a UTF-8 file): a file
    that is not UTF-8 text on either side (a Latin-1 source, a blob git takes for text) goes
    in as a binary hunk (base85), which `git apply` applies byte for byte."""
    argv = ["diff", "--binary", "--no-renames", "--full-index", parent, sha, "--", *files]

    def diff(*config: str) -> bytes:
        try:
            return run_git([*config, *argv], repo)
        except GitError as exc:
            raise BenchInputError(None, "SHA", f"cannot diff commit {sha[:12]}: {exc}") from None

    raw = diff()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    not_text = [f for f in files if not (_utf8(repo, parent, f) and _utf8(repo, sha, f))]
    with tempfile.NamedTemporaryFile("w", suffix=".gitattributes", encoding="utf-8") as attrs:
        # (quoted patterns: a path may hold spaces; `binary` = diff them as binary)
        attrs.writelines(f'"/{_quoted(f)}" binary\n' for f in not_text)
        attrs.flush()
        raw = diff("-c", f"core.attributesFile={attrs.name}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:  # (the repository's own .gitattributes keeps them text)
        raise BenchInputError(
            None,
            "SHA",
            f"commit {sha[:12]} changes files that are not UTF-8 text "
            f"({', '.join(not_text) or 'unknown'}) and git diffs them as text; a reference "
            "patch is a UTF-8 file: write this task's reference by hand",
        ) from None


def _utf8(repo: Path, rev: str, file: str) -> bool:
    """Whether `file` at `rev` is UTF-8 text (True when it does not exist there)."""
    try:
        blob = run_git(["cat-file", "blob", f"{rev}:{file}"], repo)
    except GitError:
        return True
    try:
        blob.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _quoted(path: str) -> str:
    return path.replace("\\", "\\\\").replace('"', '\\"')


def draft_from_commit(
    repo: str,
    sha: str,
    factory: str | Path,
    suite: str,
    task_id: str | None = None,
    agent: str | None = None,
) -> Draft:
    if not valid_id(suite):
        raise BenchInputError(None, "suite", f"'{suite}' is not a valid suite name ({ID_PATTERN})")
    repo_value = repo if is_url(repo) else str(Path(repo).absolute())
    try:
        path = local_repo(repo_value)
    except GitError as exc:
        raise BenchInputError(None, "REPO", f"cannot fetch {repo}: {exc}") from None
    if not is_git_repo(path):
        raise BenchInputError(None, "REPO", f"{repo} is not a git repository")
    full = rev_parse(str(path), sha)
    if full is None:
        raise BenchInputError(None, "SHA", f"'{sha}' is not a commit of {repo}")
    parent = rev_parse(str(path), f"{full}^")
    if parent is None:
        raise BenchInputError(None, "SHA", f"{full[:12]} has no parent: nothing to start from")
    changed = [
        line.split("\t")
        for line in git(
            "diff", "--no-renames", "--name-status", parent, full, cwd=path
        ).splitlines()
        if line.strip()
    ]
    tests = [p for status, p in changed if is_test_file(p) and status != "D"]
    code = [p for _, p in changed if not is_test_file(p)]
    if not code:
        raise BenchInputError(
            None, "SHA", f"commit {full[:12]} changes only tests: no reference change"
        )
    if not any(is_test_module(t) for t in tests):
        raise BenchInputError(
            None,
            "SHA",
            f"commit {full[:12]} adds or changes no test module (test_*.py, *_test.py): "
            "nothing to check; write the task's checks by hand",
        )
    message = git("log", "-1", "--format=%B", full, cwd=path)
    subject = message.splitlines()[0].strip() if message.strip() else f"commit {full[:12]}"
    tid = task_id or slug(subject) or f"commit-{full[:7]}"
    if not valid_id(tid):
        raise BenchInputError(None, "task_id", f"'{tid}' is not a valid task id ({ID_PATTERN})")

    root = Path(factory).absolute()
    sdir = root / "benchmarks" / suite
    task_file = sdir / "tasks" / f"{tid}.yaml"
    reference = sdir / "references" / f"{tid}.patch"
    graders = sdir / "graders" / tid
    for target in (task_file, reference, graders):
        if target.exists():
            raise BenchInputError(str(target), None, "already exists; choose another --id")
    patch = code_patch(path, parent, full, code)
    notes: list[str] = []
    suite_file = sdir / "suite.yaml"
    # measured before anything is written: a commit that cannot be drafted leaves no files
    with tempfile.TemporaryDirectory(prefix="bench-from-commit-") as tmp:
        f2p, p2p, failing = measure_tests(
            str(path), parent, patch, full, tests, _suite_prepare(suite_file), Path(tmp)
        )
    if not f2p:
        raise BenchInputError(
            None,
            "SHA",
            f"no test of commit {full[:12]} fails before the change and passes after it: "
            "nothing for the task to measure",
        )
    if failing:
        notes.append(
            f"{len(failing)} test(s) fail even with the change and are left out: "
            + ", ".join(failing[:5])
        )
    task_repo: str | None = None
    if suite_file.exists():
        existing = read_yaml(suite_file)  # (one line for a suite.yaml it cannot read)
        srepo = existing.get("repo")
        resolved = None
        if isinstance(srepo, str):
            resolved = srepo if is_url(srepo) else str((sdir / srepo).resolve())
        target_repo = repo_value if is_url(repo_value) else str(Path(repo_value).resolve())
        if resolved != target_repo:
            task_repo = (
                repo_value if is_url(repo_value) else os.path.relpath(repo_value, sdir / "tasks")
            )
    else:
        if agent is None:
            names = sorted(p.stem for p in (root / "agents").glob("*.yaml"))
            agent = names[0] if names else "coder"
            notes.append(
                f"new suite {suite} uses agent '{agent}'; change it in suite.yaml if needed"
            )
        repo_ref = repo_value if is_url(repo_value) else os.path.relpath(repo_value, sdir)
        (root / "agents").mkdir(parents=True, exist_ok=True)
        sdir.mkdir(parents=True, exist_ok=True)
        suite_file.write_text(
            "# Created by `bench tasks from-commit`.\n"
            + yaml.safe_dump({"title": suite, "agent": agent, "repo": repo_ref}, sort_keys=False),
            encoding="utf-8",
        )

    reference.parent.mkdir(parents=True, exist_ok=True)
    reference.write_text(patch, encoding="utf-8")
    doc = task_document(
        tid, subject, parent, draft_prompt(message, full), tests, full, task_repo, f2p, p2p
    )
    task_file.parent.mkdir(parents=True, exist_ok=True)
    header = (
        f"# DRAFT from commit {full} of {repo}.\n"
        "# Edit the prompt (the problem, not the fix) and the criteria, then run\n"
        "# `bench validate --reference` (it must fail on base_ref and pass with the reference).\n"
    )
    task_file.write_text(
        header + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100),
        encoding="utf-8",
    )
    return Draft(tid, suite, task_file, reference, tests, "pytest", parent, notes, f2p, p2p)


def _suite_prepare(suite_file: Path) -> tuple[tuple[str, ...], ...]:
    """The existing suite's prepare commands (run in each checkout, as a trial would)."""
    if not suite_file.exists():
        return ()
    data = read_yaml(suite_file)
    commands = [*(data.get("prepare_commands") or []), *(data.get("prepare") or [])]
    return tuple(tuple(str(a) for a in c) for c in commands if isinstance(c, list) and c)
