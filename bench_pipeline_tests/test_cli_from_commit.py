"""`bench tasks from-commit`: a real commit of a repository made here becomes a task draft
that `bench validate --reference` accepts: its unittest tests run with pytest (JUnit XML) to
measure FAIL_TO_PASS."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from bench_pipeline_tests.conftest import run_bench

ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "PATH": "/usr/bin:/bin:/usr/local/bin",
}


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=ENV
    ).stdout.strip()


def make_repo(root: Path) -> tuple[Path, str]:
    repo = root / "calc"
    (repo / "calc").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "calc" / "__init__.py").write_text("")
    (repo / "calc" / "ops.py").write_text("def add(a, b):\n    return a + b\n")
    (repo / "tests" / "__init__.py").write_text("")
    (repo / "tests" / "test_ops.py").write_text(
        "import unittest\n\nfrom calc.ops import add\n\n\n"
        "class AddTest(unittest.TestCase):\n"
        "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"
    )
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "calc with add")
    (repo / "calc" / "ops.py").write_text(
        "def add(a, b):\n    return a + b\n\n\ndef clamp(x, lo, hi):\n"
        "    if lo > hi:\n        raise ValueError('lo > hi')\n    return max(lo, min(x, hi))\n"
    )
    (repo / "tests" / "test_clamp.py").write_text(
        "import unittest\n\nfrom calc.ops import clamp\n\n\n"
        "class ClampTest(unittest.TestCase):\n"
        "    def test_inside(self):\n        self.assertEqual(clamp(5, 0, 10), 5)\n\n"
        "    def test_edges(self):\n        self.assertEqual(clamp(-1, 0, 10), 0)\n"
        "        self.assertEqual(clamp(11, 0, 10), 10)\n\n"
        "    def test_bad_range(self):\n"
        "        with self.assertRaises(ValueError):\n            clamp(1, 5, 0)\n"
    )
    _git(repo, "add", ".")
    _git(
        repo,
        "commit",
        "-q",
        "-m",
        "Add clamp(x, lo, hi)\n\nClamp a value into a range; refuse lo > hi.",
    )
    return repo, _git(repo, "rev-parse", "HEAD")


def test_from_commit_drafts_a_task_that_validates(bench_home, tmp_path):
    repo, sha = make_repo(tmp_path)
    factory = tmp_path / "factory"
    (factory / "agents").mkdir(parents=True)
    (factory / "agents" / "oracle.yaml").write_text("kind: reference\n")
    (factory / "benchmarks").mkdir()

    code, out, err = run_bench(
        "tasks",
        "from-commit",
        str(repo),
        sha[:10],
        "--suite",
        "calc",
        "--factory",
        str(factory),
        home=bench_home,
    )
    assert code == 0, err
    task_file = factory / "benchmarks/calc/tasks/add-clamp-x-lo-hi.yaml"
    assert task_file.is_file(), out
    task = yaml.safe_load(task_file.read_text())
    parent = _git(repo, "rev-parse", f"{sha}^")
    assert task["base_ref"] == parent
    assert task["title"] == "Add clamp(x, lo, hi)"
    assert "refuse lo > hi" in task["prompt"] and "DRAFT" in task["prompt"]
    assert "checks" not in task
    tests = task["tests"]
    assert tests["from_ref"] == sha and tests["files"] == ["tests/test_clamp.py"]
    # measured by running the commit's tests before and after the change: the module cannot
    # import clamp before it, so every test in it goes from failing to passing
    assert sorted(tests["fail_to_pass"]) == [
        "tests/test_clamp.py::ClampTest::test_bad_range",
        "tests/test_clamp.py::ClampTest::test_edges",
        "tests/test_clamp.py::ClampTest::test_inside",
    ]
    assert tests["pass_to_pass"] == []
    patch = (factory / "benchmarks/calc/references/add-clamp-x-lo-hi.patch").read_text()
    assert "calc/ops.py" in patch and "test_clamp" not in patch
    assert not (factory / "benchmarks/calc/graders").exists()  # hidden tests come from the commit
    suite = yaml.safe_load((factory / "benchmarks/calc/suite.yaml").read_text())
    assert suite["agent"] == "oracle"

    code, out, err = run_bench("validate", str(factory), "--reference", home=bench_home)
    assert code == 0, out + err
    assert (
        "ok    calc/add-clamp-x-lo-hi: base [tests=failed] -> reference [tests=passed] "
        "(fail_to_pass 3/3 fixed, pass_to_pass 0/0 kept)" in out
    )
    # the source repository was not touched
    assert _git(repo, "status", "--porcelain") == ""

    # a second draft of the same commit needs another id
    code, _, err = run_bench(
        "tasks",
        "from-commit",
        str(repo),
        sha,
        "--suite",
        "calc",
        "--factory",
        str(factory),
        home=bench_home,
    )
    assert code == 2 and "already exists" in err


def test_from_commit_refuses_a_commit_without_tests(bench_home, tmp_path):
    repo, _ = make_repo(tmp_path)
    (repo / "README.md").write_text("calc\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "docs")
    factory = tmp_path / "factory"
    code, _, err = run_bench(
        "tasks",
        "from-commit",
        str(repo),
        "HEAD",
        "--suite",
        "calc",
        "--factory",
        str(factory),
        home=bench_home,
    )
    assert code == 2 and err.count("\n") == 1 and "no test module" in err


def test_from_commit_into_a_suite_whose_file_is_broken_is_one_line_and_writes_nothing(
    bench_home, tmp_path
):
    # (it read an existing suite.yaml with no checks: a traceback for each of these)
    repo, sha = make_repo(tmp_path)
    factory = tmp_path / "factory"
    suite_file = factory / "benchmarks" / "calc" / "suite.yaml"
    suite_file.parent.mkdir(parents=True)
    for content, expected in (
        (b"title: [oops\n", "malformed YAML at line 2, column 1"),
        (b"- a list\n", "expected a mapping of keys, got a list"),
        (b"title: caf\xe9\n", "not UTF-8 (byte 0xe9 at offset 10); save it as UTF-8"),
    ):
        suite_file.write_bytes(content)
        code, _, err = run_bench(
            "tasks", "from-commit", str(repo), sha, "--suite", "calc", "--factory", str(factory),
            home=bench_home,
        )  # fmt: skip
        assert code == 2 and err.startswith(f"error: {suite_file}: {expected}"), err
        assert err.count("\n") == 1, err
        assert sorted(p.name for p in factory.rglob("*")) == ["benchmarks", "calc", "suite.yaml"]
        assert suite_file.read_bytes() == content


def test_from_commit_of_a_file_that_is_not_utf8_applies_it_byte_for_byte(bench_home, tmp_path):
    # A Latin-1 source (a real repository's old module, say): its diff is not UTF-8, and the
    # draft was a UnicodeDecodeError traceback. It goes into the reference as a binary hunk.
    repo, _ = make_repo(tmp_path)
    legacy = repo / "calc" / "legacy.py"
    legacy.write_bytes(b"# -*- coding: latin-1 -*-\nNAME = 'caf\xe9'\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "legacy module")
    legacy.write_bytes(b"# -*- coding: latin-1 -*-\nNAME = 'caf\xe9'\nSIZE = len(NAME)\n")
    (repo / "tests" / "test_legacy.py").write_text(
        "import unittest\n\nfrom calc.legacy import SIZE\n\n\n"
        "class LegacyTest(unittest.TestCase):\n"
        "    def test_size(self):\n        self.assertEqual(SIZE, 4)\n"
    )
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "Legacy SIZE")
    factory = tmp_path / "factory"
    (factory / "agents").mkdir(parents=True)
    (factory / "agents" / "oracle.yaml").write_text("kind: reference\n")
    (factory / "benchmarks").mkdir()
    code, out, err = run_bench(
        "tasks", "from-commit", str(repo), "HEAD", "--suite", "calc", "--factory", str(factory),
        home=bench_home,
    )  # fmt: skip
    assert code == 0, err
    patch = (factory / "benchmarks/calc/references/legacy-size.patch").read_bytes()
    assert b"GIT binary patch" in patch and b"calc/legacy.py" in patch
    patch.decode("utf-8")  # (a reference patch is a UTF-8 file)
    code, out, err = run_bench("validate", str(factory), "--reference", home=bench_home)
    assert code == 0, out + err
    assert "ok    calc/legacy-size: base [tests=failed] -> reference [tests=passed]" in out
