"""Run a frozen benchmark run through the Dagster definitions on a real instance.

`bench run` calls this so that its runs land in the instance `dagster dev` shows: one run to
materialize the task set (which registers the config partitions), one run per config x
repetition partition (trials then scores, all the partition's trials inside it), and one run
for the derived tables.
"""

import os
from collections.abc import Callable
from pathlib import Path

import dagster as dg

from bench_pipeline.defs import run_config
from bench_pipeline.defs.partitions import partition_key
from bench_pipeline.defs.recorded import execute_recorded
from bench_pipeline.runs.benchmark_run import BenchmarkRun
from bench_pipeline.runs.paths import BenchPaths

INSTANCE_YAML = """\
# Written by bench on first use. Edit freely: bench never overwrites it.
telemetry:
  enabled: false
# The trials asset runs in the `bench_trials` pool: one partition's trials at a time across
# every run on this instance (each partition runs up to its max_parallel trials), so two
# launches, a backfill and a nightly run never oversubscribe the machine. Queued steps wait
# for a slot without using compute. Raise the limit on a bigger machine.
concurrency:
  pools:
    default_limit: 1
"""


def ensure_dagster_home(paths: BenchPaths) -> Path:
    """DAGSTER_HOME as set, else <bench home>/dagster_home, with a dagster.yaml in it."""
    home = Path(os.environ.get("DAGSTER_HOME") or paths.home / "dagster_home").absolute()
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        config.write_text(INSTANCE_YAML)
    os.environ["DAGSTER_HOME"] = str(home)
    return home


def get_instance(paths: BenchPaths) -> dg.DagsterInstance:
    ensure_dagster_home(paths)
    return dg.DagsterInstance.get()


def resource_config(paths: BenchPaths, progress: bool) -> dict[str, object]:
    """The bench resource as run config (recorded runs keep the code location's job as is)."""
    return run_config.bench_resource_config(str(paths.home), paths.warehouse_root, progress)


def check_success(result: dg.ExecuteInProcessResult, what: str) -> None:
    if not result.success:
        failures = [e.message for e in result.all_events if e.is_failure]
        raise RuntimeError(
            f"{what} failed: {'; '.join(m for m in failures if m) or 'see the Dagster UI'}"
        )


def execute_run(
    run: BenchmarkRun,
    paths: BenchPaths,
    instance: dg.DagsterInstance,
    *,
    progress: bool = False,
    retry_infra: bool = True,
    on_partition: Callable[[str, int], None] | None = None,
) -> None:
    """Task set, then every (config, rep) partition, then the results, as Dagster runs."""
    from bench_pipeline.defs.definitions import PARTITION_JOB, TASK_SET_JOB

    resources = resource_config(paths, progress)
    tags = {"bench/run_id": run.run_id, "bench/suite": run.suite}
    result = execute_recorded(
        TASK_SET_JOB,
        run_config={
            **run_config.task_set_config(run.run_id),
            **run_config.QUIET_LOGGERS,
            **resources,
        },
        instance=instance,
        tags=tags,
    )
    check_success(result, "task set")

    def one(config_id: str, rep: int) -> None:
        if on_partition:
            on_partition(config_id, rep)
        result = execute_recorded(
            PARTITION_JOB,
            partition_key=partition_key(run.suite, config_id, rep),
            run_config={
                **run_config.partition_config(run.run_id, retry_infra),
                **run_config.QUIET_LOGGERS,
                **resources,
            },
            instance=instance,
            tags=tags,
        )
        check_success(result, f"partition {config_id}|{rep}")

    # Sequential on purpose: execute_in_process is not thread-safe (concurrent runs deadlock
    # in Dagster's logging setup), and a partition already runs its trials in parallel.
    if run.launch.adaptive is not None:  # rounds until the stop rule (runs/adaptive.py)
        from bench_pipeline.runs.adaptive import run_adaptive

        cancelled = paths.cancel_flag(run.run_id).exists
        run_adaptive(run, paths.warehouse, lambda parts: [one(*p) for p in parts], cancelled)
    else:
        for config_id, rep in run.partitions():
            one(config_id, rep)
    build_results(run.run_id, paths, instance)


def build_results(run_id: str, paths: BenchPaths, instance: dg.DagsterInstance) -> None:
    from bench_pipeline.defs.definitions import RESULTS_JOB

    result = execute_recorded(
        RESULTS_JOB,
        run_config={
            **run_config.results_config(run_id),
            **run_config.QUIET_LOGGERS,
            **resource_config(paths, False),
        },
        instance=instance,
        tags={"bench/run_id": run_id},
    )
    check_success(result, "results")


def fail_orphaned_runs(instance: dg.DagsterInstance, run_id: str) -> int:
    """Dagster runs of an interrupted benchmark run still marked in progress: report them failed."""
    runs = instance.get_runs(
        filters=dg.RunsFilter(
            statuses=[dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING],
            tags={"bench/run_id": run_id},
        )
    )
    for run in runs:
        instance.report_run_failed(
            run, message="bench: the process driving this run died (interrupted)"
        )
        # A killed run never releases its pool slot itself; free it or every later run waits.
        if instance.event_log_storage.supports_global_concurrency_limits:
            instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
    return len(runs)
