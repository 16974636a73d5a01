"""The task keys for grading with a repository's own tests and preparing checkouts: `tests`,
`prepare`, `findings`, and a check's `exit_codes` and `env`.

Parsed here (not in `loader`) so that the loader only wires them in; every problem is one
`BenchInputError` naming the file and the dotted key, like every other key.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from bench_pipeline.formats.git import git, local_repo, rev_parse
from bench_pipeline.formats.model import FINDINGS, TEST_RUNNERS, TestsSpec

TESTS_KEYS = {
    "files",
    "dir",
    "from_ref",
    "fail_to_pass",
    "pass_to_pass",
    "flaky",
    "runner",
    "command",
    "python",
    "plugins",
    "env",
    "timeout_seconds",
}
EXIT_CODE_KEYS = {"passed", "failed"}
MAX_TESTS_TIMEOUT = 3600


def parse_prepare(f: Any, key: str = "prepare") -> tuple[tuple[str, ...], ...]:
    """A list of argument arrays (no shell), run in order in each fresh checkout."""
    out = []
    for i, cmd in enumerate(f.items(key)):
        if not isinstance(cmd, list) or not cmd:
            raise f.fail(f"{key}[{i}]", "must be a non-empty argument array such as [make, deps]")
        for j, arg in enumerate(cmd):
            if isinstance(arg, bool) or not isinstance(arg, str | int | float):
                raise f.fail(f"{key}[{i}][{j}]", "expected text")
        out.append(tuple(str(a) for a in cmd))
    return tuple(out)


def parse_findings(f: Any) -> str | None:
    return f.choice("findings", FINDINGS)


def parse_env(f: Any, key: str = "env") -> tuple[tuple[str, str | None], ...]:
    """`{NAME: value}`; a null value unsets a variable the harness would set."""
    raw = f.mapping(key)
    out = []
    for name, value in raw.items():
        if not isinstance(name, str) or not name.replace("_", "").isalnum() or name[0].isdigit():
            raise f.fail(f"{key}.{name}", "is not a valid environment variable name")
        if isinstance(value, bool) or not (value is None or isinstance(value, str | int | float)):
            raise f.fail(f"{key}.{name}", "expected text (or null to unset it)")
        out.append((name, None if value is None else str(value)))
    return tuple(sorted(out))


def parse_exit_codes(f: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """`exit_codes: {passed: [0], failed: [1, 4]}`; defaults 0 passed, 1 failed."""
    section = f.section("exit_codes", EXIT_CODE_KEYS, "a mapping {passed: [0], failed: [1]}")
    if section is None:
        return (0,), (1,)
    codes: dict[str, tuple[int, ...]] = {}
    for name, default in (("passed", (0,)), ("failed", (1,))):
        raw = section.get(name)
        if raw is None:
            codes[name] = default
            continue
        if not isinstance(raw, list) or not raw:
            raise section.fail(name, "expected a non-empty list of exit codes, e.g. [0]")
        for i, code in enumerate(raw):
            if isinstance(code, bool) or not isinstance(code, int) or not 0 <= code <= 255:
                raise section.fail(f"{name}[{i}]", "expected an exit code between 0 and 255")
        codes[name] = tuple(raw)
    both = set(codes["passed"]) & set(codes["failed"])
    if both:
        raise section.fail(
            "failed", f"exit code(s) {sorted(both)} cannot be both passed and failed"
        )
    return codes["passed"], codes["failed"]


def _relative(f: Any, key: str, rel: str) -> str:
    p = PurePosixPath(rel)
    if p.is_absolute() or ".." in p.parts or not p.parts:
        raise f.fail(key, f"'{rel}' must be a relative path inside the workspace, without '..'")
    return str(p)


def parse_tests(
    factory: Any, suite_dir: Any, f: Any, repo: str | None, display: str
) -> TestsSpec | None:
    """The task's `tests:` criterion, or None when absent."""
    t = f.section("tests", TESTS_KEYS, "a mapping {files, fail_to_pass, pass_to_pass, runner}")
    if t is None:
        return None
    files = tuple(_relative(t, f"files[{i}]", r) for i, r in enumerate(t.str_list("files")))
    source_dir = t.str("dir")
    from_ref = t.str("from_ref")
    from_sha = None
    if source_dir is not None and from_ref is not None:
        raise t.fail("from_ref", "give `dir` (test files in the suite) or `from_ref`, not both")
    if files and source_dir is None and from_ref is None:
        raise t.fail("files", "say where the files come from: `dir` (suite folder) or `from_ref`")
    if source_dir is not None:
        source_dir = str(PurePosixPath(source_dir))
        for i, rel in enumerate(files):
            factory.inside(suite_dir, f"{source_dir}/{rel}", display, t.key(f"files[{i}]"))
    if from_ref is not None:
        if repo is None:
            raise t.fail("from_ref", "needs the task's repo")
        from_sha = rev_parse(str(local_repo(repo)), from_ref)
        if from_sha is None:
            raise t.fail("from_ref", f"'{from_ref}' is not a commit of {repo}")
        for i, rel in enumerate(files):
            kind = git("cat-file", "-t", f"{from_sha}:{rel}", cwd=local_repo(repo), check=False)
            if kind.strip() != "blob":
                raise t.fail(f"files[{i}]", f"'{rel}' is not a file at {from_ref}")
    runner = t.choice("runner", TEST_RUNNERS, "pytest") or "pytest"
    command = t.argv("command")
    if runner == "command" and not command:
        raise t.fail("command", "the command runner needs a command that writes {junit}")
    if runner == "command" and not any("{junit}" in a for a in command):
        raise t.fail("command", "must name {junit}: the JUnit XML file the runner writes")
    if runner == "pytest" and command:
        raise t.fail("command", "only for runner: command (the pytest runner builds its own)")
    f2p = t.str_list("fail_to_pass")
    p2p = t.str_list("pass_to_pass")
    if not f2p and not p2p:
        raise t.fail("fail_to_pass", "list the test ids to grade (fail_to_pass, pass_to_pass)")
    flaky = t.str_list("flaky")
    for i, tid in enumerate(flaky):
        if tid not in f2p and tid not in p2p:
            raise t.fail(f"flaky[{i}]", f"'{tid}' is in neither fail_to_pass nor pass_to_pass")
    if set(f2p) & set(p2p):
        dup = sorted(set(f2p) & set(p2p))[0]
        raise t.fail("pass_to_pass", f"'{dup}' is also in fail_to_pass")
    return TestsSpec(
        files=files,
        source_dir=source_dir,
        from_ref=from_ref,
        from_sha=from_sha,
        fail_to_pass=f2p,
        pass_to_pass=p2p,
        flaky=flaky,
        runner=runner,
        command=command,
        python=t.str("python", "python") or "python",
        plugins=t.bool("plugins"),
        env=parse_env(t),
        timeout_seconds=t.number("timeout_seconds", 300.0, 1, MAX_TESTS_TIMEOUT) or 300.0,
    )
