"""`bench_nightly_job`: freeze tonight's nightly run of one suite (one op, in-process);
`bench_set_baseline_job`: pin a suite's baseline run from the UI.

Freezing happens inside the run, not in the schedule's evaluation: a broken factory file fails
a run (reported by the run-failure sensor) instead of a silent schedule tick.
"""

# No `from __future__ import annotations`: Dagster reads config and resource types from the
# real annotations.

from pathlib import Path

import dagster as dg

from bench_pipeline.defs.benchmark.assets import task_set_metadata
from bench_pipeline.defs.partitions import register_configs
from bench_pipeline.defs.resources import BenchResource
from bench_pipeline.defs.run_config import NIGHTLY_OP
from bench_pipeline.formats.errors import BenchInputError
from bench_pipeline.ops.nightly import FACTORY_ENV, factory_root, freeze_nightly
from bench_pipeline.runs.baseline import BaselineError, set_baseline

NIGHTLY_JOB = "bench_nightly_job"


class NightlyConfig(dg.Config):
    """Which suite to freeze, under which run id (derived from the scheduled time)."""

    suite: str
    run_id: str
    factory: str = ""  # empty = $BENCH_FACTORY
    scheduled_at: str = ""


@dg.op(name=NIGHTLY_OP, description="Freeze the suite's nightly run (default config, 1 rep).")
def nightly_freeze(context: dg.OpExecutionContext, config: NightlyConfig, bench: BenchResource):
    factory = Path(config.factory) if config.factory else factory_root()
    if factory is None:
        raise dg.Failure(f"no factory: set {FACTORY_ENV} to the factory folder")
    try:
        run = freeze_nightly(
            factory,
            config.suite,
            bench.paths,
            config.run_id,
            scheduled_at=config.scheduled_at or None,
        )
    except BenchInputError as exc:
        raise dg.Failure(f"nightly run of {config.suite} not started: {exc}") from exc
    register_configs(context.instance, run.suite, [c.id for c in run.launch.configs])
    context.log_event(
        dg.AssetMaterialization(
            asset_key="task_set",
            description="frozen by the nightly schedule",
            metadata=task_set_metadata(run),
        )
    )
    context.log.info(
        f"nightly run {run.run_id}: {len(run.taskset.tasks)} tasks; the nightly sensor runs its partitions"
    )


@dg.job(
    name=NIGHTLY_JOB,
    executor_def=dg.in_process_executor,
    tags={"bench/nightly": "true"},
    description="Freeze a suite's nightly regression run; the nightly sensor drives the rest.",
)
def nightly_job():
    nightly_freeze()


BASELINE_JOB = "bench_set_baseline_job"


class BaselineConfig(dg.Config):
    """Pin `run_id` as the baseline of `suite` (as `bench baseline set SUITE RUN` does)."""

    suite: str
    run_id: str


@dg.op(name="set_baseline", description="Pin a run as its suite's baseline for regressions.")
def set_baseline_op(context: dg.OpExecutionContext, config: BaselineConfig, bench: BenchResource):
    try:
        set_baseline(bench.paths.warehouse, config.suite, config.run_id)
    except BaselineError as exc:
        raise dg.Failure(str(exc)) from exc
    context.log.info(f"baseline of {config.suite} is now {config.run_id}")


@dg.job(
    name=BASELINE_JOB,
    executor_def=dg.in_process_executor,
    tags={"bench/action": "baseline"},
    description="Pin a run as its suite's baseline (Launchpad config: suite, run_id); the next "
    "results build compares against it. Same rules as `bench baseline set`.",
)
def baseline_job():
    set_baseline_op()
