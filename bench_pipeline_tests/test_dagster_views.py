"""What a Dagster user sees, read through a real dagster-webserver's GraphQL API on 127.0.0.1
after two real `bench run`s of two suites that share config ids: per-trial tables on the
trials partitions, column schemas on the results, runs listed on their job's page, partition
keys that keep the suites apart, a run status for runs no `bench run` drove, and the baseline
set from a job."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import dagster as dg
import pytest

from bench_pipeline_tests.conftest import run_bench
from bench_pipeline_tests.servers import graphql, start_webserver, stopping, wait_for_code_location

pytestmark = pytest.mark.slow
REPO_TAG = {"key": ".dagster/repository", "value": "__repository__@bench_pipeline"}

RUNS_QUERY = """
query($filter: RunsFilter!) {
  runsOrError(filter: $filter) { ... on Runs { results {
    runId jobName status pipelineSnapshotId tags { key value } } } }
}
"""
MATERIALIZATIONS = """
query($key: AssetKeyInput!, $partitions: [String!], $limit: Int) {
  assetOrError(assetKey: $key) { ... on Asset {
    assetMaterializations(partitions: $partitions, limit: $limit) {
      partition runId
      metadataEntries {
        label __typename
        ... on TableMetadataEntry { table { records schema { columns { name type description } } } }
        ... on TableSchemaMetadataEntry { schema { columns { name type } } }
        ... on MarkdownMetadataEntry { mdStr }
        ... on PathMetadataEntry { path }
      }
    }
  } }
}
"""
PARTITION_KEYS = """
query($key: AssetKeyInput!) {
  assetNodeOrError(assetKey: $key) { ... on AssetNode {
    partitionKeysByDimension { name partitionKeys }
    kinds owners { ... on TeamAssetOwner { team } } tags { key value } description
  } }
}
"""
SNAPSHOT = """
query($name: String!) {
  pipelineOrError(params: {pipelineName: $name, repositoryName: "__repository__",
                           repositoryLocationName: "bench_pipeline"}) {
    ... on Pipeline { pipelineSnapshotId } } }
"""
JOBS = """
{ repositoryOrError(repositorySelector: {repositoryLocationName: "bench_pipeline",
                                          repositoryName: "__repository__"}) {
    ... on Repository { jobs { name description } } } }
