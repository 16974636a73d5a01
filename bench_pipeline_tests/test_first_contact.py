"""First contact: the numbers a new user reads are right, and faults during a run or in the
warehouse end in one clear line or an infrastructure outcome, never a traceback or a 0 the
agent did not earn."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from bench_pipeline.results.recommend import recommend
from bench_pipeline_tests.conftest import run_bench

DEMO = "launches/demo.yaml"
TASK = "benchmarks/invoices/tasks/amount-precision.yaml"
BENCH = [str(Path(sys.executable).with_name("bench"))]  # the console script users run


def _launch(factory: Path, name: str, body: str) -> Path:
    path = factory / "launches" / f"{name}.yaml"
    path.write_text("kind: BenchmarkLaunch\nsuite: invoices\n" + textwrap.dedent(body))
    return path


def _trials(home: Path) -> pd.DataFrame:
    files = sorted((home / "warehouse" / "trials").rglob("*.parquet"))
    return (
        pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
        if files
        else pd.DataFrame()
    )


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, seeded_example: Path) -> dict:
    """The demo launch run once: its home, its results JSON and its trials."""
    import shutil

    root = tmp_path_factory.mktemp("demo")
    example = root / "example"
    shutil.copytree(seeded_example, example, symlinks=True)
    home = root / "home"
    env = {**os.environ, "BENCH_HOME": str(home), "DAGSTER_HOME": str(home / "dagster_home")}
    proc = subprocess.run(
        [*BENCH, "run", str(example / "factory" / DEMO), "--json", "--quiet"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    return {
        "home": home,
        "env": env,
        "results": json.loads(proc.stdout),
        "factory": example / "factory",
    }


# --------------------------------------------------------------------------- numbers


def test_estimate_counts_the_trials_the_run_executes_with_include_baseline(
    factory: Path, bench_home: Path
) -> None:
    launch = _launch(
        factory,
        "with-originals",
        """\
        configs:
          - {id: noop, agent: noop}
        tasks: [amount-precision, pagination]
        repetitions: 1
        include_baseline: true
        """,
    )
    code, out, err = run_bench("estimate", str(launch), "--json", home=bench_home)
    assert code == 0, err
    estimate = json.loads(out)
    code, _, err = run_bench("run", str(launch), "--quiet", home=bench_home)
    assert code == 0, err
    executed = _trials(bench_home)
    assert estimate["trials"] == len(executed) == 4
    assert sorted(c["config_id"] for c in estimate["per_config"]) == ["noop", "original"]
    # validate says the same number.
    code, out, _ = run_bench("validate", str(launch), home=bench_home)
    assert code == 0 and "4 trials (2 tasks x 2 configs x 1 reps)" in out


def test_time_and_attempts_average_only_trials_that_ran(demo: dict) -> None:
    rows = {r["config_id"]: r for r in demo["results"]["config_table"]}
    trials = _trials(demo["home"])
    replay = trials[trials["config_id"] == "replay"]
    ran = replay[replay["iterations"] >= 1]
    assert 0 < len(ran) < len(replay)  # the demo's replay has tasks without a recorded original
    assert rows["replay"]["avg_iterations"] == pytest.approx(ran["iterations"].mean())
    assert rows["replay"]["avg_duration_seconds"] == pytest.approx(ran["duration_seconds"].mean())


def test_replay_rows_carry_the_models_of_the_recorded_originals(demo: dict) -> None:
    import yaml

    recorded = {}
    for f in (demo["factory"] / "benchmarks/invoices/tasks").glob("*.yaml"):
        data = yaml.safe_load(f.read_text())
        if data.get("original"):
            recorded[data["id"]] = data["original"]["model"]
    trials = _trials(demo["home"])
    replay = trials[(trials["config_id"] == "replay") & (trials["outcome"] == "succeeded")]
    assert len(replay) == 2 * len(recorded)
    assert {r.task_id: r.model for r in replay.itertuples()} == recorded
    # The README's "cost per model" query now puts the spend under the model.
    con = duckdb.connect(str(demo["home"] / "warehouse" / "bench.duckdb"), read_only=True)
    by_model = dict(con.sql("SELECT model, sum(cost_usd) FROM trials GROUP BY model").fetchall())
    assert by_model.get("claude-sonnet-4-5", 0) > 0


def test_controls_are_never_recommended_and_none_qualifies_says_why(demo: dict) -> None:
    recs = demo["results"]["recommendations"]
    assert set(recs["controls"]) == {"reference", "noop"}
    picks = [
        recs[k]["config_id"] for k in ("best_quality", "most_efficient", "lowest_cost") if recs[k]
    ]
    assert "reference" not in picks and "noop" not in picks
    assert recs["best_quality"]["config_id"] == "replay"
    for kind in ("most_efficient", "lowest_cost"):
        assert recs[kind] is None and "unknown for replay" in recs["reasons"][kind]
    rows = {r["config_id"]: r for r in demo["results"]["config_table"]}
    assert rows["reference"]["is_control"] and not rows["replay"]["is_control"]


def _table(rows: list[dict]) -> pd.DataFrame:
    base = {"overall_ci_low": float("nan"), "overall_ci_high": float("nan"), "cost_coverage": 1.0}
    return pd.DataFrame([{**base, **r} for r in rows])


def test_a_free_configuration_with_a_score_is_the_most_efficient() -> None:
    table = _table(
        [
            {"config_id": "local", "overall": 0.8, "avg_cost_usd": 0.0},
            {"config_id": "paid", "overall": 0.9, "avg_cost_usd": 0.16},
            {"config_id": "oracle", "overall": 1.0, "avg_cost_usd": 0.0, "is_control": True},
        ]
    )
    recs = recommend(table)
    assert recs["most_efficient"]["config_id"] == "local"
    assert recs["most_efficient"]["overall_per_usd"] is None  # free, not a division by zero
    assert recs["best_quality"]["config_id"] == "paid"
    assert recs["lowest_cost"]["config_id"] == "local"


def test_only_controls_give_no_pick_and_a_reason() -> None:
    table = _table(
        [
            {"config_id": "reference", "overall": 1.0, "avg_cost_usd": 0.0, "is_control": True},
            {"config_id": "noop", "overall": 0.0, "avg_cost_usd": 0.0, "is_control": True},
        ]
    )
    recs = recommend(table)
    for kind in ("best_quality", "most_efficient", "lowest_cost"):
        assert recs[kind] is None
        assert "controls are never recommended" in recs["reasons"][kind]


def test_the_originals_are_not_called_baseline(demo: dict) -> None:
    proc = subprocess.run(
        [*BENCH, "results", "--baseline", "none"], capture_output=True, text=True, env=demo["env"]
    )
    assert proc.returncode == 0, proc.stderr
    assert "replay (original)" in proc.stdout and "(baseline)" not in proc.stdout
    assert "baseline none" in proc.stdout  # "baseline" is only the pinned run


def test_a_running_run_says_how_far_it_is(demo: dict, tmp_path: Path) -> None:
    import shutil

    home = tmp_path / "home"
    shutil.copytree(demo["home"] / "warehouse", home / "warehouse")
    run_id = demo["results"]["run"]["run_id"]
    status = home / "warehouse" / "run_status" / f"{run_id}.json"
    status.write_text(json.dumps({"run_id": run_id, "status": "running", "pid": os.getpid()}))
    # Half the files are not written yet (a file holds one trial's row, or a batch of quick
    # trials' rows).
    import pyarrow.parquet as pq

    files = sorted((home / "warehouse" / "trials").rglob("*.parquet"))
    for f in files[: len(files) // 2]:
        f.unlink()
    written = sum(pq.ParquetFile(f).metadata.num_rows for f in files[len(files) // 2 :])
    assert 0 < written < 84
    env = {**demo["env"], "BENCH_HOME": str(home)}
    proc = subprocess.run([*BENCH, "results"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert f"running: {written} of 84 trials finished" in proc.stdout


# --------------------------------------------------------------------------- the CLI at first contact


@pytest.mark.parametrize("args", [["results", "--json"], ["results", "--by-tag"]])
def test_piping_into_head_is_silent_and_exits_0(demo: dict, args: list[str]) -> None:
    command = " ".join([*BENCH, *args])
    proc = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {command} | head -3"],
        capture_output=True,
        text=True,
        env=demo["env"],
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr
    assert len(proc.stdout.splitlines()) == 3


def test_no_empty_folders_stay_under_work_after_a_run(demo: dict) -> None:
    work = demo["home"] / "work"
    left = [p for p in work.rglob("*")] if work.exists() else []
    assert left == [], left[:5]


def test_validate_from_a_folder_that_is_no_factory_says_what_to_pass(bench_home: Path) -> None:
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [*BENCH, "validate", "--reference"],
        cwd=root,
        capture_output=True,
        text=True,
        env={**os.environ, "BENCH_HOME": str(bench_home)},
    )
    assert proc.returncode == 2
    assert "not a factory" in proc.stderr and "bench validate data/" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_an_unwritable_state_folder_is_refused_before_anything_runs(
    factory: Path, tmp_path: Path
) -> None:
    a_file = tmp_path / "not-a-folder"
    a_file.write_text("")
    for home, expected in (
        (a_file, "is a file, not a folder"),
        (a_file / "sub", "cannot write there"),
    ):
        for args in (["validate", str(factory)], ["run", str(factory / DEMO)], ["results"]):
            env = {**os.environ, "BENCH_HOME": str(home)}
            proc = subprocess.run([*BENCH, *args], capture_output=True, text=True, env=env)
            assert proc.returncode == 2, (args, proc.stderr)
            assert expected in proc.stderr and "BENCH_HOME" in proc.stderr
            assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_an_output_file_that_cannot_be_written_is_refused_before_the_first_trial(
    factory: Path, bench_home: Path, tmp_path: Path
) -> None:
    nowhere = tmp_path / "missing-folder" / "out.json"
    code, _, err = run_bench("run", str(factory / DEMO), "--out", str(nowhere), home=bench_home)
    assert code == 2 and "--out" in err and "does not exist" in err
    assert _trials(bench_home).empty  # nothing ran
    code, _, err = run_bench("report", "--out", str(nowhere), home=bench_home)
    assert code == 2


@pytest.mark.parametrize("command", ["results", "report"])
def test_an_output_file_of_a_finished_run_that_cannot_be_written_is_one_line(
    command: str, demo: dict, tmp_path: Path
) -> None:
    # (`bench results RUN --out` wrote its JSON with no check: a traceback, exit 1)
    for out, expected in (
        (tmp_path / "missing-folder" / "out.json", "does not exist"),
        (tmp_path, "is a folder; give a file name"),
    ):
        proc = subprocess.run(
            [*BENCH, command, "--out", str(out)], capture_output=True, text=True, env=demo["env"]
        )
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith("error: --out: ") and expected in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "missing-folder").exists()


@pytest.mark.parametrize("value", ["0", "65"])
def test_parallel_on_the_command_line_has_the_launch_files_range(
    value: str, factory: Path, bench_home: Path
) -> None:
    # (`run --parallel 1000` was taken: past the 64 a launch's max_parallel may be; `validate
    # --parallel 0` ran one at a time)
    for args, expected in (
        (["run", str(factory / DEMO)], "error: --parallel: must be between 1 and 64\n"),
        (["estimate", str(factory / DEMO)], "error: --parallel: must be between 1 and 64\n"),
        (["validate", str(factory)], "error: --parallel: give 1 to 64 tasks at once\n"),
    ):
        code, out, err = run_bench(*args, "--parallel", value, home=bench_home)
        assert (code, out, err) == (2, "", expected), args
    assert _trials(bench_home).empty


@pytest.mark.parametrize("value", ["nan", "0", "86401"])
def test_timeout_on_the_command_line_has_the_agent_files_range(
    value: str, factory: Path, bench_home: Path
) -> None:
    # (`--timeout nan` was taken: a trial no clock could stop)
    code, out, err = run_bench("run", str(factory / DEMO), "--timeout", value, home=bench_home)
    assert (code, out, err) == (2, "", "error: --timeout: must be between 1 and 86400 seconds\n")
    assert _trials(bench_home).empty


def test_a_command_run_in_a_folder_removed_since_is_one_line(demo: dict, tmp_path: Path) -> None:
    # (it ran to its last line and died there on the current folder: a traceback, exit 1)
    gone = tmp_path / "gone"
    gone.mkdir()
    script = 'cd "$1" && rmdir "$1" && exec "$2" results'
    proc = subprocess.run(
        ["bash", "-c", script, "bash", str(gone), BENCH[0]],
        capture_output=True,
        text=True,
        env=demo["env"],
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (
        "error: the current folder no longer exists (removed or moved since this shell "
        "entered it); cd to one that does\n"
    )


def test_max_cost_must_be_a_cost(factory: Path, bench_home: Path) -> None:
    proc = subprocess.run(
        [*BENCH, "run", str(factory / DEMO), "--max-cost", "-1"],
        capture_output=True,
        text=True,
        env={**os.environ, "BENCH_HOME": str(bench_home)},
    )
    assert proc.returncode == 2 and "not a cost" in proc.stderr
    assert _trials(bench_home).empty


def test_an_unknown_baseline_run_is_one_line(demo: dict) -> None:
    proc = subprocess.run(
        [*BENCH, "results", "--baseline", "nosuch-run"],
        capture_output=True,
        text=True,
        env=demo["env"],
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"error: --baseline: no benchmark run 'nosuch-run' in {demo['home'] / 'warehouse'}; "
        "see `bench results --list`, or give 'none' for no baseline"
    )


# --------------------------------------------------------------------------- faults


def test_a_corrupt_warehouse_file_is_named_and_the_other_runs_stay_readable(
    demo: dict, tmp_path: Path
) -> None:
    import shutil

    home = tmp_path / "home"
    shutil.copytree(
        demo["home"], home, symlinks=True, ignore=shutil.ignore_patterns("dagster_home")
    )
    env = {**demo["env"], "BENCH_HOME": str(home), "DAGSTER_HOME": str(home / "dagster_home")}
    first = demo["results"]["run"]["run_id"]
    # A second, healthy run of the same suite.
    proc = subprocess.run(
        [
            *BENCH,
            "run",
            str(demo["factory"] / DEMO),
            "--max",
            "1",
            "--repeats",
            "1",
            "--quiet",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    second = json.loads(proc.stdout)["run"]["run_id"]
    victim = sorted((home / "warehouse" / "trials" / first).rglob("*.parquet"))[0]
    victim.write_bytes(victim.read_bytes()[:40])  # truncated, as by a full disk

    for args in (
        ["results", first],
        ["compare", first],
        ["report", first, "--out", str(tmp_path / "r.html")],
        ["rescore", first],
    ):
        proc = subprocess.run([*BENCH, *args], capture_output=True, text=True, env=env)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr
        line = proc.stderr.strip().splitlines()[-1]
        assert str(victim) in line and "move it aside" in line, (args, line)
    proc = subprocess.run([*BENCH, "results", "--list"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0 and first in proc.stdout and second in proc.stdout
    proc = subprocess.run([*BENCH, "results", second], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr

    # A run's manifest or status (JSON) damaged too: named the same way (they were tracebacks),
    # and moved aside as the line says, the run is listed without them and nothing else breaks,
    # the second run's baseline included.
    def bench(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*BENCH, *args], capture_output=True, text=True, env=env)

    assert bench("baseline", "set", "invoices", first).returncode == 0
    warehouse = home / "warehouse"
    for damaged, listed_as in (
        (warehouse / "run_status" / f"{first}.json", "unreadable status"),
        (warehouse / "manifests" / f"{first}.json", "unreadable manifest"),
    ):
        damaged.write_bytes(damaged.read_bytes()[:10])
        said = (
            f"{damaged}: not a readable JSON file (Unterminated string starting at: "
            f"line 2 column 3 (char 4)); move it aside to recover (`mv {damaged} "
            f"{damaged}.corrupt`): what it records is lost, every other file is intact\n"
        )
        proc = bench("results", first)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        # (or the trial file damaged above, still in place, when the run reads it first)
        assert proc.stderr == f"error: {said}" or (
            proc.stderr.startswith(f"error: {victim}: not a readable Parquet file")
            and len(proc.stderr.splitlines()) == 1
        ), proc.stderr
        # (the list shows the other runs: this one as unreadable, its file named)
        proc = bench("results", "--list")
        assert proc.returncode == 0 and proc.stderr == f"warning: {said}", proc.stderr
        assert proc.stdout.splitlines()[0].endswith(listed_as), proc.stdout
        damaged.rename(damaged.with_name(damaged.name + ".corrupt"))
    listed = bench("results", "--list")
    assert listed.returncode == 0, listed.stderr
    assert [ln.split()[-1] for ln in listed.stdout.splitlines()] == ["manifest", "finished"]
    # (the report computes the tables again: against the pinned baseline, which is gone)
    report = bench("report", second, "--out", str(tmp_path / "second.html"))
    assert report.returncode == 0, report.stderr
    note = f"baseline {first} has no manifest in the warehouse: not compared"
    assert note in (tmp_path / "second.html").read_text()
    assert bench("results", second).returncode == 0


def test_a_reference_that_does_not_apply_fails_validate_and_is_a_task_error(
    factory: Path, bench_home: Path
) -> None:
    patch = factory / "benchmarks/invoices/references/amount-precision.patch"
    # A context line the base does not have: the hunk no longer applies.
    patch.write_text(
        patch.read_text().replace("     if not amount.is_finite():", "     if amount.is_nan():", 1)
    )
    code, out, err = run_bench("validate", str(factory), home=bench_home)
    assert code == 1, (out, err)
    assert (
        "FAIL  invoices/amount-precision: references/amount-precision.patch does not apply" in out
    )
    launch = _launch(
        factory,
        "broken-ref",
        """\
        configs:
          - {id: reference, agent: reference}
        tasks: [amount-precision]
        repetitions: 1
        """,
    )
    code, out, err = run_bench("run", str(launch), "--json", "--quiet", home=bench_home)
    assert code == 0, err
    (trial,) = _trials(bench_home).to_dict("records")
    assert trial["outcome"] == "task_error" and "does not apply" in trial["error"]
    row = json.loads(out)["config_table"][0]
    assert row["scored_checks"] == 0 and row["of_checks"] == 1  # not scored, never a 0


APPLY_AND_SABOTAGE = """
import pathlib, subprocess, sys
factory, workspace = pathlib.Path(sys.argv[1]), sys.argv[2]
suite = factory / "benchmarks" / "invoices"
patch = (suite / "references" / "amount-precision.patch").read_text()
subprocess.run(["git", "apply", "-"], input=patch, text=True, cwd=workspace, check=True)
# Someone edits the factory's grader while the run is going.
(suite / "graders" / "amount_validation.py").write_text("import sys\\nsys.exit(1)\\n")
"""


def test_a_grader_edited_during_a_run_does_not_change_what_trials_grade_with(
    factory: Path, bench_home: Path
) -> None:
    script = factory / "agents" / "sabotage.py"
    script.write_text(APPLY_AND_SABOTAGE)
    (factory / "agents" / "sabotage.yaml").write_text(
        # `process`: this agent stands for someone editing the factory mid-run, which a sandboxed
        # agent could not do.
        f"kind: command\ncommand: [python, '{script}', '{factory}', '{{workspace}}']\nmax_iterations: 1\n"
        "isolation: process\n"
    )
    launch = _launch(
        factory,
        "sabotage",
        """\
        configs:
          - {id: sabotage, agent: sabotage, max_parallel: 1}
        tasks: [amount-precision]
        repetitions: 3
        """,
    )
    code, out, err = run_bench("run", str(launch), "--json", "--quiet", home=bench_home)
    assert code == 0, err
    trials = _trials(bench_home)
    assert list(trials["outcome"]) == ["succeeded"] * 3
    row = json.loads(out)["config_table"][0]
    # Every trial graded with the grader as frozen at launch: the fix passes each time.
    assert row["score_checks"] == 1.0 and row["scored_checks"] == 3


def test_a_run_that_fails_in_a_step_is_one_line_naming_the_error(
    factory: Path, bench_home: Path
) -> None:
    # A score file of a finished run damaged (a disk fault, a copy cut short): the rescore's
    # step fails. It printed Dagster's console log (two stack traces) and then a traceback of
    # its own, saying only that step "scores" failed.
    launch = _launch(
        factory,
        "one",
        "configs:\n  - {id: reference, agent: reference}\nrepetitions: 1\n"
        "tasks: [amount-precision]\nscorers: [checks]\n",
    )
    env = {**os.environ, "BENCH_HOME": str(bench_home), "BENCH_AUTO_SERVE": "0"}
    done = subprocess.run(
        [*BENCH, "run", str(launch), "--quiet"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    (damaged,) = (bench_home / "warehouse" / "scores").rglob("*.parquet")
    damaged.write_bytes(damaged.read_bytes()[:100])
    proc = subprocess.run([*BENCH, "rescore"], capture_output=True, text=True, env=env)
    assert proc.returncode == 2, proc.stderr  # (a file to mend: as when read outside a run)
    assert "Traceback" not in proc.stderr and "Stack Trace" not in proc.stderr, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: rescore of partition reference|1 failed: step scores: "), last
    assert f"CorruptFileError: {damaged}: not a readable Parquet file" in last, last
    assert "move it aside to recover" in last and "its logs in `bench ui`" in last, last
    assert [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")] == [last]
    # The same in a run's own step, with the command that finishes the run once it is mended.
    (trials,) = (bench_home / "warehouse" / "trials").rglob("*.parquet")
    trials.write_bytes(trials.read_bytes()[:100])
    run_id = trials.relative_to(bench_home / "warehouse" / "trials").parts[0]
    proc = subprocess.run(
        [*BENCH, "run", "--resume", run_id, "--quiet"], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: run {run_id} failed: step launch: CorruptFileError: "), last
    assert last.endswith(f"; once that is mended, `bench run --resume {run_id}`"), last


def test_a_failed_step_exits_2_only_when_its_error_is_a_file_to_mend() -> None:
    import dagster as dg

    from bench_pipeline.defs.launcher import check_success
    from bench_pipeline.formats.errors import BenchInputError, RunFailed
    from bench_pipeline.warehouse.store import CorruptFileError

    def failing(error: Exception) -> dg.ExecuteInProcessResult:
        @dg.op(name="grade")
        def grade() -> None:
            raise error

        @dg.job(name="fails")
        def fails() -> None:
            grade()

        return fails.execute_in_process(raise_on_error=False)

    cases = (
        (ValueError("a grader's fault"), False, "ValueError: a grader's fault"),
        (BenchInputError("f.yaml", "k", "bad"), True, "BenchInputError: f.yaml: k: bad"),
        (CorruptFileError(Path("/w/x.parquet"), OSError("cut")), True, "CorruptFileError: "),
    )
    for error, bad_input, shown in cases:
        with pytest.raises(RunFailed) as raised:
            check_success(failing(error), "a run")
        assert raised.value.bad_input is bad_input
        assert str(raised.value).startswith(f"a run failed: step grade: {shown}"), raised.value
