"""A damaged or foreign warehouse file (a manifest or status JSON of another shape, a Parquet
file of another table) is named in one line with the `mv` that sets it aside, exit 2, and the
other runs stay readable: listed, shown, queried through every documented view."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bench_pipeline_tests.conftest import ROOT, run_bench

SMALL = """\
kind: BenchmarkLaunch
suite: invoices
configs:
  - {id: reference, agent: reference}
  - {id: noop, agent: noop}
tasks: [amount-precision]
repetitions: 1
scorers: [checks]
"""


@pytest.fixture()
def runs(factory: Path, bench_home: Path) -> tuple[str, str]:
    """Two finished runs of the small launch, oldest first."""
    launch = factory / "launches" / "small.yaml"
    launch.write_text(SMALL)
    ids = []
    for _ in range(2):
        code, out, err = run_bench("run", str(launch), "--quiet", "--json", home=bench_home)
        assert code == 0, err
        ids.append(json.loads(out)["run"]["run_id"])
    return ids[0], ids[1]


def _refused(args: list[str], damaged: Path, home: Path, problem: str) -> None:
    """`bench *args` exits 2 with the one line that names `damaged` and sets it aside."""
    code, out, err = run_bench(*args, home=home)
    assert code == 2, (args, out, err)
    assert "Traceback" not in err
    # (`rescore` says first what it is about to grade)
    line = err.splitlines()[-1]
    assert [ln for ln in err.splitlines() if ln.startswith("error")] == [line], (args, err)
    assert line.startswith(f"error: {damaged}: not a readable {problem}"), (args, err)
    assert f"(`mv {damaged} {damaged}.corrupt`)" in line, (args, err)


def _listed(home: Path) -> tuple[dict[str, str], str]:
    """`bench results --list`: run id -> the status it shows, and its stderr."""
    code, out, err = run_bench("results", "--list", home=home)
    assert code == 0, err
    return {
        ln.split()[0]: ln.split("task set ")[1].split(None, 1)[1] for ln in out.splitlines()
    }, err


def test_a_manifest_of_another_shape_is_named_as_a_damaged_one_is(
    runs: tuple[str, str], bench_home: Path, tmp_path: Path
) -> None:
    first, second = runs
    manifest = bench_home / "warehouse" / "manifests" / f"{first}.json"
    every = (
        ["results", first],
        ["results", first, "--json"],
        ["compare", first],
        ["report", first, "--out", str(tmp_path / "r.html")],
        ["rescore", first, "--all"],
    )
    for content, commands in (("[]", every), ("{}", every[:1]), ('"x"', every[:1])):
        manifest.write_text(content)
        for args in commands:
            _refused(args, manifest, bench_home, "JSON file (not a run manifest: ")
    manifest.unlink()
    manifest.mkdir()  # (a folder where the file should be)
    _refused(["results", first], manifest, bench_home, "JSON file (Is a directory)")
    assert run_bench("results", second, home=bench_home)[0] == 0


def test_a_trials_file_of_another_table_is_named_and_the_other_runs_stay_readable(
    runs: tuple[str, str], bench_home: Path
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    first, second = runs
    trials = bench_home / "warehouse" / "trials" / first
    foreign = trials / "reference" / "rep1" / "amount-precision.parquet"
    assert foreign.is_file()
    pq.write_table(pa.table({"x": [1]}), foreign)
    problem = "Parquet file (no run_id, trial_id column: a file of another table)"
    for args in (["results", first], ["compare", first], ["rescore", first]):
        _refused(args, foreign, bench_home, problem)
    assert run_bench("results", second, home=bench_home)[0] == 0
    assert set(_listed(bench_home)[0]) == {first, second}


def test_a_damaged_status_file_is_listed_as_such_and_blocks_no_other_run(
    runs: tuple[str, str], bench_home: Path
) -> None:
    first, second = runs
    status = bench_home / "warehouse" / "run_status" / f"{first}.json"
    for content in ("zz", "[]"):
        status.write_text(content)
        statuses, err = _listed(bench_home)
        assert statuses == {first: "unreadable status", second: "finished"}
        assert err.startswith(f"warning: {status}: not a readable JSON file"), err
        assert f"(`mv {status} {status}.corrupt`)" in err and len(err.splitlines()) == 1
        # the latest run is the other one: shown; the damaged one is named
        code, out, err = run_bench("results", home=bench_home)
        assert code == 0 and f"Run {second}" in out, err
        _refused(["results", first], status, bench_home, "JSON file")


def test_the_list_of_runs_as_json_is_json(runs: tuple[str, str], bench_home: Path) -> None:
    code, out, err = run_bench("results", "--list", "--json", home=bench_home)
    assert code == 0, err
    listed = json.loads(out)
    assert [r["run_id"] for r in listed] == list(runs)
    assert set(listed[0]) == {
        "run_id",
        "suite",
        "launch",
        "created_at",
        "task_set_revision",
        "status",
    }
    assert {(r["suite"], r["launch"], r["status"]) for r in listed} == {
        ("invoices", "small", "finished")
    }
    text = run_bench("results", "--list", home=bench_home)[1].splitlines()
    assert [ln.split()[-1] for ln in text] == [r["status"] for r in listed]


def test_every_documented_view_exists_before_its_table_has_a_file(
    runs: tuple[str, str], bench_home: Path
) -> None:
    import duckdb

    from bench_pipeline.warehouse import schemas

    warehouse = bench_home / "warehouse"
    assert not (warehouse / "test_results").exists()  # (no task here has a `tests` criterion)
    readme = (ROOT / "README.md").read_text()
    queries = [q for q in re.findall(r"```sql\n(.*?)```", readme, re.S) if "test_results" in q]
    assert queries
    con = duckdb.connect(str(warehouse / "bench.duckdb"), read_only=True)
    try:
        for sql in queries:
            assert con.execute(sql).fetchall() == []
        described = con.execute("DESCRIBE test_results").fetchall()
        assert [row[0] for row in described] == schemas.TEST_RESULTS.names
        assert con.execute("SELECT count(*) FROM trials").fetchone() == (4,)
    finally:
        con.close()


def test_a_run_whose_manifest_is_set_aside_is_listed_as_no_manifest(
    runs: tuple[str, str], bench_home: Path
) -> None:
    first, second = runs
    manifest = bench_home / "warehouse" / "manifests" / f"{first}.json"
    assert (bench_home / "warehouse" / "run_status" / f"{first}.json").is_file()
    manifest.rename(manifest.with_name(manifest.name + ".corrupt"))
    assert _listed(bench_home) == ({first: "no manifest", second: "finished"}, "")
    assert run_bench("results", second, home=bench_home)[0] == 0