"""


def _second_suite(factory: Path) -> Path:
    """`billing`: a copy of the invoices suite whose launch uses the same config ids."""
    shutil.copytree(factory / "benchmarks" / "invoices", factory / "benchmarks" / "billing")
    launch = factory / "launches" / "billing.yaml"
    demo = (factory / "launches" / "demo.yaml").read_text()
    launch.write_text(demo.replace("suite: invoices", "suite: billing"))
    for cmd in (["git", "add", "-A"], ["git", "commit", "-qm", "billing suite"]):
        subprocess.run(cmd, cwd=factory, check=True, capture_output=True)
    return launch


def _entries(materialization: dict) -> dict[str, dict]:
    return {e["label"]: e for e in materialization["metadataEntries"]}


def _bench(home: Path, *args: str) -> str:
    code, out, err = run_bench(*args, home=home)
    assert code == 0, err
    return out


def test_dagster_views_through_graphql(factory: Path, bench_home: Path, tmp_path: Path) -> None:
    billing = _second_suite(factory)
    small = ("--max", "2", "--repeats", "1", "--quiet", "--json")
    inv = json.loads(_bench(bench_home, "run", str(factory / "launches" / "demo.yaml"), *small))
    bil = json.loads(_bench(bench_home, "run", str(billing), *small))
    inv_id, bil_id = inv["run"]["run_id"], bil["run"]["run_id"]

    server = start_webserver(
        dagster_home=bench_home / "dagster_home", bench_home=bench_home, log_dir=tmp_path / "logs"
    )
    with stopping(server):
        wait_for_code_location(server)
        url = server.url

        # The job's runs list (the UI filters by job AND code location) holds the CLI's runs:
        # one run of the launch job per `bench run`, nothing else.
        for job, per_run in (("bench_launch_job", 1), ("bench_partition_job", 0)):
            runs = graphql(url, RUNS_QUERY, {"filter": {"pipelineName": job, "tags": [REPO_TAG]}})
            runs = runs["runsOrError"]["results"]
            for run_id in (inv_id, bil_id):
                mine = [
                    r
                    for r in runs
                    if {"key": "bench/run_id", "value": run_id} in r["tags"]
                    and r["status"] == "SUCCESS"
                ]
                assert len(mine) == per_run, (job, run_id, runs)
            # The same job as the code location's, so "Re-execute" raises no version warning.
            snap = graphql(url, SNAPSHOT, {"name": job})["pipelineOrError"]["pipelineSnapshotId"]
            assert {r["pipelineSnapshotId"] for r in runs} <= {snap}

        # A trials partition: a table with one row per trial, and its schema.
        (mat,) = graphql(
            url,
            MATERIALIZATIONS,
            {"key": {"path": ["trials"]}, "partitions": ["invoices:reference|1"], "limit": 1},
        )["assetOrError"]["assetMaterializations"]
        table = _entries(mat)["trial_table"]["table"]
        columns = [c["name"] for c in table["schema"]["columns"]]
        assert columns[:3] == ["task", "outcome", "score"]
        assert {"cost_usd", "duration_s", "evidence"} <= set(columns)
        rows = [json.loads(r) for r in table["records"]]
        assert len(rows) == 2 and all(r["outcome"] == "succeeded" for r in rows)
        assert all(Path(r["evidence"]).is_dir() for r in rows)
        # ... and scores: the same rows with their scores.
        (mat,) = graphql(
            url,
            MATERIALIZATIONS,
            {"key": {"path": ["scores"]}, "partitions": ["invoices:reference|1"], "limit": 1},
        )["assetOrError"]["assetMaterializations"]
        scored = [json.loads(r) for r in _entries(mat)["trial_table"]["table"]["records"]]
        assert [r["score"] for r in scored] == [1.0, 1.0]

        # Every results asset: column schema, its table inline; the chart inline; the explorer.
        for asset in ("config_table", "task_grid", "pareto_frontier", "paired_comparison"):
            (mat,) = graphql(url, MATERIALIZATIONS, {"key": {"path": [asset]}, "limit": 1})[
                "assetOrError"
            ]["assetMaterializations"]
            entries = _entries(mat)
            schema = [c["name"] for c in entries["dagster/column_schema"]["schema"]["columns"]]
            assert entries["table"]["__typename"] == "TableMetadataEntry", asset
            if asset == "config_table":
                assert {"overall", "overall_ci_low", "avg_cost_usd", "cost_coverage"} <= set(schema)
                shown = [c["name"] for c in entries["table"]["table"]["schema"]["columns"]]
                assert "score_checks" in shown and "overall_ci_high" in shown
            if asset == "pareto_frontier":
                md = entries["frontier_chart"]["mdStr"]
                assert md.startswith("![Pareto frontier](data:image/svg+xml;base64,")
                assert len(md) < 1000  # the UI shows markdown inline only below 1,000 chars
            assert Path(entries["explorer"]["path"]).read_text().startswith("<!DOCTYPE html>")

        # Suites apart: every key of the config dimension names its suite, and every trials
        # materialization of a run is of a key of that run's suite.
        node = graphql(url, PARTITION_KEYS, {"key": {"path": ["trials"]}})["assetNodeOrError"]
        dims = {d["name"]: d["partitionKeys"] for d in node["partitionKeysByDimension"]}
        assert set(dims["config"]) == {
            f"{s}:{c}" for s in ("invoices", "billing") for c in ("reference", "replay", "noop")
        }
        assert {"python", "parquet"} <= set(node["kinds"]) and node["owners"]
        mats = graphql(url, MATERIALIZATIONS, {"key": {"path": ["trials"]}, "limit": 100})
        suite_of_run = {}
        for r in graphql(url, RUNS_QUERY, {"filter": {"pipelineName": "bench_launch_job"}})[
            "runsOrError"
        ]["results"]:
            suite_of_run[r["runId"]] = {t["key"]: t["value"] for t in r["tags"]}["bench/suite"]
        seen = mats["assetOrError"]["assetMaterializations"]
        assert len(seen) == 6
        for m in seen:
            assert m["partition"].startswith(suite_of_run[m["runId"]] + ":"), m

        jobs = graphql(url, JOBS)["repositoryOrError"]["jobs"]
        # (__ASSET_JOB is Dagster's own hidden job, not shown in the UI)
        undocumented = [
            j["name"] for j in jobs if not j["description"] and not j["name"].startswith("__")
        ]
        assert not undocumented, f"jobs without a description: {undocumented}"


def test_run_driven_by_dagster_has_a_status_and_baseline_job(
    factory: Path, bench_home: Path
) -> None:
    """A run frozen and executed by the code location's own jobs (as from the UI, no `bench
    run` process) is listed with a status; the baseline job pins it like the CLI."""
    from bench_pipeline.defs import run_config
    from bench_pipeline.defs.definitions import defs
    from bench_pipeline.defs.partitions import partition_key
    from bench_pipeline.runs.derived import pinned_baseline
    from bench_pipeline.runs.paths import BenchPaths
    from bench_pipeline.runs.start import latest_run_id, resolve_run

    launch = factory / "launches" / "demo.yaml"
    text = launch.read_text().replace("repetitions: 2", "repetitions: 1")
    launch.write_text(
        text.replace("  - {id: replay, agent: replay}\n  - {id: noop, agent: noop}\n", "")
    )
    paths = BenchPaths.from_home(bench_home, None)
    resources = run_config.bench_resource_config(str(bench_home))
    with dg.instance_for_test() as instance:
        r = defs.resolve_job_def("bench_task_set_job").execute_in_process(
            run_config={**resources, "ops": {"task_set": {"config": {"launch": str(launch)}}}},
            instance=instance,
        )
        assert r.success
        run = resolve_run(paths.warehouse, None)
        listed = _bench(bench_home, "results", "--list")
        assert run.run_id in listed and "frozen" in listed and "unknown" not in listed
        # A partition launched without a run id: the latest run of ITS suite.
        r = defs.resolve_job_def("bench_partition_job").execute_in_process(
            partition_key=partition_key("invoices", "reference", 1),
            run_config=resources,
            instance=instance,
        )
        assert r.success
        # A partition the run does not have (rep 2 of a 1-rep run): nothing materialized, so
        # it stays "missing" instead of turning green.
        key = partition_key("invoices", "reference", 2)
        r = defs.resolve_job_def("bench_partition_job").execute_in_process(
            partition_key=key, run_config=resources, instance=instance
        )
        assert r.success
        for asset in ("trials", "scores"):
            for rep, materialized in ((1, True), (2, False)):
                part = str(partition_key("invoices", "reference", rep))
                records = instance.fetch_materializations(
                    dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[part]),
                    limit=1,
                ).records
                assert bool(records) == materialized, (asset, part)
        r = defs.resolve_job_def("bench_results_job").execute_in_process(
            run_config=resources, instance=instance
        )
        assert r.success
        listed = _bench(bench_home, "results", "--list")
        (line,) = [ln for ln in listed.splitlines() if run.run_id in ln]
        assert line.endswith("finished"), line

        r = defs.resolve_job_def("bench_set_baseline_job").execute_in_process(
            run_config={
                "ops": {"set_baseline": {"config": {"suite": "billing", "run_id": run.run_id}}},
                **resources,
            },
            instance=instance,
            raise_on_error=False,
        )
        assert not r.success  # the run is of suite invoices: refused, like the CLI
        assert pinned_baseline(paths.warehouse, "invoices") is None
        r = defs.resolve_job_def("bench_set_baseline_job").execute_in_process(
            run_config={
                "ops": {"set_baseline": {"config": {"suite": "invoices", "run_id": run.run_id}}},
                **resources,
            },
            instance=instance,
        )
        assert r.success
    assert (
        pinned_baseline(paths.warehouse, "invoices") == run.run_id == latest_run_id(paths.warehouse)
    )
    assert _bench(bench_home, "baseline", "show", "invoices").strip() == run.run_id
