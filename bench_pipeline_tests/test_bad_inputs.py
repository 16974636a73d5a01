"""Bad input gets one clear line naming the file and field, exit code 2, and nothing is written."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from bench_pipeline_tests.conftest import run_bench

ROOT = Path(__file__).resolve().parents[1]
TASK = "benchmarks/invoices/tasks/amount-precision.yaml"
DEMO = "launches/demo.yaml"


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def malformed_yaml(f: Path) -> str:
    (f / TASK).write_text("id: amount-precision\ntitle: [unclosed\n")
    return "malformed YAML"


def unknown_key(f: Path) -> str:
    _edit(f / TASK, "title:", "titel: x\ntitle:")
    return "unknown key; did you mean 'title'?"


def missing_base_ref(f: Path) -> str:
    text = (f / TASK).read_text()
    (f / TASK).write_text(
        "\n".join(ln for ln in text.splitlines() if not ln.startswith("base_ref:"))
    )
    return "base_ref: is required"


def ref_does_not_exist(f: Path) -> str:
    _edit(f / TASK, "base_ref: v1.0", "base_ref: v9.9")
    return "'v9.9' does not exist"


def dotdot_path(f: Path) -> str:
    _edit(f / TASK, "files: [graders/", "files: [../../../../etc/")
    return "escapes the factory"


def absolute_path(f: Path) -> str:
    _edit(f / TASK, "files: [graders/", "files: [/etc/")
    return "is an absolute path"


def symlink_out(f: Path) -> str:
    outside = f.parent / "outside.py"
    outside.write_text("print('outside')\n")
    os.symlink(outside, f / "benchmarks/invoices/graders/evil.py")
    _edit(f / TASK, "files: [graders/amount_validation.py]", "files: [graders/evil.py]")
    return "symlink pointing outside the factory"


def duplicate_task_ids(f: Path) -> str:
    text = (f / TASK).read_text()
    (f / "benchmarks/invoices/tasks/copy.yaml").write_text(
        "id: amount-precision\n" + text.replace("id: amount-precision\n", "")
    )
    return "duplicate task id 'amount-precision'"


def too_many_trials(f: Path) -> str:
    _edit(f / DEMO, "repetitions: 2", "repetitions: 10")
    configs = "\n".join(f"  - {{id: c{i}, agent: noop}}" for i in range(5))
    _edit(f / DEMO, "  - {id: noop, agent: noop}", "  - {id: noop, agent: noop}\n" + configs)
    return "a launch runs at most 500"


def unknown_scorer(f: Path) -> str:
    _edit(f / DEMO, "scorers: [checks]", "scorers: [checks, chekcs2]")
    return "unknown scorer 'chekcs2'"


def scorer_listed_twice(f: Path) -> str:
    # (it graded every trial twice: a judge's calls paid twice for rows of which one counts)
    _edit(f / DEMO, "scorers: [checks]", "scorers: [checks, checks]")
    return "scorers[1]: 'checks' is listed twice; list each scorer once"


def workflow_scorer_file_broken(f: Path) -> str:
    # (`validate` passed it and `run` then refused it: both refuse it now, the same way)
    (f / "scorers").mkdir()
    (f / "scorers" / "lint.yaml").write_text("command: [ruff, check\n")
    _edit(f / DEMO, "scorers: [checks]", 'scorers: [checks, "workflow:lint"]')
    return "malformed YAML at line 2, column 1: expected ',' or ']'"


def not_utf8(f: Path) -> str:
    (f / TASK).write_bytes((f / TASK).read_bytes() + b"\ncriteria: ['caf\xe9']\n")
    return "not UTF-8"


def bad_config_id(f: Path) -> str:
    _edit(f / DEMO, "{id: noop, agent: noop}", "{id: 'no|op', agent: noop}")
    return "is not a valid id"


def budget_not_a_finite_number(f: Path) -> str:
    # (YAML's .nan passed the range check: a budget no spend is ever above)
    _edit(f / "agents/noop.yaml", "kind: noop", "kind: noop\nbudget_usd: .nan")
    return "budget_usd: expected a finite number, got nan"


def assertion_bound_not_finite(f: Path) -> str:
    (f / TASK).write_bytes(
        (f / TASK).read_bytes() + b"\nassert:\n  - {type: min_chars, value: .nan}\n"
    )
    return "assert[0].value: expected a finite number for min_chars"


def repetitions_far_out_of_range(f: Path) -> str:
    _edit(f / DEMO, "repetitions: 2", "repetitions: 100000000")
    return "repetitions: 100000000 is out of range; use a value between 1 and 10"


def unknown_agent_kind(f: Path) -> str:
    _edit(f / "agents/noop.yaml", "kind: noop", "kind: nope")
    return "'nope' is not allowed"


def reserved_tag(f: Path) -> str:
    _edit(f / TASK, "tags: [", "tags: ['-', ")
    return "reserved for untagged tasks"


def task_listed_twice(f: Path) -> str:
    _edit(
        f / DEMO,
        "max_parallel: 2",
        "max_parallel: 2\ntasks: [amount-precision, pagination, amount-precision]",
    )
    return "'amount-precision' is listed twice"


def id_with_trailing_newline(f: Path) -> str:
    _edit(f / TASK, "id: amount-precision\n", 'id: "amount-precision\\n"\n')
    return "is not a valid id"


def suite_agent_missing(f: Path) -> str:
    _edit(f / "benchmarks/invoices/suite.yaml", "agent: coder", "agent: codr")
    return "no agent file agents/codr.yaml; did you mean 'coder'?"


def check_without_id(f: Path) -> str:
    _edit(f / TASK, "  - id: AC-1\n    description:", "  - description:")
    return "checks[0].id: is required"


def prompt_over_the_size_limit(f: Path) -> str:
    big = "x" * (20 * 1024 * 1024)
    _edit(f / TASK, "prompt: |\n", f"prompt: {big}\nunused: |\n")
    return "a factory file may have at most"


def long_prompt_field(f: Path) -> str:
    big = "y" * (3 * 1024 * 1024)
    text = (f / TASK).read_text()
    start = text.index("prompt: |")
    end = text.index("tags:")
    (f / TASK).write_text(text[:start] + f"prompt: {big}\n" + text[end:])
    return "the limit is 2,097,152 bytes"


def prompt_too_long_for_an_argument(f: Path) -> str:
    (f / "agents/argv.yaml").write_text(
        "kind: command\ncommand: [python, -c, 'pass', '{prompt}']\n"
    )
    _edit(
        f / DEMO,
        "  - {id: noop, agent: noop}",
        "  - {id: noop, agent: noop}\n  - {id: argv, agent: argv}",
    )
    text = (f / TASK).read_text()
    start = text.index("prompt: |")
    end = text.index("tags:")
    (f / TASK).write_text(text[:start] + f"prompt: {'z' * 200_000}\n" + text[end:])
    return "more than one command-line argument may hold"


CASES: list[Callable[[Path], str]] = [
    malformed_yaml,
    unknown_key,
    missing_base_ref,
    ref_does_not_exist,
    dotdot_path,
    absolute_path,
    symlink_out,
    duplicate_task_ids,
    too_many_trials,
    unknown_scorer,
    scorer_listed_twice,
    workflow_scorer_file_broken,
    not_utf8,
    bad_config_id,
    budget_not_a_finite_number,
    assertion_bound_not_finite,
    repetitions_far_out_of_range,
    unknown_agent_kind,
    reserved_tag,
    task_listed_twice,
    id_with_trailing_newline,
    suite_agent_missing,
    check_without_id,
    prompt_over_the_size_limit,
    long_prompt_field,
    prompt_too_long_for_an_argument,
]


@pytest.mark.parametrize("case", CASES, ids=[c.__name__ for c in CASES])
def test_bad_input_is_one_clear_line_exit_2_and_nothing_written(
    case, factory: Path, bench_home: Path
) -> None:
    expected = case(factory)
    code, out, err = run_bench("run", str(factory / DEMO), home=bench_home)
    assert code == 2, (out, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert expected in lines[0], lines[0]
    # The line names the file (relative to the factory) that holds the problem.
    named = ("tasks/", "launches/", "agents/", "scorers/", "suite.yaml")
    assert any(name in lines[0] for name in named), lines[0]
    warehouse = bench_home / "warehouse"
    assert not warehouse.exists() or not list(warehouse.rglob("*.parquet"))
    # validate reports the same problem the same way.
    vcode, _, verr = run_bench("validate", str(factory), home=bench_home)
    assert vcode == 2 and expected in verr


def test_unknown_command_line_run_is_exit_2(bench_home: Path) -> None:
    code, _, err = run_bench("results", "no-such-run", home=bench_home)
    assert code == 2
    assert "no benchmark run 'no-such-run'" in err


ONE_TRIAL = """kind: BenchmarkLaunch
suite: invoices
configs:
  - {id: reference, agent: reference}
