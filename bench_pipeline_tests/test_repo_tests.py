"""Grading with a repository's own tests, on real third-party code: inflection 0.5.1 from its
PyPI sdist (vendored, sha256-checked), with `dasherize` reverted and its upstream tests as
FAIL_TO_PASS. Everything runs through the real CLI, git, pytest, Dagster and DuckDB; the agents
are `kind: command` scripts."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml

from bench_pipeline.warehouse.store import Warehouse
from bench_pipeline_tests import inflection_repo as infl
from bench_pipeline_tests.conftest import run_bench

pytestmark = pytest.mark.slow
README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def readme_block(lang: str, marker: str) -> str:
    """The README's fenced `lang` block that contains `marker`."""
    blocks = [b.split("```", 1)[0] for b in README.split(f"```{lang}\n")[1:]]
    (block,) = [b for b in blocks if marker in b]
    return block


# Every agent first looks for the hidden tests anywhere in its workspace and exits 3 (an agent
# error, visible as the trial's outcome) if it finds them.
LOOK = """
import os, pathlib, sys
ws = pathlib.Path.cwd()
prompt_file = pathlib.Path(sys.argv[1])
# the workspace, and the trial's evidence folder (the prompt file's folder, known to the agent)
for path in [*ws.rglob("*.py"), *prompt_file.parent.rglob("*.py")]:
    if ".git" in path.parts or ".venv" in path.parts:
        continue
    text = path.read_text(errors="replace")
    if path.name in ("test_inflection.py", "test_flaky_counter.py") or "def test_dasherize" in text:
        print(f"hidden test visible to the agent: {path}")
        sys.exit(3)
module = ws / "inflection" / "__init__.py"
source = module.read_text()
prompt = prompt_file.read_text()
"""
AGENTS = {
    "fix": 'module.write_text(source.replace("return word\\n\\n\\ndef humanize", '
    "\"return word.replace('_', '-')\\n\\n\\ndef humanize\", 1))",
    "syntax": "module.write_text(source + '\\ndef broken(:\\n')",
    # fixes dasherize, but leaves a conftest.py that cannot be imported: pytest writes no report
    "conftest": 'module.write_text(source.replace("return word\\n\\n\\ndef humanize", '
    "\"return word.replace('_', '-')\\n\\n\\ndef humanize\", 1))\n"
    "(ws / 'conftest.py').write_text('import not_a_module_anywhere\\n')",
    # fixes dasherize, breaks humanize (PASS_TO_PASS), on every attempt
    # Forgers: each leaves dasherize as it is and makes pytest report a pass another way.
    "forge-conftest": "(ws / 'conftest.py').write_text(FORGE)",
    "forge-ini": "(ws / 'forge_plugin.py').write_text(FORGE)\n"
    "(ws / 'pytest.ini').write_text('[pytest]\\naddopts = -p forge_plugin\\n')",
    "forge-pyproject": "(ws / 'forge_plugin.py').write_text(FORGE)\n"
    "(ws / 'pyproject.toml').write_text('[tool.pytest.ini_options]\\naddopts = \"-p forge_plugin\"\\n')",
    "forge-toml": "(ws / 'forge_plugin.py').write_text(FORGE)\n"
    "(ws / 'pytest.toml').write_text('[pytest]\\naddopts = [\"-p\", \"forge_plugin\"]\\n')",
    # ends the test process with 0 as pytest imports the package: no report at all
    "exit-early": "module.write_text('import os\\nos._exit(0)\\n' + source)",
    # forges, then deletes itself as pytest exits: the workspace looks untouched afterwards
    "forge-vanish": "(ws / 'conftest.py').write_text(FORGE + VANISH)",
    # a pytest.py of its own, first on sys.path under `python -m pytest`: it runs the real
    # pytest and strips every failure from the report
    "forge-shadow": "(ws / 'pytest.py').write_text(SHADOW)",
    # ends the test process as it imports the package, saying through pytest's saved output
    # pipe what a missing pytest says: that read as the grader's fault (unscored)
    "fake-no-pytest": "module.write_text(FAKE_NO_PYTEST + source)",
    # once pytest wrote its report, ends the process with 3: alone pytest's internal error
    "atexit3": "module.write_text('import atexit as _a, os as _o\\n_a.register(_o._exit, 3)\\n'"
    " + source)",
    # as pytest imports the package, copies the hidden tests into the workspace: the next
    # attempt (whose look above exits 3 at a hidden test) and the patch would have them
    "stash": "for place in (ws / '.git' / 'stash', pathlib.Path(os.environ['HOME']) / 'stash',"
    " pathlib.Path('/tmp/stash')):\n"
    "    if place.is_dir() and any(place.iterdir()):\n"
    "        print(f'hidden test visible to the agent: {place}')\n"
    "        sys.exit(3)\n"
    "module.write_text(STASH + source)",
    # as pytest imports the package, changes the hidden tests' own copy in the private folder
    # (found from the report's path): the trial was invalidated, unscored
    "hidmod": "module.write_text(HIDMOD + source)",
    # the right fix, plus a conftest.py of its own (a fixture): still graded as the fix
    "fix-conftest": 'module.write_text(source.replace("return word\\n\\n\\ndef humanize", '
    "\"return word.replace('_', '-')\\n\\n\\ndef humanize\", 1))\n"
    "(ws / 'conftest.py').write_text('import pytest\\n\\n@pytest.fixture\\ndef word():\\n    return 1\\n')",
    # the right fix, plus a conftest.py whose hook crashes pytest itself (INTERNALERROR, exit
    # 3, which alone reads as a fault of the grader): the repo's tests cannot run
    "crash-conftest": 'module.write_text(source.replace("return word\\n\\n\\ndef humanize", '
    "\"return word.replace('_', '-')\\n\\n\\ndef humanize\", 1))\n"
    "(ws / 'conftest.py').write_text('def pytest_runtest_makereport(item, call):\\n"
    '    raise RuntimeError("boom")\\n\')',
    "breaker": 'module.write_text(source.replace("return word\\n\\n\\ndef humanize", '
    "\"return word.replace('_', '-')\\n\\n\\ndef humanize\", 1).replace("
    '"word = re.sub(r\\"_id$\\", \\"\\", word)", "return word", 1))',
    # does nothing on its first attempt, fixes on the second (prepare must not run again)
    "late": "if 'previous attempt' in prompt:\n"
    '    module.write_text(source.replace("return word\\n\\n\\ndef humanize", '
    "\"return word.replace('_', '-')\\n\\n\\ndef humanize\", 1))\n"
    "import subprocess\n"
    "venv = ws / '.venv' / 'bin' / 'python'\n"
    "out = subprocess.run([str(venv), '-c', 'import inflection, sys; print(sys.prefix)'],"
    " capture_output=True, text=True, cwd='/')\n"
    "if out.returncode != 0 or '.venv' not in out.stdout:\n"
    "    print('the prepared venv has no inflection', out.stdout, out.stderr)\n"
    "    sys.exit(4)",
}


