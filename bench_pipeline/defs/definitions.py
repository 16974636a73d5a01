"""The Dagster code location: every asset, check, job, sensor and schedule, assembled once."""

import dagster as dg

from bench_pipeline.defs.benchmark.assets import scores, task_set, trials
from bench_pipeline.defs.benchmark.launch import launch
from bench_pipeline.defs.operations import build_operations
from bench_pipeline.defs.resources import BenchResource
from bench_pipeline.defs.results.assets import results_tables

TASK_SET_JOB = "bench_task_set_job"
PARTITION_JOB = "bench_partition_job"
RESCORE_JOB = "bench_rescore_job"
RESULTS_JOB = "bench_results_job"
LAUNCH_JOB = "bench_launch_job"


def build_definitions(executor: dg.ExecutorDefinition) -> dg.Definitions:
    """Every asset, job, sensor and schedule of the code location, with `executor` for the
    asset jobs (in-process here; celery in `bench_pipeline.defs.celery`)."""
    # `bench run` executes a launch as ONE run of the launch job (defs/benchmark/launch.py):
    # a Dagster run costs ~0.3 s of storage work on a persistent instance, one per trial or
    # per partition was measured at up to 1.7x a plain loop. The partition job runs one
    # partition (a UI backfill, a celery step) with its trials in our own bounded pool.
    launch_job = dg.JobDefinition(
        name=LAUNCH_JOB,
        graph_def=dg.GraphDefinition(name=LAUNCH_JOB, node_defs=[launch]),
        executor_def=dg.in_process_executor,
        description="Run a frozen benchmark run (config `run_id`) in one Dagster run: every "
        "partition's trials in one pool, each partition's trials and scores materialized as it "
        "completes, then the derived tables.",
    )
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
        jobs=[task_set_job, launch_job, partition_job, rescore_job, results_job, *operations.jobs],
        sensors=operations.sensors,
        schedules=operations.schedules,
        resources={"bench": BenchResource()},
        executor=executor,
    )


defs = build_definitions(dg.in_process_executor)
