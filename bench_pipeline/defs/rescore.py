"""`bench rescore` as Dagster sees it: a backfill of one run's `scores` partitions.

Each partition that has trials is executed with `bench_rescore_job`, its `scores` op configured
by `{run_id, scorers, rescore_id, only_unscored, judge_json}`; what to grade and how is decided
in `bench_pipeline.runs.rescore` and `bench_pipeline.runs.score`.
"""

import json
from collections.abc import Callable

import dagster as dg
import pandas as pd

from bench_pipeline.defs import run_config
from bench_pipeline.defs.launcher import check_success, resource_config
from bench_pipeline.defs.partitions import partition_key, register_configs
from bench_pipeline.defs.recorded import execute_recorded
from bench_pipeline.formats.model import Judge
from bench_pipeline.formats.serialize import to_jsonable
from bench_pipeline.runs.benchmark_run import BenchmarkRun
from bench_pipeline.runs.paths import BenchPaths
from bench_pipeline.runs.rescore import partitions_with_trials


def execute_rescore(
    run: BenchmarkRun,
    paths: BenchPaths,
    instance: dg.DagsterInstance,
    *,
    scorers: list[str] | None,
    rescore_id: str,
    only_unscored: bool,
    judge: Judge | None = None,
    on_partition: Callable[[str, int], None] | None = None,
) -> pd.DataFrame:
    """Backfill the run's score partitions; returns the rows this rescore wrote."""
    from bench_pipeline.defs.definitions import RESCORE_JOB

    register_configs(instance, run.suite, [c.id for c in run.launch.configs])
    tags = {"bench/run_id": run.run_id, "bench/suite": run.suite, "bench/rescore_id": rescore_id}
    config = run_config.rescore_config(
        run.run_id,
        scorers=list(scorers or []),
        rescore_id=rescore_id,
        only_unscored=only_unscored,
        judge_json=json.dumps(to_jsonable(judge)) if judge is not None else "",
    )
    for config_id, rep in partitions_with_trials(paths.warehouse, run):
        if on_partition:
            on_partition(config_id, rep)
        result = execute_recorded(
            RESCORE_JOB,
            partition_key=partition_key(run.suite, config_id, rep),
            run_config={**config, **run_config.QUIET_LOGGERS, **resource_config(paths, False)},
            instance=instance,
            tags=tags,
        )
        check_success(result, f"rescore of partition {config_id}|{rep}")
    safe = rescore_id.replace("'", "''")
    return paths.warehouse.read("scores", run.run_id, where=f"rescore_id = '{safe}'")