STASH = """import os as _os, pathlib as _p
_ws = _p.Path(__file__).resolve().parent.parent
for _place in (_ws / ".stash", _ws / ".git" / "stash", _p.Path(_os.environ["HOME"]) / "stash",
               _p.Path("/tmp/stash")):
    try:
        _place.mkdir(exist_ok=True)
        for _t in _ws.glob("test_*.py"):
            (_place / _t.name).write_bytes(_t.read_bytes())
    except OSError:
        pass
"""
HIDMOD = """import pathlib as _p, sys as _s
for _a in _s.argv:
    if _a.startswith("--junitxml="):
        for _f in (_p.Path(_a.split("=", 1)[1]).parents[2] / "hidden").rglob("*.py"):
            try:
                _f.chmod(0o644)
                _f.write_text(_f.read_text() + "# changed by the code under test\\n")
            except OSError:
                pass
"""
SHADOW = """
import re, subprocess, sys
args = sys.argv[1:]
junit = next(a.split("=", 1)[1] for a in args if a.startswith("--junitxml="))
subprocess.run([sys.executable, "-P", "-m", "pytest", *args])
xml = open(junit).read()
xml = re.sub(r"<(failure|error|skipped)[^>]*?/>", "", xml)
xml = re.sub(r"<(failure|error|skipped)[^>]*?>.*?</\\1>", "", xml, flags=re.S)
open(junit, "w").write(xml)
sys.exit(0)
"""
FAKE_NO_PYTEST = """import os as _os
for _fd in _os.listdir("/proc/self/fd"):
    try:
        if _os.readlink("/proc/self/fd/" + _fd).startswith("pipe:"):
            _os.write(int(_fd), b"ModuleNotFoundError: No module named pytest\\n")
    except OSError:
        pass
_os._exit(1)
"""

# A pytest hook that reports every test as passed, whatever it did.
FORGE = """
import pytest

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
    report.longrepr = None
"""

