"""`bench tasks from-commit REPO SHA --suite S`: draft a task from a past commit.

- `base_ref` = the commit's parent (full sha, so the draft never moves);
- `references/<id>.patch` = the commit's change to every file that is not a test file;
- test files = files under a `tests/` (or `test/`) folder, or named `test_*.py` / `*_test.py`.
  Their content at the commit is copied to `graders/<id>/files/<path>`, together with a small
  stdlib runner `graders/<id>/run_tests.py`;
- one check `commit-tests` runs exactly the test modules the commit touched: the runner copies
  the commit's test files into the workspace, runs them (unittest in-process when every touched
  test module uses unittest, else `python -m pytest -q -p no:cacheprovider`), then restores the
  workspace as it was. Exit 0 = passed, 1 = a test failed or could not import what it tests,
  2 = grader fault (no test ran, a grader file missing);
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
import subprocess
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import yaml

from bench_pipeline.formats.errors import BenchInputError
from bench_pipeline.formats.git import GitError, git, is_git_repo, is_url, local_repo, rev_parse
from bench_pipeline.formats.model import ID_PATTERN, valid_id

CHECK_ID = "commit-tests"
RUNNER_NAME = "run_tests.py"

RUNNER = r'''"""Run the tests a commit touched against a workspace (written by `bench tasks from-commit`).

usage: run_tests.py FILES_DIR WORKSPACE [--runner unittest|pytest] TEST_FILE...

Copies each FILES_DIR/TEST_FILE over WORKSPACE/TEST_FILE (the commit's version of the test),
runs the test modules among them, then puts the workspace back as it was.
Exit 0 = every test passed; 1 = a test failed or could not import what it tests;
2 = grader fault (bad usage, a grader file missing, no test ran).
"""

import os
import re
import shutil
import subprocess
import sys
import unittest

sys.dont_write_bytecode = True
TEST_MODULE = re.compile(r"(^|/)(test_[^/]*|[^/]*_test)\.py$")


def run_unittest(workspace, modules):
    os.chdir(workspace)
    sys.path.insert(0, workspace)
    names = [m[:-3].replace("/", ".") for m in modules]
    suite = unittest.defaultTestLoader.loadTestsFromNames(names)
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2).run(suite)
    if result.testsRun == 0:
        print("no test ran")
        return 2
    return 0 if result.wasSuccessful() else 1


def run_pytest(workspace, modules):
    code = subprocess.call(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *modules], cwd=workspace
    )
    # 2 = interrupted by collection errors (the tested code is missing): the behaviour is absent
    return {0: 0, 1: 1, 2: 1}.get(code, 2)


def main(argv):
    args = list(argv)
    runner = "unittest"
    if "--runner" in args:
        i = args.index("--runner")
        runner = args[i + 1] if i + 1 < len(args) else ""
        del args[i : i + 2]
    if len(args) < 3 or runner not in ("unittest", "pytest"):
        print(__doc__)
        return 2
    files_dir, workspace, files = args[0], os.path.abspath(args[1]), args[2:]
    saved, made = {}, []
    try:
        for rel in files:
            src = os.path.join(files_dir, rel)
            dst = os.path.join(workspace, rel)
            if not os.path.isfile(src):
                print(f"grader file missing: {src}")
                return 2
            if dst not in saved:
                saved[dst] = None
                if os.path.isfile(dst):
                    with open(dst, "rb") as fh:
                        saved[dst] = fh.read()
            parent = os.path.dirname(dst)
            missing = []
            while not os.path.isdir(parent):
                missing.append(parent)
                parent = os.path.dirname(parent)
            made.extend(reversed(missing))
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(src, dst)
        modules = [f for f in files if TEST_MODULE.search(f)]
        if not modules:
            print("no test module among the files")
            return 2
        if runner == "pytest":
            return run_pytest(workspace, modules)
        return run_unittest(workspace, modules)
    finally:
        for dst, data in saved.items():
            if data is None:
                if os.path.exists(dst):
                    os.remove(dst)
            else:
                with open(dst, "wb") as fh:
                    fh.write(data)
        for d in reversed(made):
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
'''


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


def pick_runner(test_sources: dict[str, str]) -> str:
    """unittest when every touched test module uses it (no pytest needed), else pytest."""
    modules = [src for path, src in test_sources.items() if is_test_module(path)]
    if modules and all(re.search(r"^\s*(import unittest|from unittest)", s, re.M) for s in modules):
        return "unittest"
    return "pytest"


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
    files: list[str],
    runner: str,
    sha: str,
    repo: str | None,
) -> dict:
    modules = [t for t in tests if is_test_module(t)]
    doc: dict = {"id": task_id, "title": title}
    if repo is not None:
        doc["repo"] = repo
    doc["base_ref"] = base_sha
    doc["prompt"] = prompt
    doc["tags"] = ["from-commit"]
    doc["criteria"] = [f"the tests commit {sha[:12]} added or changed pass: {', '.join(modules)}"]
    doc["checks"] = [
        {
            "id": CHECK_ID,
            "description": f"the tests touched by commit {sha[:12]} pass ({', '.join(modules)})",
            "command": [
                "python",
                f"{{inputs}}/graders/{task_id}/{RUNNER_NAME}",
                f"{{inputs}}/graders/{task_id}/files",
                "{workspace}",
                "--runner",
                runner,
                *tests,
            ],
            "files": files,
            "timeout_seconds": 300,
        }
    ]
    return doc


# --------------------------------------------------------------------------- git


def _show(repo: Path, sha: str, path: str) -> bytes:
    out = subprocess.run(["git", "show", f"{sha}:{path}"], cwd=repo, capture_output=True)
    if out.returncode != 0:
        raise GitError(out.stderr.decode(errors="replace").strip())
    return out.stdout


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
    patch = subprocess.run(
        ["git", "diff", "--binary", "--no-renames", "--full-index", parent, full, "--", *code],
        cwd=path,
        capture_output=True,
    ).stdout.decode("utf-8")
    sources = {t: _show(path, full, t) for t in tests}
    runner = pick_runner({t: s.decode("utf-8", "replace") for t, s in sources.items()})

    notes: list[str] = []
    suite_file = sdir / "suite.yaml"
    task_repo: str | None = None
    if suite_file.exists():
        existing = yaml.safe_load(suite_file.read_text(encoding="utf-8")) or {}
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

    files = [f"graders/{tid}/{RUNNER_NAME}"] + [f"graders/{tid}/files/{t}" for t in tests]
    (graders / "files").mkdir(parents=True)
    (graders / RUNNER_NAME).write_text(RUNNER, encoding="utf-8")
    for t, data in sources.items():
        dest = graders / "files" / t
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
    reference.parent.mkdir(parents=True, exist_ok=True)
    reference.write_text(patch, encoding="utf-8")
    doc = task_document(
        tid, subject, parent, draft_prompt(message, full), tests, files, runner, full, task_repo
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
    return Draft(tid, suite, task_file, reference, tests, runner, parent, notes)
