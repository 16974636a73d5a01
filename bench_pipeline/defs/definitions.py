"""The Dagster code location: every asset, check, job, sensor and schedule, assembled once."""

import dagster as dg

from bench_pipeline.defs.benchmark.assets import scores, task_set, trials
from bench_pipeline.defs.operations import build_operations
from bench_pipeline.defs.resources import BenchResource
from bench_pipeline.defs.results.assets import results_tables

TASK_SET_JOB = "bench_task_set_job"
PARTITION_JOB = "bench_partition_job"
RESCORE_JOB = "bench_rescore_job"
RESULTS_JOB = "bench_results_job"


def build_definitions(executor: dg.ExecutorDefinition) -> dg.Definitions:
    """Every asset, job, sensor and schedule of the code location, with `executor` for the
    asset jobs (in-process here; celery in `bench_pipeline.defs.celery`)."""
    # One run per partition with all its trials inside (measured: a Dagster run per trial costs
    # 0.35-10 s); the partition's trials run in our own bounded pool inside the step.
    task_set_job = dg.define_asset_job(
        TASK_SET_JOB,
        selection=[task_set],
        executor_def=executor,
        description="Freeze a launch into a benchmark run (config: `launch` file or `run_id`) "
        "and register its `<suite>:<config>` partitions.",
    )
    partition_job = dg.define_asset_job(
        PARTITION_JOB,
        selection=[trials, scores],
        executor_def=executor,
        description="Run and score every trial of one `<suite>:<config>` x repetition partition "
        "(config `run_id`; empty = the latest run of the partition's suite).",
    )
    # Rescoring is its own job: mixing backfill policies in one job falls back to a run per
    # partition with a warning (measured on Dagster 1.13).
    rescore_job = dg.define_asset_job(
        RESCORE_JOB,
        selection=[scores],
        executor_def=executor,
        description="Grade finished trials again (new scorers or criteria) without rerunning "
        "agents; rows are appended under a rescore id.",
    )
    results_job = dg.define_asset_job(
        RESULTS_JOB,
        selection=[results_tables],
        executor_def=executor,
        description="Derive a run's results (config table, grid, frontier, by tag, paired "
        "comparison, regressions) and write its explorer page.",
    )
    # CI sensor, nightly schedules (one per `nightly: true` suite of $BENCH_FACTORY) and
    # driver, regression and run-failure notifiers.
    operations = build_operations(partition_job=partition_job, results_job=results_job)
    return dg.Definitions(
        assets=[task_set, trials, scores, results_tables],
        jobs=[task_set_job, partition_job, rescore_job, results_job, *operations.jobs],
        sensors=operations.sensors,
        schedules=operations.schedules,
        resources={"bench": BenchResource()},
        executor=executor,
    )


defs = build_definitions(dg.in_process_executor)
