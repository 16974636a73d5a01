"""The demo launch end to end: `bench run` through Dagster, `bench results`, DuckDB, history."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import duckdb
import pytest

from bench_pipeline_tests.conftest import run_bench

# What the example factory recorded: the original answers that were right and wrong.
ORIGINALS = {
    "amount-precision": 1.0,
    "pagination": 1.0,
    "tenant-isolation": 1.0,
    "atomic-save": 0.0,
    "rate-limiter-threads": 0.0,
}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, seeded_example: Path) -> dict:
    import shutil

    root = tmp_path_factory.mktemp("demo")
    example = root / "example"
    shutil.copytree(seeded_example, example, symlinks=True)
    home = root / "home"
    mp = pytest.MonkeyPatch()
    mp.setenv("DAGSTER_HOME", str(home / "dagster_home"))
    launch = example / "factory" / "launches" / "demo.yaml"
    code, out, err = run_bench("run", str(launch), "--json", home=home)
    assert code == 0, err
    yield {"home": home, "launch": launch, "result": json.loads(out), "stderr": err}
    mp.undo()


def _grid(home: Path, run_id: str) -> dict[tuple[str, str], float | None]:
    con = duckdb.connect(str(home / "warehouse" / "bench.duckdb"), read_only=True)
    rows = con.execute(
        "SELECT task_id, config_id, avg(value) FROM scores "
        "WHERE run_id = ? AND scorer = 'checks' AND status = 'scored' GROUP BY ALL",
        [run_id],
    ).fetchall()
    con.close()
    return {(t, c): v for t, c, v in rows}


def test_reference_scores_one_noop_zero_replay_as_recorded(demo: dict) -> None:
    result = demo["result"]
    table = {row["config_id"]: row for row in result["config_table"]}
    assert table["reference"]["score_checks"] == 1.0
    assert table["noop"]["score_checks"] == 0.0
    assert table["reference"]["scored_checks"] == table["reference"]["of_checks"] == 28
    # replay is scored only where an original was recorded (5 tasks x 2 reps of 28 trials).
    assert (table["replay"]["scored_checks"], table["replay"]["of_checks"]) == (10, 28)
    assert table["replay"]["score_checks"] == pytest.approx(
        sum(ORIGINALS.values()) / len(ORIGINALS)
    )
    assert result["recommendations"]["comparable"] is False
    # Costs: the recorded originals' costs, unknown (not zero) where nothing was recorded.
    assert table["replay"]["cost_coverage"] == pytest.approx(10 / 28)
    assert "no recorded original answer" in table["replay"]["cost_unknown"]


def test_every_task_cell_matches_and_duckdb_agrees(demo: dict) -> None:
    run_id = demo["result"]["run"]["run_id"]
    grid = _grid(demo["home"], run_id)
    tasks = {t for t, _ in grid}
    assert len(tasks) == 14
    for task in tasks:
        assert grid[(task, "reference")] == 1.0
        assert grid[(task, "noop")] == 0.0
        assert grid.get((task, "replay")) == ORIGINALS.get(task)
    # The config table view gives the same numbers as `bench results --json`.
    con = duckdb.connect(str(demo["home"] / "warehouse" / "bench.duckdb"), read_only=True)
    rows = dict(
        con.execute(
            "SELECT config_id, score_checks FROM config_table WHERE run_id = ?", [run_id]
        ).fetchall()
    )
    con.close()
    expected = {r["config_id"]: r["score_checks"] for r in demo["result"]["config_table"]}
    assert rows == pytest.approx(expected)


def test_evidence_per_trial(demo: dict) -> None:
    run_id = demo["result"]["run"]["run_id"]
    trial = demo["home"] / "evidence" / run_id / "amount-precision" / "reference" / "rep1"
    patch = (trial / "changes.patch").read_text()
    assert patch.startswith("diff --git")
    checks = json.loads((trial / "checks.json").read_text())
    assert checks[0]["status"] == "passed" and checks[0]["exit_code"] == 0
    assert (trial / "attempt1" / "checks" / "AC-1.log").exists()
    meta = json.loads((trial / "metadata.json").read_text())
    assert meta["config_hash"] and meta["engine_version"] and meta["input_hashes"]
    assert meta["outcome"] == "succeeded" and meta["duration_seconds"] > 0
    noop_patch = (trial.parents[1] / "noop" / "rep1" / "changes.patch").read_text()
    assert noop_patch == ""


def test_a_second_run_adds_rows_without_touching_the_first(demo: dict) -> None:
    home = demo["home"]
    first = demo["result"]["run"]["run_id"]

    def digests() -> dict[str, str]:
        return {
            str(p.relative_to(home)): hashlib.sha256(p.read_bytes()).hexdigest()
            for table in ("trials", "scores", "check_results", "config_table")
            for p in (home / "warehouse" / table / first).rglob("*.parquet")
        }

    before = digests()
    assert before
    code, out, err = run_bench(
        "run", str(demo["launch"]), "--max", "2", "--repeats", "1", "--json", home=home
    )
    assert code == 0, err
    second = json.loads(out)["run"]["run_id"]
    assert second != first
    assert digests() == before
    con = duckdb.connect(str(home / "warehouse" / "bench.duckdb"), read_only=True)
    counts = dict(con.execute("SELECT run_id, count(*) FROM trials GROUP BY run_id").fetchall())
    con.close()
    assert counts == {first: 84, second: 6}
    code, out, _ = run_bench("results", first, "--json", home=home)
    assert code == 0 and json.loads(out)["run"]["run_id"] == first


def test_the_runs_are_dagster_materializations(demo: dict) -> None:
    import dagster as dg

    from bench_pipeline.defs.launcher import ensure_dagster_home
    from bench_pipeline.runs.paths import BenchPaths

    ensure_dagster_home(BenchPaths.from_home(demo["home"]))
    instance = dg.DagsterInstance.get()
    try:
        trials = instance.get_latest_materialization_event(dg.AssetKey("trials"))
        assert trials is not None
        keys = instance.get_materialized_partitions(dg.AssetKey("trials"))
        assert len(keys) >= 6  # 3 configs x 2 repetitions
        assert instance.get_latest_materialization_event(dg.AssetKey("config_table")) is not None
    finally:
        instance.dispose()


def test_every_readme_query_runs_on_the_warehouse(demo: dict) -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    block = readme.split("## Queries", 1)[1].split("```sql", 1)[1].split("```", 1)[0]
    queries = [
        q.strip()
        for q in block.split(";")
        if q.strip() and not q.strip().startswith("--") or "SELECT" in q
    ]
    queries = [q for q in queries if "SELECT" in q]
    assert len(queries) >= 5
    con = duckdb.connect(str(demo["home"] / "warehouse" / "bench.duckdb"), read_only=True)
    try:
        results = [con.execute(q).fetchall() for q in queries]
        (latest,) = con.execute(
            "SELECT run_id FROM runs ORDER BY created_at DESC LIMIT 1"
        ).fetchone()
    finally:
        con.close()
    # Query 1 gives the latest run's config table: one row per configuration.
    assert {row[0] for row in results[0]} == {latest} and len(results[0]) == 3
    assert results[1] and results[2] and results[4] == []  # tags; costs; no flaky grader


def test_pareto_chart_is_attached_to_the_asset_metadata(demo: dict) -> None:
    import base64

    import dagster as dg

    from bench_pipeline.defs.launcher import ensure_dagster_home
    from bench_pipeline.runs.paths import BenchPaths

    ensure_dagster_home(BenchPaths.from_home(demo["home"]))
    instance = dg.DagsterInstance.get()
    try:
        event = instance.get_latest_materialization_event(dg.AssetKey("pareto_frontier"))
        metadata = event.asset_materialization.metadata
    finally:
        instance.dispose()
    import xml.etree.ElementTree as ET

    chart = metadata["chart"].value
    encoded = chart.split("data:image/svg+xml;base64,", 1)[1].rstrip(")")
    svg = base64.b64decode(encoded)
    root = ET.fromstring(svg)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    # One marker per configuration of the demo, each named; the baseline labelled as such.
    points = {e.get("data-config") for e in root.iter() if "point" in (e.get("class") or "")}
    assert points == {"replay", "reference", "noop"}
    assert "replay (original)" in "".join(root.itertext())
    path = Path(metadata["chart_path"].value)
    assert path.suffix == ".svg" and path.read_bytes() == svg


def test_bench_report_is_one_offline_html_file(demo: dict, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    code, printed, err = run_bench("report", "--out", str(out), home=demo["home"])
    assert code == 0, err
    html = out.read_text()
    assert "http://" not in html and "https://" not in html
    # The Pareto chart is drawn in the page from the frontier of each axis pair, embedded with
    # the page ("<svg" alone would be found in the page's script text whatever the data).
    data = json.loads(html.split('id="bench-data">', 1)[1].split("</script>", 1)[0])
    cost_overall = {r["config_id"]: r for r in data["frontiers"]["avg_cost_usd|overall"]}
    assert set(cost_overall) == {"replay", "reference", "noop"}
    assert cost_overall["reference"]["on_frontier"] is True
    assert "amount-precision" in html  # the task x config grid
    assert "reference" in html and "noop" in html  # the config table
    assert not any(tag in html for tag in ("<script src", "<link ", "@import"))


def test_bench_compare_pairs_and_sign_test(demo: dict) -> None:
    run_id = demo["result"]["run"]["run_id"]
    code, out, err = run_bench(
        "compare",
        run_id,
        "--against",
        "noop",
        "--candidate",
        "reference",
        "--json",
        home=demo["home"],
    )
    assert code == 0, err
    (c,) = json.loads(out)["comparisons"]
    holdout_tasks = 4  # the example's holdout tasks are reported apart
    assert c["pairs"] == (14 - holdout_tasks) * 2 and c["candidate_only"] == c["pairs"]
    assert c["holdout_pairs"] == holdout_tasks * 2
    # One direction per unique task: 10 wins, no loss -> two-sided p = 2 * 0.5**10.
    assert (c["sign_wins"], c["sign_losses"]) == (10, 0)
    assert c["sign_test_p"] == pytest.approx(2 * 0.5**10)
    code, text, _ = run_bench("compare", run_id, "--against", "noop", home=demo["home"])
    assert code == 0 and "sign test over unique tasks: 10 better, 0 worse" in text