repetitions: 1
tasks: [amount-precision]
scorers: [checks]
"""
# dagster.yaml says "Edit freely": what an edit Dagster cannot use gives, and the line's start.
DAGSTER_YAMLS = {
    "malformed_yaml": ("run_storage: [oops\n", "malformed YAML at line 2, column 1: expected ','"),
    "unknown_key": ("run_storag: {}\n", 'Received unexpected config entry "run_storag"'),
    "storage_not_importable": (
        "run_storage:\n  module: no_such_module\n  class: Storage\n",
        "Couldn't import module no_such_module",
    ),
}


@pytest.mark.parametrize("case", DAGSTER_YAMLS)
def test_a_dagster_yaml_dagster_cannot_use_is_one_line_exit_2_and_starts_no_run(
    case: str, factory: Path, bench_home: Path
) -> None:
    text, expected = DAGSTER_YAMLS[case]
    config = bench_home / "dagster_home" / "dagster.yaml"
    config.parent.mkdir()
    config.write_text(text)
    (factory / "launches" / "one.yaml").write_text(ONE_TRIAL)
    launch = str(factory / "launches" / "one.yaml")
    code, out, err = run_bench("run", launch, home=bench_home)
    assert code == 2, (out, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"error: {config}: ") and expected in lines[0], lines[0]
    assert lines[0].endswith("; fix it, or remove it and bench writes its default instance there")
    # Nothing started: no run to list, resume or show (it was saved before the instance
    # opened, and `bench results` then named a run that "has no trials yet").
    assert not (bench_home / "warehouse").exists() or not list(
        (bench_home / "warehouse").rglob("*.json")
    )
    assert run_bench("results", "--list", home=bench_home)[1] == ""
    assert config.read_text() == text  # (the user's file: bench never overwrites it)
    # The server's warm-up opens the same instance: the same line, exit 2, no traceback.
    serve = subprocess.run(
        [str(Path(sys.executable).parent / "bench"), "--home", str(bench_home), "serve"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert serve.returncode == 2, serve.stderr
    assert serve.stderr.splitlines()[-1] == lines[0], serve.stderr
    assert "Traceback" not in serve.stderr
    assert run_bench("ui", home=bench_home)[::2] == (2, lines[0] + "\n")  # (before its exec)
    # Removed, as the line says: bench writes its own and the same command runs.
    config.unlink()
    code, out, err = run_bench("run", launch, "--quiet", home=bench_home)
    assert code == 0, err
    assert "reference" in out and "Dagster" not in err
    # A rescore of that run with the file broken again: the same line, and not a file written.
    before = sorted(p for p in bench_home.rglob("*") if "dagster_home" not in p.parts)
    config.write_text(text)
    code, out, err = run_bench("rescore", home=bench_home)
    assert code == 2 and err.splitlines() == lines, err
    assert sorted(p for p in bench_home.rglob("*") if "dagster_home" not in p.parts) == before


def test_a_dagster_home_that_is_not_a_folder_is_one_line_exit_2(
    factory: Path, bench_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    monkeypatch.setenv("DAGSTER_HOME", str(a_file))
    code, out, err = run_bench("run", str(factory / DEMO), home=bench_home)
    assert code == 2, (out, err)
    assert err.strip() == (
        f"error: DAGSTER_HOME: {a_file} cannot hold the Dagster instance (File exists); "
        "set it to a folder you can write, or unset it"
    )
    assert not (bench_home / "warehouse").exists() or not list(
        (bench_home / "warehouse").rglob("*.json")
    )