VANISH = """
def pytest_unconfigure(config):
    import pathlib
    pathlib.Path(__file__).unlink()
"""


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def make_factory(tmp: Path, repo: Path, base: str, fix: str, upstream_tests: Path) -> Path:
    factory = tmp / "factory"
    for name, body in AGENTS.items():
        script = _write(
            tmp / "agents-src" / f"{name}.py",
            f"FORGE = {FORGE!r}\nVANISH = {VANISH!r}\nSHADOW = {SHADOW!r}\n"
            f"FAKE_NO_PYTEST = {FAKE_NO_PYTEST!r}\nSTASH = {STASH!r}\n"
            f"HIDMOD = {HIDMOD!r}\n{LOOK}{body}\n",
        )
        _write(
            factory / "agents" / f"{name}.yaml",
            f"kind: command\ncommand: [python, '{script}', '{{prompt_file}}']\n"
            "timeout_seconds: 300\n",
        )
    _write(factory / "agents" / "oracle.yaml", "kind: reference\n")
    suite = factory / "benchmarks" / "infl"
    _write(suite / "suite.yaml", f"title: inflection\nagent: fix\nrepo: {repo}\n")
    graders = suite / "graders" / "upstream"
    _write(graders / infl.TEST_MODULE, upstream_tests.read_text())
    patch = subprocess.run(
        ["git", "diff", base, fix, "--", "inflection/__init__.py"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    _write(suite / "references" / "dasherize.patch", patch)
    task = {
        "title": "dasherize replaces underscores",
        "base_ref": base,
        "prompt": "inflection.dasherize('puni_puni') returns 'puni_puni'; it must return "
        "'puni-puni'.",
        "tests": {
            "dir": "graders/upstream",
            "files": [infl.TEST_MODULE],
            "fail_to_pass": list(infl.DASHERIZE_IDS),
            "pass_to_pass": [*infl.HUMANIZE_IDS, *infl.OTHER_P2P],
        },
    }
    _write(suite / "tasks" / "dasherize.yaml", yaml.safe_dump(task, sort_keys=False))
    return factory


def launch(factory: Path, name: str, configs: list[str], extra: str = "") -> Path:
    lines = "\n".join(f"  - {c}" for c in configs)
    return _write(
        factory / "launches" / f"{name}.yaml",
        f"kind: BenchmarkLaunch\nsuite: infl\nconfigs:\n{lines}\nrepetitions: 1\n"
        f"scorers: [checks, tests]\nmax_parallel: 1\n{extra}",
    )


@pytest.fixture()
def fixture_repo(tmp_path: Path) -> tuple[Path, str, str, Path]:
    return infl.make_repo(tmp_path)


def _scores(home: Path) -> dict[tuple[str, str], dict]:
    wh = Warehouse(home / "warehouse")
    frame = wh.query("SELECT config_id, scorer, status, value, reason, details_json FROM scores")
    return {(r.config_id, r.scorer): r._asdict() for r in frame.itertuples(index=False)}


def test_hidden_upstream_tests_grade_fix_syntax_error_and_broken_pass_to_pass(
    tmp_path: Path, bench_home: Path, fixture_repo: tuple[Path, str, str, Path]
) -> None:
    repo, base, fix, upstream = fixture_repo
    factory = make_factory(tmp_path, repo, base, fix, upstream)

    code, out, err = run_bench("validate", str(factory), "--reference", home=bench_home)
    assert code == 0, out + err
    assert "ok    infl/dasherize: base [tests=failed] -> reference [tests=passed]" in out
    assert "fail_to_pass 2/2 fixed, pass_to_pass 6/6 kept" in out

    path = launch(
        factory,
        "grade",
        [
            "{id: fix, agent: fix}",
            "{id: syntax, agent: syntax}",
            "{id: breaker, agent: breaker, max_iterations: 2}",
            "{id: conftest, agent: conftest}",
        ],
    )
    code, out, err = run_bench("run", str(path), "--json", "--quiet", home=bench_home)
    assert code == 0, err
    scores = _scores(bench_home)
    table = {row["config_id"]: row for row in json.loads(out)["config_table"]}
    assert table["fix"]["score_tests"] == 1.0 and table["syntax"]["score_tests"] == 0.0
    assert table["breaker"]["score_checks"] == 0.0 and table["syntax"]["scored_checks"] == 1

    # The right fix: 1, and the agent never saw the hidden tests (it would have exited 3).
    assert scores[("fix", "checks")]["value"] == 1.0
    assert scores[("fix", "tests")]["value"] == 1.0
    assert scores[("fix", "tests:share")]["value"] == 1.0

    # A syntax error: scored 0 (the workspace's code cannot be collected), not unscored.
    for scorer in ("checks", "tests"):
        row = scores[("syntax", scorer)]
        assert row["status"] == "scored" and row["value"] == 0.0, row
    assert "error" in scores[("syntax", "tests")]["reason"]

    # A conftest.py that cannot be imported keeps pytest from writing any report: 0 as well.
    row = scores[("conftest", "tests")]
    assert row["status"] == "scored" and row["value"] == 0.0, row
    assert "conftest.py in the workspace cannot be imported" in row["reason"]

    # Fixed the target, broke humanize: 0, the broken PASS_TO_PASS tests named.
    row = scores[("breaker", "tests")]
    assert row["value"] == 0.0 and infl.HUMANIZE_IDS[0] in row["reason"]
    assert scores[("breaker", "tests:share")]["value"] == pytest.approx(5 / 8)
    assert infl.HUMANIZE_IDS[0] in scores[("breaker", "checks")]["reason"]

    evidence = bench_home / "evidence"
    (breaker,) = evidence.rglob("breaker/rep1")
    summary = json.loads((breaker / "tests.json").read_text())
    assert summary["fixed"] == list(infl.DASHERIZE_IDS)
    assert summary["still_failing"] == []
    assert summary["broken"] == list(infl.HUMANIZE_IDS)
    # The second attempt was told which tests fail (default findings for hidden tests: names)
    # and saw neither the tests' source nor the test files.
    events = [json.loads(line) for line in (breaker / "transcript.jsonl").read_text().splitlines()]
    text = next(e["prompt"] for e in events if e["event"] == "findings")
    assert infl.HUMANIZE_IDS[0] in text
    assert "inflection.humanize(underscore)" not in text and "AssertionError" not in text

    # The hidden test file never reaches the trial's diff.
    for trial in evidence.rglob("changes.patch"):
        assert "test_inflection.py" not in trial.read_text()

    # test_results: one row per test, list and outcome, in Parquet and as a DuckDB view.
    wh = Warehouse(bench_home / "warehouse")
    rows = wh.query(
        "SELECT config_id, attempt, test_id, list, outcome FROM test_results "
        "WHERE config_id = 'breaker' AND attempt = 2 ORDER BY test_id"
    )
    by_id = {r.test_id: (r.list, r.outcome) for r in rows.itertuples()}
    assert by_id[infl.HUMANIZE_IDS[1]] == ("pass_to_pass", "failed")
    assert by_id[infl.DASHERIZE_IDS[1]] == ("fail_to_pass", "passed")
    syntax = wh.query("SELECT DISTINCT outcome FROM test_results WHERE config_id = 'syntax'")
    assert list(syntax["outcome"]) == ["error"]
    assert list((bench_home / "warehouse" / "test_results").rglob("*.parquet"))
    broken = wh.query(readme_block("sql", "FROM test_results"))
    assert set(broken.loc[broken["config_id"] == "breaker", "test_id"]) == set(infl.HUMANIZE_IDS)
    assert "fix" not in set(broken["config_id"])


def _findings(evidence: Path, config: str) -> str:
    (trial,) = evidence.rglob(f"{config}/rep1")
    events = [json.loads(line) for line in (trial / "transcript.jsonl").read_text().splitlines()]
    return next(e["prompt"] for e in events if e["event"] == "findings")


def test_findings_setting_full_and_none(
    tmp_path: Path, bench_home: Path, fixture_repo: tuple[Path, str, str, Path]
) -> None:
    repo, base, fix, upstream = fixture_repo
    factory = make_factory(tmp_path, repo, base, fix, upstream)
    task_file = factory / "benchmarks" / "infl" / "tasks" / "dasherize.yaml"
    good = task_file.read_text()
    seen = {}
    for mode in ("full", "none"):
        task_file.write_text(good + f"findings: {mode}\n")
        path = launch(
            factory, f"findings-{mode}", [f"{{id: {mode}, agent: breaker, max_iterations: 2}}"]
        )
        code, _, err = run_bench("run", str(path), "--json", "--quiet", home=bench_home)
        assert code == 0, err
        seen[mode] = _findings(bench_home / "evidence", mode)
    # full: the failing tests with pytest's message, the hidden test's source line included
    assert infl.HUMANIZE_IDS[0] in seen["full"]
    assert "assert human == inflection.humanize(underscore)" in seen["full"]
    # none: only that the attempt failed
    assert "did not pass" in seen["none"] and "humanize" not in seen["none"]


FLAKY = """
import os, pathlib

def test_alternates():
    counter = pathlib.Path(os.environ["FLAKY_COUNTER"])
    n = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(n + 1))
    assert n % 2 == 0, f"run {n + 1}: fails on every second run"
"""
FLAKY_ID = "test_flaky_counter.py::test_alternates"


def _flaky_task(factory: Path, counter: Path, declared: bool) -> None:
    suite = factory / "benchmarks" / "infl"
    _write(suite / "graders" / "upstream" / "test_flaky_counter.py", FLAKY)
    task = yaml.safe_load((suite / "tasks" / "dasherize.yaml").read_text())
    task["tests"]["files"].append("test_flaky_counter.py")
    task["tests"]["pass_to_pass"].append(FLAKY_ID)
    task["tests"]["env"] = {"FLAKY_COUNTER": str(counter)}
    if declared:
        task["tests"]["flaky"] = [FLAKY_ID]
    _write(suite / "tasks" / "dasherize.yaml", yaml.safe_dump(task, sort_keys=False))


def test_validate_repeat_reports_a_flaky_test_and_a_run_excludes_it(
    tmp_path: Path, bench_home: Path, fixture_repo: tuple[Path, str, str, Path]
) -> None:
    repo, base, fix, upstream = fixture_repo
    factory = make_factory(tmp_path, repo, base, fix, upstream)
    counter = tmp_path / "flaky-counter"
    _flaky_task(factory, counter, declared=False)

    # One run per phase: the flaky test passes on the base and fails with the reference.
    code, out, _ = run_bench("validate", str(factory), "--reference", home=bench_home)
    assert code == 1 and f"pass_to_pass {FLAKY_ID} does not pass with the reference" in out

    counter.unlink()
    code, out, err = run_bench(
        "validate", str(factory), "--reference", "--repeat", "4", home=bench_home
    )
    assert code == 0, out + err
    assert f"flaky over 4 runs (not graded; list them in tests.flaky): {FLAKY_ID}" in out
    assert "fail_to_pass 2/2 fixed, pass_to_pass 6/6 kept" in out  # the flaky one left out
    assert counter.read_text() == "8"  # 4 runs on the base + 4 with the reference

    # Declared flaky: run and listed in the results, never counted.
    _flaky_task(factory, counter, declared=True)
    counter.write_text("1")  # its next run fails
    # The flaky test keeps its count outside the workspace: graders in the sandbox see that
    # folder only when the agent mounts it (read-write).
    agent = factory / "agents" / "fix.yaml"
    agent.write_text(agent.read_text() + f"mounts: ['{counter.parent}:rw']\n")
    path = launch(factory, "flaky", ["{id: fix, agent: fix}"])
    code, out, err = run_bench("run", str(path), "--json", "--quiet", home=bench_home)
    assert code == 0, err
    scores = _scores(bench_home)
    assert scores[("fix", "tests")]["value"] == 1.0
    assert scores[("fix", "checks")]["value"] == 1.0
    assert json.loads(scores[("fix", "tests")]["details_json"])["flaky"] == [FLAKY_ID]
    rows = Warehouse(bench_home / "warehouse").query(
        f"SELECT list, outcome FROM test_results WHERE test_id = '{FLAKY_ID}'"
    )
    assert list(zip(rows["list"], rows["outcome"], strict=True)) == [("flaky", "failed")]


PREPARE = [
    ["python", "-m", "venv", "--without-pip", ".venv"],
    [
        "python",
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-index",
        "--no-build-isolation",
        "--wheel-dir",
        "{cache}/wheels",
        ".",
    ],
    [
        "python",
        "-m",
        "pip",
        "--python",
        ".venv/bin/python",
        "install",
        "--no-deps",
        "--no-index",
        "--find-links",
        "{cache}/wheels",
        "inflection",
    ],
]


def test_prepare_installs_into_a_per_trial_venv_once_per_trial_and_a_failure_is_infra(
    tmp_path: Path, bench_home: Path, fixture_repo: tuple[Path, str, str, Path]
) -> None:
    repo, base, fix, upstream = fixture_repo
    factory = make_factory(tmp_path, repo, base, fix, upstream)
    suite_file = factory / "benchmarks" / "infl" / "suite.yaml"
    # A fourth step lets the venv see the harness's pytest (offline: no pytest wheel to install),
    # so the tests run with the prepared interpreter, as a team's `python: .venv/bin/python`.
    harness_site = sysconfig.get_paths()["purelib"]
    see_pytest = [
        ".venv/bin/python",
        "-c",
        "import site, sys; open(site.getsitepackages()[0] + '/harness.pth', 'w').write(sys.argv[1])",
        harness_site,
    ]
    prepare = [*PREPARE, see_pytest]
    suite_file.write_text(suite_file.read_text() + "prepare: " + json.dumps(prepare) + "\n")
    task_file = factory / "benchmarks" / "infl" / "tasks" / "dasherize.yaml"
    task = yaml.safe_load(task_file.read_text())
    task["tests"]["python"] = ".venv/bin/python"
    _write(task_file, yaml.safe_dump(task, sort_keys=False))
    path = launch(factory, "prep", ["{id: late, agent: late, max_iterations: 2}"])
    path.write_text(path.read_text().replace("repetitions: 1", "repetitions: 2"))
    code, out, err = run_bench("run", str(path), "--json", "--quiet", home=bench_home)
    assert code == 0, err
    scores = _scores(bench_home)
    assert scores[("late", "tests")]["value"] == 1.0  # both trials: fixed on attempt 2

    records = sorted((bench_home / "evidence").rglob("prepare.json"))
    assert len(records) == 2  # one per trial
    hits = []
    for record in records:
        data = json.loads(record.read_text())
        assert data["ok"] and [c["exit_code"] for c in data["commands"]] == [0, 0, 0, 0]
        assert "Successfully installed inflection" in (record.parent / "prepare-3.log").read_text()
        attempts = json.loads((record.parent / "metadata.json").read_text())["attempts"]
        assert len(attempts) == 2  # two attempts, one prepare
        hits.append(data["cache_hit"])
        key = data["cache_key"]
    assert sorted(hits) == [False, True]  # the second trial found the first one's cache
    assert (bench_home / "cache" / "prepare" / key / "wheels").is_dir()
    # graded with the prepared venv's interpreter (the runner's command is in the evidence)
    for summary in (bench_home / "evidence").rglob("late/rep*/tests.json"):
        assert json.loads(summary.read_text())["command"][0] == ".venv/bin/python"

    # A prepare command that fails: an infrastructure outcome, never scored.
    suite_file.write_text(
        suite_file.read_text().split("prepare:")[0]
        + "prepare: [[python, -c, \"import sys; print('no compiler here'); sys.exit(3)\"]]\n"
    )
    path = launch(factory, "prep-broken", ["{id: fix, agent: fix}"])
    code, out, err = run_bench("run", str(path), "--json", "--quiet", home=bench_home)
    assert code == 0, err
    wh = Warehouse(bench_home / "warehouse")
    trial = wh.query("SELECT outcome, error FROM trials WHERE config_id = 'fix'").iloc[0]
    assert trial["outcome"] == "workspace_error" and "prepare command 1" in trial["error"]
    for scorer in ("checks", "tests"):
        assert scores_status(bench_home, "fix", scorer) != "scored"
    (log,) = (bench_home / "evidence").rglob("fix/rep1/prepare-1.log")
    assert "no compiler here" in log.read_text()


def scores_status(home: Path, config: str, scorer: str) -> str:
    return _scores(home)[(config, scorer)]["status"]


def test_from_commit_on_the_upstream_fix_drafts_a_task_that_validates_unchanged(
    tmp_path: Path, bench_home: Path, fixture_repo: tuple[Path, str, str, Path]
) -> None:
    repo, base, fix, _ = fixture_repo
    factory = tmp_path / "drafts"
    _write(factory / "agents" / "oracle.yaml", "kind: reference\n")
    code, out, err = run_bench(
        "tasks",
        "from-commit",
        str(repo),
        fix[:10],
        "--suite",
        "infl",
        "--factory",
        str(factory),
        home=bench_home,
    )
    assert code == 0, err
    (task_file,) = (factory / "benchmarks" / "infl" / "tasks").glob("*.yaml")
    task = yaml.safe_load(task_file.read_text())
    assert task["base_ref"] == base
    tests = task["tests"]
    assert tests["from_ref"] == fix and tests["files"] == [infl.TEST_MODULE]
    assert tests["fail_to_pass"] == list(infl.DASHERIZE_IDS)
    assert len(tests["pass_to_pass"]) > 400 and infl.HUMANIZE_IDS[0] in tests["pass_to_pass"]
    assert "2 fail_to_pass" in out
    code, out, err = run_bench("validate", str(factory), "--reference", home=bench_home)
    assert code == 0, out + err
    assert f"fail_to_pass 2/2 fixed, pass_to_pass {len(tests['pass_to_pass'])}/" in out
    assert (
        subprocess.run(
            ["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True
        ).stdout
        == ""
    )


PROBE = (
    "import os, sys; sys.exit(0 if os.environ.get('PYTEST_DISABLE_PLUGIN_AUTOLOAD') == '1' else 1)"
)


def test_exit_semantics_of_checks_declared_codes_and_a_missing_executable(
    tmp_path: Path, bench_home: Path, fixture_repo: tuple[Path, str, str, Path]
) -> None:
    repo, base, fix, upstream = fixture_repo
    factory = make_factory(tmp_path, repo, base, fix, upstream)
    suite = factory / "benchmarks" / "infl"
    task = yaml.safe_load((suite / "tasks" / "dasherize.yaml").read_text())
    # pytest on node ids of a module that does not import exits 4 ("found no collectors"):
    # declared as failed here, so a broken workspace scores 0.
    _write(
        suite / "graders" / "checks" / "check_dasherize.py",
        "import inflection\n\n\ndef test_hyphens():\n"
        "    assert inflection.dasherize('puni_puni') == 'puni-puni'\n",
    )
    task["checks"] = [
        {
            "id": "pytest-ids",
            "command": [
                "python",
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "{inputs}/graders/checks/check_dasherize.py::test_hyphens",
            ],
            "files": ["graders/checks/check_dasherize.py"],
            "exit_codes": {"passed": [0], "failed": [1, 2, 4, 5]},
            "env": {"PYTHONPATH": "."},
        },
        {"id": "no-such-tool", "command": ["definitely-not-installed-tool-xyz"]},
        # graders get PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 unless a check unsets it (null)
        {"id": "autoload-default", "command": ["python", "-c", PROBE]},
        {
            "id": "autoload-unset",
            "command": ["python", "-c", PROBE.replace("'1'", "None")],
            "env": {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": None},
        },
    ]
    _write(suite / "tasks" / "dasherize.yaml", yaml.safe_dump(task, sort_keys=False))
    path = launch(factory, "codes", ["{id: syntax, agent: syntax}", "{id: fix, agent: fix}"])
    code, out, err = run_bench("run", str(path), "--json", "--quiet", home=bench_home)
    assert code == 0, err
    checks = _scores(bench_home)[("syntax", "checks")]
    assert checks["status"] == "scored" and checks["value"] == 0.0
    assert "pytest-ids" in checks["reason"]
    # the fix passes the tests, but a check that cannot start is a grader fault: inconclusive,
    # and its reason says so (not "timeout?")
    fixed = _scores(bench_home)[("fix", "checks")]
    assert fixed["status"] == "inconclusive", fixed
    assert "no-such-tool" in fixed["reason"] and "timeout" not in fixed["reason"]
    assert "definitely-not-installed-tool-xyz" in fixed["reason"]
    statuses = Warehouse(bench_home / "warehouse").query(
        "SELECT check_id, status FROM check_results WHERE trial_id LIKE '%/fix/%'"
    )
    by_id = dict(zip(statuses["check_id"], statuses["status"], strict=True))
    assert by_id["autoload-default"] == "passed" and by_id["autoload-unset"] == "passed"
    assert by_id["pytest-ids"] == "passed" and by_id["tests"] == "passed"


def test_the_tests_runners_own_faults_are_inconclusive_with_their_reason(
    tmp_path: Path, bench_home: Path, fixture_repo: tuple[Path, str, str, Path]
) -> None:
    repo, base, fix, upstream = fixture_repo
    factory = make_factory(tmp_path, repo, base, fix, upstream)
    task_file = factory / "benchmarks" / "infl" / "tasks" / "dasherize.yaml"
    good = yaml.safe_load(task_file.read_text())
    bare = tmp_path / "bare-venv"  # a real interpreter without pytest
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    cases = {
        "missing": ("/nonexistent/bin/python", "cannot start /nonexistent/bin/python"),
        "nopytest": (str(bare / "bin" / "python"), "has no pytest installed"),
    }
    for name, (python, _) in cases.items():
        task = {**good, "tests": {**good["tests"], "python": python}}
        _write(task_file.with_name(f"{name}.yaml"), yaml.safe_dump(task, sort_keys=False))
    task_file.unlink()
    path = launch(factory, "faults", ["{id: fix, agent: fix}"])
    code, _, err = run_bench("run", str(path), "--json", "--quiet", home=bench_home)
    assert code == 0, err
    frame = Warehouse(bench_home / "warehouse").query(
        "SELECT task_id, status, reason FROM scores WHERE scorer = 'tests'"
    )
    for row in frame.itertuples():
        assert row.status == "inconclusive", row
        expected = cases[row.task_id][1]
        assert expected in row.reason and "grader fault" in row.reason, row.reason
        assert "timeout" not in row.reason and "timed out" not in row.reason


def test_the_readme_task_example_validates_and_its_prepare_is_the_tested_one(
    tmp_path: Path, bench_home: Path, fixture_repo: tuple[Path, str, str, Path]
) -> None:
    repo, base, fix, upstream = fixture_repo
    factory = make_factory(tmp_path, repo, base, fix, upstream)
    example = yaml.safe_load(readme_block("yaml", "fail_to_pass:"))
    assert example["base_ref"] == base  # the fixture's history is deterministic
    _write(factory / "benchmarks" / "infl" / "tasks" / "dasherize.yaml", yaml.safe_dump(example))
    code, out, err = run_bench("validate", str(factory), "--reference", home=bench_home)
    assert code == 0, out + err
    assert "fail_to_pass 2/2 fixed, pass_to_pass 2/2 kept" in out
    assert yaml.safe_load(readme_block("yaml", "--find-links"))["prepare"] == PREPARE


def test_the_command_runner_reads_any_junit_writer(
    tmp_path: Path, bench_home: Path, fixture_repo: tuple[Path, str, str, Path]
) -> None:
    """`runner: command`: the task's own command writes JUnit XML to {junit} (here pytest with
    its default xunit2 report, which names no file: ids come from the class names)."""
    repo, base, fix, upstream = fixture_repo
    factory = make_factory(tmp_path, repo, base, fix, upstream)
    task_file = factory / "benchmarks" / "infl" / "tasks" / "dasherize.yaml"
    task = yaml.safe_load(task_file.read_text())
    task["tests"]["runner"] = "command"
    task["tests"]["command"] = [
        "python",
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--junitxml={junit}",
        "test_inflection.py",
    ]
    _write(task_file, yaml.safe_dump(task, sort_keys=False))
    code, out, err = run_bench("validate", str(factory), "--reference", home=bench_home)
    assert code == 0, out + err
    assert "fail_to_pass 2/2 fixed, pass_to_pass 6/6 kept" in out
    task["tests"]["command"] = ["python", "-c", "print('no report')"]
    _write(task_file, yaml.safe_dump(task, sort_keys=False))
    code, _, err = run_bench("validate", str(factory), home=bench_home)
    assert code == 2 and "must name {junit}" in err
    task["tests"]["command"] = ["python", "-c", "import sys; print(sys.argv[1])", "{junit}"]
    _write(task_file, yaml.safe_dump(task, sort_keys=False))
    code, out, _ = run_bench("validate", str(factory), "--reference", home=bench_home)
    assert code == 1 and "the runner wrote no JUnit report (exit 0)" in out


PROBE_TEST = """
import os

def test_plugins_may_autoload():
    assert "PYTEST_DISABLE_PLUGIN_AUTOLOAD" not in os.environ
"""


def test_pytest_plugin_autoload_is_off_unless_the_task_turns_it_on(
    tmp_path: Path, bench_home: Path, fixture_repo: tuple[Path, str, str, Path]
) -> None:
    repo, base, fix, upstream = fixture_repo
    factory = make_factory(tmp_path, repo, base, fix, upstream)
    suite = factory / "benchmarks" / "infl"
    _write(suite / "graders" / "upstream" / "test_probe.py", PROBE_TEST)
    task = yaml.safe_load((suite / "tasks" / "dasherize.yaml").read_text())
    task["tests"]["files"].append("test_probe.py")
    task["tests"]["pass_to_pass"].append("test_probe.py::test_plugins_may_autoload")
    for plugins, expected in ((False, 1), (True, 0)):
        task["tests"]["plugins"] = plugins
        _write(suite / "tasks" / "dasherize.yaml", yaml.safe_dump(task, sort_keys=False))
        code, out, err = run_bench("validate", str(factory), "--reference", home=bench_home)
        assert code == expected, out + err
    assert "test_probe.py::test_plugins_may_autoload" not in out


def test_bad_tests_keys_are_one_line_errors(
    tmp_path: Path, bench_home: Path, fixture_repo: tuple[Path, str, str, Path]
) -> None:
    repo, base, fix, upstream = fixture_repo
    factory = make_factory(tmp_path, repo, base, fix, upstream)
    task_file = factory / "benchmarks" / "infl" / "tasks" / "dasherize.yaml"
    good = task_file.read_text()
    cases = [
        ("  fail_to_pass:", "  fail_to_pas:", "tests.fail_to_pas: unknown key"),
        ("  dir: graders/upstream", "  from_ref: nope", "tests.from_ref: 'nope' is not a commit"),
        ("  files:\n  - test_inflection.py", "  files:\n  - ../x.py", "tests.files[0]"),
    ]
    for old, new, expected in cases:
        assert old in good, old
        task_file.write_text(good.replace(old, new, 1))
        code, _, err = run_bench("validate", str(factory), home=bench_home)
        assert code == 2 and expected in err and len(err.strip().splitlines()) == 1, err
    code, _, err = run_bench("validate", str(factory), "--repeat", "0", home=bench_home)
    assert code == 2 and "--repeat" in err
    code, _, err = run_bench("validate", str(factory), "--repeat", "3", home=bench_home)
    assert code == 2 and "only with --reference" in err
    bad_codes = good.replace(
        "tests:",
        "checks:\n- {id: c, command: [python, -V], exit_codes: {passed: [0], failed: [0, 1]}}\ntests:",
        1,
    )
    task_file.write_text(bad_codes)
    code, _, err = run_bench("validate", str(factory), home=bench_home)
    assert code == 2 and "checks[0].exit_codes.failed" in err and "both passed and failed" in err
    task_file.write_text(good + "findings: everything\n")
    code, _, err = run_bench("validate", str(factory), home=bench_home)
    assert code == 2 and "findings" in err
    assert sys.executable  # the harness interpreter runs `python` in every command above


def test_a_test_report_forged_by_pytest_plumbing_the_agent_added_is_not_believed(
    tmp_path: Path, bench_home: Path, fixture_repo: tuple[Path, str, str, Path]
) -> None:
    """pytest reads conftest.py and its ini files from the test files' folders and above: an
    agent that writes one can turn every failure into a pass. They are graded as the base
    commit has them; the agent's own stay in its diff."""
    repo, base, fix, upstream = fixture_repo
    factory = make_factory(tmp_path, repo, base, fix, upstream)
    forgers = ["forge-conftest", "forge-ini", "forge-pyproject", "forge-toml", "forge-vanish"]
    others = ["fix-conftest", "crash-conftest", "exit-early"]
    path = launch(factory, "forge", [f"{{id: {n}, agent: {n}}}" for n in [*forgers, *others]])
    code, out, err = run_bench("run", str(path), "--json", "--quiet", home=bench_home)
    assert code == 0, err
    scores = _scores(bench_home)
    for name in forgers:
        row = scores[(name, "tests")]
        assert row["status"] == "scored" and row["value"] == 0.0, (name, row)
        assert infl.DASHERIZE_IDS[0] in row["reason"], (name, row)
        assert scores[(name, "checks")]["value"] == 0.0
    # Each reason says the tests ran twice, and with which files as before the agent.
    files = ["conftest.py", "pytest.ini", "pyproject.toml", "pytest.toml", "conftest.py"]
    for name, file in zip(forgers, files, strict=True):
        assert (
            f"(run twice, the second time with {file} as before the agent"
            in (scores[(name, "tests")]["reason"])
        )
    # A conftest.py of the agent's own that forges nothing does not cost the right fix.
    assert scores[("fix-conftest", "tests")]["value"] == 1.0
    assert scores[("fix-conftest", "checks")]["value"] == 1.0
    # One that crashes pytest: the right fix, but the repo's tests cannot run with the agent's
    # conftest.py (exit 3, alone a grader fault): 0, never unscored.
    row = scores[("crash-conftest", "tests")]
    assert row["status"] == "scored" and row["value"] == 0.0, row
    assert "with the agent's conftest.py, the tests cannot run" in row["reason"]
    # Code under test that ends pytest's process before its report (it read as the grader's
    # fault: unscored): 0.
    row = scores[("exit-early", "tests")]
    assert row["status"] == "scored" and row["value"] == 0.0, row
    assert "ended with exit 0 before pytest wrote a report" in row["reason"]
    # What the agent wrote is its work: in its diff, and the evidence names what was set aside.
    evidence = bench_home / "evidence"
    (forger,) = evidence.rglob("forge-ini/rep1")
    diff = (forger / "changes.patch").read_text()
    assert "b/pytest.ini" in diff and "b/forge_plugin.py" in diff
    summary = json.loads((forger / "tests.json").read_text())
    assert summary["plumbing_as_before_the_agent"] == ["pytest.ini"]
    # both runs' reports, and the log of both
    assert (forger / "attempt1" / "tests" / "junit.xml").is_file()
    assert (forger / "attempt1" / "tests" / "plumbing-as-before" / "junit.xml").is_file()
    log = (forger / "attempt1" / "tests" / "output.log").read_text()
    assert "--- again, with pytest.ini as before the agent ---" in log
    assert summary["still_failing"] == list(infl.DASHERIZE_IDS)


def test_a_pytest_of_the_agents_own_neither_runs_nor_passes_for_a_missing_one(
    tmp_path: Path, bench_home: Path, fixture_repo: tuple[Path, str, str, Path]
) -> None:
    """`python -m pytest` put the workspace first on sys.path before importing pytest: a
    pytest.py there forged the report. And a run without a report was the grader's fault when
    its output said pytest was missing, which the code under test can print."""
    repo, base, fix, upstream = fixture_repo
    factory = make_factory(tmp_path, repo, base, fix, upstream)
    names = ["forge-shadow", "fake-no-pytest", "atexit3", "fix"]
    path = launch(factory, "shadow", [f"{{id: {n}, agent: {n}}}" for n in names])
    code, out, err = run_bench("run", str(path), "--json", "--quiet", home=bench_home)
    assert code == 0, err
    scores = _scores(bench_home)
    # The real pytest ran and wrote its report: dasherize still fails.
    row = scores[("forge-shadow", "tests")]
    assert row["status"] == "scored" and row["value"] == 0.0, row
    assert infl.DASHERIZE_IDS[0] in row["reason"] and "run twice" not in row["reason"]
    # Pytest is there (asked apart from the run): the code under test ended the run, 0.
    row = scores[("fake-no-pytest", "tests")]
    assert row["status"] == "scored" and row["value"] == 0.0, row
    assert "exit 1 before" in row["reason"] and "grader fault" not in row["reason"]
    # pytest said 1 (tests failed), its process ended with 3: not pytest's internal error, 0.
    row = scores[("atexit3", "tests")]
    assert row["status"] == "scored" and row["value"] == 0.0, row
    # The launcher changes nothing for a real fix: the package imports from the workspace.
    assert scores[("fix", "tests")]["value"] == 1.0


def test_what_the_code_under_test_changed_while_graded_is_undone_before_the_next_attempt(
    tmp_path: Path, bench_home: Path, fixture_repo: tuple[Path, str, str, Path]
) -> None:
    """Grading runs the agent's code in the workspace: it copied the hidden tests there, and
    its next attempt read them and its patch showed them."""
    repo, base, fix, upstream = fixture_repo
    factory = make_factory(tmp_path, repo, base, fix, upstream)
    path = launch(
        factory,
        "stash",
        ["{id: stash, agent: stash, max_iterations: 2}", "{id: hidmod, agent: hidmod}"],
    )
    code, out, err = run_bench("run", str(path), "--json", "--quiet", home=bench_home)
    assert code == 0, err
    trials = Warehouse(bench_home / "warehouse").read("trials").to_dict("records")
    by_config = {t["config_id"]: t for t in trials}
    # The private folder's hidden tests are out of the graders' sandbox: unchanged, scored 0.
    assert by_config["hidmod"]["outcome"] == "succeeded", by_config["hidmod"]["error"]
    assert _scores(bench_home)[("hidmod", "tests")]["value"] == 0.0
    trial = by_config["stash"]
    # the second attempt ran and saw no hidden test (its look would have ended it: exit 3)
    assert trial["outcome"] == "succeeded" and trial["iterations"] == 2, trial["error"]
    assert _scores(bench_home)[("stash", "tests")]["value"] == 0.0
    (evidence,) = (bench_home / "evidence").rglob("stash/rep1")
    patch = (evidence / "changes.patch").read_text()
    assert "_ws.glob" in patch  # the agent's change, and only that
    assert "def test_dasherize" not in patch
    assert "diff --git a/.stash" not in patch
    events = [json.loads(line) for line in (evidence / "transcript.jsonl").read_text().splitlines()]
    undone = [e for e in events if e["event"] == "grading_changes_undone"]
    assert undone and any(p.startswith(".stash/") for p in undone[0]["paths"])


def test_grading_files_are_never_written_through_a_symlink_out_of_the_workspace(
    tmp_path: Path,
) -> None:
    """The harness places hidden tests and pytest's files in a workspace the agent shaped: a
    folder it made a symlink to elsewhere is set aside while grading, not written through; a
    symlink that stays inside (a repository's own) is used as it is; all comes back after."""
    from bench_pipeline.scorers.tests import SwappedFiles

    ws, outside = tmp_path / "repo", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (outside / "test_x.py").write_text("not the harness's to touch")
    (ws / "tests").symlink_to(outside)  # the agent's
    (ws / "inside").mkdir()
    (ws / "linked").symlink_to(ws / "inside")  # within the workspace
    (ws / "conftest.py").write_text("the agent's")

    swap = SwappedFiles(ws)
    swap.put("tests/test_x.py", b"hidden")
    swap.put("linked/test_y.py", b"hidden too")
    swap.put("conftest.py", None)
    assert (outside / "test_x.py").read_text() == "not the harness's to touch"
    assert (
        not (ws / "tests").is_symlink() and (ws / "tests" / "test_x.py").read_bytes() == b"hidden"
    )
    assert (ws / "inside" / "test_y.py").read_bytes() == b"hidden too"
    assert not (ws / "conftest.py").exists()

    swap.restore()
    assert (ws / "tests").is_symlink() and (ws / "tests").resolve() == outside
    assert [p.name for p in outside.iterdir()] == ["test_x.py"]
    assert not (ws / "inside" / "test_y.py").exists()
    assert (ws / "conftest.py").read_text() == "the agent's"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outside", "repo"]  # nothing left aside


def test_undoing_the_grading_never_goes_through_a_symlink_made_while_it_ran(
    tmp_path: Path,
) -> None:
    """The code under test runs between `put` and `restore`: it turned the folder of a hidden
    test into a symlink out of the workspace, and `restore` unlinked the hidden file and moved
    the agent's own file there, outside the workspace."""
    from bench_pipeline.scorers.tests import SwappedFiles

    ws, outside = tmp_path / "repo", tmp_path / "outside"
    (ws / "tests").mkdir(parents=True)
    outside.mkdir()
    (ws / "tests" / "test_x.py").write_text("the agent's payload")
    (outside / "test_y.py").write_text("not the harness's to delete")
    swap = SwappedFiles(ws)
    swap.put("tests/test_x.py", b"hidden")  # the agent's file set aside
    swap.put("tests/test_y.py", b"hidden too")
    # ... what the code under test does while the tests run
    (ws / "tests").rename(ws / "moved")
    (ws / "tests").symlink_to(outside)
    swap.restore()
    assert sorted(p.name for p in outside.iterdir()) == ["test_y.py"]
    assert (outside / "test_y.py").read_text() == "not the harness's to delete"
    assert {p.name for p in swap.skipped} == {"test_x.py", "test_y.py"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outside", "repo"]  # nothing left aside


def test_grading_files_set_aside_dangling_and_looping_symlinks_and_undo_in_reverse(
    tmp_path: Path,
) -> None:
    from bench_pipeline.scorers.tests import SwappedFiles

    ws = tmp_path / "repo"
    ws.mkdir()
    (ws / "gone").symlink_to(ws / "nothing-here")  # dangling, pointing inside
    (ws / "loop").symlink_to(ws / "loop")
    (ws / "a").mkdir()
    swap = SwappedFiles(ws)
    swap.put("gone/test_x.py", b"hidden")
    swap.put("loop/conftest.py", None)
    swap.put("a/b/c.py", b"first")
    swap.put("a/b", b"a file where a folder was just made")  # sets the folder aside
    assert (ws / "gone" / "test_x.py").read_bytes() == b"hidden"
    assert (ws / "a" / "b").read_bytes() == b"a file where a folder was just made"
    swap.restore()
    assert (ws / "gone").is_symlink() and not (ws / "gone").exists()
    assert (ws / "loop").is_symlink()
    assert [p.name for p in (ws / "a").iterdir()] == []  # nothing of the grading left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repo"]


def test_the_paths_a_reference_patch_changes_include_empty_renamed_and_quoted_files() -> None:
    from bench_pipeline.scorers.tests import patch_paths

    patch = (
        "diff --git a/pytest.ini b/pytest.ini\n"
        "new file mode 100644\n"
        "index 0000000..e69de29\n"
        "diff --git a/old name.py b/new name.py\n"
        "similarity index 100%\n"
        "rename from old name.py\n"
        "rename to new name.py\n"
        'diff --git "a/q\\"\\342\\202\\254.py" "b/q\\"\\342\\202\\254.py"\n'
        'index 1..2 100644\n--- "a/q\\"\\342\\202\\254.py"\n+++ "b/q\\"\\342\\202\\254.py"\n'
        'diff --git "a/t\\"€.py" "b/t\\"€.py"\n'  # core.quotePath off: raw UTF-8 in quotes
        "diff --git a/src/conftest.py b/src/conftest.py\n"
        "deleted file mode 100644\n--- a/src/conftest.py\n+++ /dev/null\n"
    )
    assert patch_paths(patch) == {
        "pytest.ini",
        "old name.py",
        "new name.py",
        'q"€.py',
        't"€.py',
        "src/conftest.py",
    }


def test_the_pytest_launcher_puts_the_workspace_on_the_path_as_python_m_does(
    tmp_path: Path,
) -> None:
    """As `python -m pytest`: the workspace's absolute path first on sys.path (a test that
    changes directory still imports from it; `python -c` alone puts '' there), pytest's exit
    code after the mark, and the mark out of what the run printed."""
    import os
    import subprocess
    import sys

    from bench_pipeline.scorers.tests import PYTEST_MAIN
    from bench_pipeline.workspace.process import take_mark

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "helper_mod.py").write_text("VALUE = 3\n")
    (ws / "test_chdir.py").write_text(
        "import os\n\ndef test_imports_after_chdir(tmp_path):\n"
        "    os.chdir(tmp_path)\n    import helper_mod\n    assert helper_mod.VALUE == 3\n"
    )
    proc = subprocess.run(
        # (importlib mode: pytest puts nothing of its own on sys.path, only the launcher does)
        [sys.executable, "-c", PYTEST_MAIN, "-q", "-p", "no:cacheprovider"]
        + ["--import-mode=importlib", "test_chdir.py"],
        cwd=ws,
        input="m4rk\n",
        capture_output=True,
        text=True,
        env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = take_mark(proc.stdout, "m4rk")
    assert found is not None and found[1] == 0 and "m4rk" not in found[0]
    assert "1 passed" in found[0]


def test_a_pytest_the_agent_put_on_the_tests_path_does_not_read_as_a_missing_pytest(
    tmp_path: Path,
) -> None:
    """A run without a report is the workspace's failure unless the interpreter itself has no
    pytest: the probe that asks it keeps the workspace off its path as the test run's launcher
    does, a PYTHONPATH entry inside it (a task's `env: {PYTHONPATH: src}`) included, so a
    src/pytest.py that raises ImportError does not make the agent's failure unscored."""
    from bench_pipeline.formats.model import TestsSpec
    from bench_pipeline.scorers.tests import _no_pytest
    from bench_pipeline.workspace.process import grader_env

    ws = tmp_path / "ws"
    _write(ws / "src" / "pytest.py", "raise ImportError('No module named pytest')\n")
    _write(ws / "pytest.py", "raise ImportError('No module named pytest')\n")
    spec = TestsSpec(python=sys.executable, env=(("PYTHONPATH", "src"),))
    env = grader_env(tmp_path / "home", spec.env)
    # (the shadowing module is really what an unguarded import finds)
    shadowed = subprocess.run(
        [sys.executable, "-c", "import pytest"], cwd=ws, env=env, capture_output=True, text=True
    )
    assert shadowed.returncode != 0 and "No module named pytest" in shadowed.stderr
    assert _no_pytest(spec, ws, env) is False
    # an interpreter without pytest is still told apart
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    assert _no_pytest(TestsSpec(python=str(bare / "bin" / "python")), ws, env) is True
