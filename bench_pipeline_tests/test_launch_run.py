"""A launch is one Dagster run: configurations alternate task by task within a repetition, and
the asset catalog still shows exactly the partitions the launch ran, each with its trials."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import dagster as dg
import pytest

from bench_pipeline_tests.conftest import run_bench

pytestmark = pytest.mark.slow
CONFIGS = ["reference", "replay", "noop"]


@pytest.fixture()
def launched(factory: Path, bench_home: Path) -> dict:
    launch = factory / "launches" / "demo.yaml"
    args = ("--max", "3", "--repeats", "2", "--parallel", "1", "--quiet", "--json")
    code, out, err = run_bench("run", str(launch), *args, home=bench_home)
    assert code == 0, err
    from bench_pipeline.warehouse.store import Warehouse

    run_id = json.loads(out)["run"]["run_id"]
    trials = Warehouse(bench_home / "warehouse").read("trials", run_id)
    return {"run_id": run_id, "trials": trials, "home": bench_home}


def test_configurations_alternate_task_by_task_within_a_repetition(launched: dict) -> None:
    trials = launched["trials"].sort_values("started_at")
    assert len(trials) == 3 * len(CONFIGS) * 2
    for rep, started in trials.groupby("repetition", sort=True):
        configs = list(started["config_id"])
        tasks = list(started["task_id"])
        # Each task's trials of every configuration start side by side, then the next task.
        windows = [slice(i, i + len(CONFIGS)) for i in range(0, len(configs), len(CONFIGS))]
        for w in windows:
            assert sorted(configs[w]) == sorted(CONFIGS), (rep, configs)
            assert len(set(tasks[w])) == 1, (rep, tasks)
        # Repetitions alternate both orders (time-of-day effects spread over configs and tasks).
    first = trials[trials["repetition"] == 1]
    second = trials[trials["repetition"] == 2]
    assert list(first["config_id"])[:3] == list(reversed(list(second["config_id"])[:3]))
    assert list(dict.fromkeys(first["task_id"])) == list(
        reversed(list(dict.fromkeys(second["task_id"])))
    )


def test_the_catalog_shows_exactly_the_partitions_the_single_run_ran(launched: dict) -> None:
    from bench_pipeline.defs.launcher import get_instance
    from bench_pipeline.defs.partitions import partition_key
    from bench_pipeline.runs.paths import BenchPaths

    run_id = launched["run_id"]
    instance = get_instance(BenchPaths.from_home(launched["home"]))
    try:
        runs = instance.get_runs(filters=dg.RunsFilter(tags={"bench/run_id": run_id}))
        assert [(r.job_name, r.status) for r in runs] == [
            ("bench_launch_job", dg.DagsterRunStatus.SUCCESS)
        ]
        (dagster_run,) = runs
        expected = {str(partition_key("invoices", c, rep)) for c in CONFIGS for rep in (1, 2)}
        trials_by_partition = {
            str(key): group
            for key, group in launched["trials"].groupby(
                launched["trials"]["config_id"] + "|" + launched["trials"]["repetition"].astype(str)
            )
        }
        for asset in ("trials", "scores"):
            key = dg.AssetKey(asset)
            assert instance.get_materialized_partitions(key) == expected, asset
            records = instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=key), limit=100
            ).records
            # One materialization per partition, all from the launch's one run.
            assert Counter(r.partition_key for r in records) == Counter(dict.fromkeys(expected, 1))
            assert {r.run_id for r in records} == {dagster_run.run_id}
            for record in records:
                metadata = record.asset_materialization.metadata
                assert metadata["run_id"].value == run_id
                table = metadata["trial_table"].value
                config_id = record.partition_key.split("|")[0].split(":")[1]
                rep = record.partition_key.split("|")[1]
                mine = trials_by_partition[f"{config_id}|{rep}"]
                assert sorted(r.data["task"] for r in table.records) == sorted(mine["task_id"]), (
                    asset,
                    record.partition_key,
                )
                assert metadata["dagster/row_count"].value == len(mine)
        # The task set and every derived table come from the same run; the checks ran too.
        for name in ("task_set", "config_table", "pareto_frontier", "regressions"):
            event = instance.get_latest_materialization_event(dg.AssetKey(name))
            assert event is not None and event.run_id == dagster_run.run_id, name
        checks = instance.event_log_storage.get_asset_check_execution_history(
            dg.AssetCheckKey(dg.AssetKey("config_table"), "grader_integrity"), limit=5
        )
        assert [c.run_id for c in checks] == [dagster_run.run_id]
    finally:
        instance.dispose()
