"""`bench_nightly_job`: freeze tonight's nightly run of one suite (one op, in-process).

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
    register_configs(context.instance, [c.id for c in run.launch.configs])
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
