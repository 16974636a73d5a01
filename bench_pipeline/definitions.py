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

# One run per partition with all its trials inside (DAGSTER-NOTES: a run per trial costs
# 0.35-10 s); the partition's steps run in-process, trials in our own bounded pool.
task_set_job = dg.define_asset_job(
    TASK_SET_JOB, selection=[task_set], executor_def=dg.in_process_executor
)
partition_job = dg.define_asset_job(
    PARTITION_JOB,
    selection=[trials, scores],
    executor_def=dg.in_process_executor,
)
# Rescoring is its own job: mixing backfill policies in one job falls back to a run per
# partition with a warning (DAGSTER-NOTES).
rescore_job = dg.define_asset_job(
    RESCORE_JOB,
    selection=[scores],
    executor_def=dg.in_process_executor,
)

results_job = dg.define_asset_job(
    RESULTS_JOB, selection=[results_tables], executor_def=dg.in_process_executor
)

# CI sensor, nightly schedules (one per `nightly: true` suite of $BENCH_FACTORY) and driver,
# regression and run-failure notifiers.
operations = build_operations(partition_job=partition_job, results_job=results_job)

defs = dg.Definitions(
    assets=[task_set, trials, scores, results_tables],
    jobs=[task_set_job, partition_job, rescore_job, results_job, *operations.jobs],
    sensors=operations.sensors,
    schedules=operations.schedules,
    resources={"bench": BenchResource()},
)
