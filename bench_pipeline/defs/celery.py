"""The same assets and jobs as `bench_pipeline.defs.definitions`, with Dagster's celery executor:
every step of a run goes to a celery queue and runs in whichever worker takes it.

For scale-out deployments (docs/deploy.md). Load this module *instead of*
`bench_pipeline.defs.definitions` in a workspace (both define the same asset keys). It needs the
`celery` extra (dagster-celery), a broker the workers share, and state every worker sees: the
same DAGSTER_HOME (or a Postgres instance) and the same bench home / warehouse root.

Broker and result backend come from the environment when this module is loaded:
BENCH_CELERY_BROKER (default redis://127.0.0.1:6379/0) and BENCH_CELERY_BACKEND (default: the
broker). Workers must be started against the same broker, e.g. with
`dagster-celery worker start -A dagster_celery.app -y celery.yaml` (see `worker_config`).
"""

# No `from __future__ import annotations` here: Dagster reads types from real annotations.

import os
from typing import Any

import dagster as dg
from dagster_celery import celery_executor, core_execution_loop
from dagster_celery import tasks as dagster_celery_tasks

from bench_pipeline.defs import run_config
from bench_pipeline.defs.definitions import (
    PARTITION_JOB,
    RESCORE_JOB,
    RESULTS_JOB,
    TASK_SET_JOB,
    build_definitions,
)
from bench_pipeline.defs.partitions import partition_key, trial_partitions

DEFAULT_BROKER = "redis://127.0.0.1:6379/0"

# How often the process orchestrating a run asks the result backend whether its submitted
# steps are done. dagster-celery sleeps a second between looks (`TICK_SECONDS`, a module
# constant, no setting): every step then waits half a second on average after it finished,
# and a partition's run has two (trials, then scores), the results run one. A look is one
# GET per running step. (test_celery checks that the pinned dagster-celery's loop reads it.)
STEP_POLL_SECONDS = 0.05
core_execution_loop.TICK_SECONDS = STEP_POLL_SECONDS

# dagster-celery's executor makes its step task anew for every step it submits
# (`executor._submit_task` calls `tasks.create_task(app)` each time), and Celery >= 5.5 warns on
# every registration of a name after the first (DuplicateTaskNameWarning: a new closure under
# "execute_plan"), keeping the first. One task per app says the same without a warning per step
# in the orchestrating process's log. (`_submit_task` imports create_task when it runs, so it
# finds this one; test_celery checks that it still does.) The task is kept on its app, so it
# goes with the app (dagster-celery makes one per run); a table of apps here would keep them.
_create_plan_task = dagster_celery_tasks.create_task
_PLAN_TASK = "_bench_execute_plan_task"


def create_plan_task_once(celery_app: Any, **task_kwargs: Any) -> Any:
    """dagster-celery's `create_task`, registered once per app (with options: every time)."""
    if task_kwargs:
        return _create_plan_task(celery_app, **task_kwargs)
    task = getattr(celery_app, _PLAN_TASK, None)
    if task is None:
        task = _create_plan_task(celery_app)
        setattr(celery_app, _PLAN_TASK, task)
    return task


dagster_celery_tasks.create_task = create_plan_task_once


def broker_url() -> str:
    return os.environ.get("BENCH_CELERY_BROKER") or DEFAULT_BROKER


def backend_url() -> str:
    return os.environ.get("BENCH_CELERY_BACKEND") or broker_url()


def executor_config() -> dict[str, Any]:
    """The celery executor's config; the workers' config yaml must name the same broker."""
    return {
        "broker": broker_url(),
        "backend": backend_url(),
        # One step at a time per worker process: a partition's step runs many trials itself.
        "config_source": {"worker_prefetch_multiplier": 1, "task_acks_late": True},
    }


def worker_config() -> dict[str, Any]:
    """The yaml for `dagster-celery worker start -y`: `execution: config:` as in a run config."""
    return {"execution": {"config": executor_config()}}


def _resolve_executor_config(config: dict[str, Any]) -> dict[str, Any]:
    # Evaluated when a run's config is resolved (not at import): the environment of the
    # process that launches the run decides the broker; run config may still override it.
    return {**executor_config(), **{k: v for k, v in config.items() if v}}


bench_celery_executor = celery_executor.configured(
    _resolve_executor_config,
    name="bench_celery",
    config_schema={
        "broker": dg.Field(str, is_required=False, description="default $BENCH_CELERY_BROKER"),
        "backend": dg.Field(str, is_required=False, description="default $BENCH_CELERY_BACKEND"),
    },
)

# The same assets, jobs (same names and selections), sensors and schedules as
# bench_pipeline.defs.definitions; only the executor differs. Steps run in other processes and on
# other hosts, so nothing is handed over in memory: every asset reads what it needs from the
# warehouse and the frozen run manifest.
defs = build_definitions(bench_celery_executor)


# Module-level job factories, so `dg.reconstructable` can rebuild each job in a worker.
def define_task_set_job() -> dg.JobDefinition:
    return defs.resolve_job_def(TASK_SET_JOB)


def define_partition_job() -> dg.JobDefinition:
    return defs.resolve_job_def(PARTITION_JOB)


def define_rescore_job() -> dg.JobDefinition:
    return defs.resolve_job_def(RESCORE_JOB)


def define_results_job() -> dg.JobDefinition:
    return defs.resolve_job_def(RESULTS_JOB)


def partition_run_config(run_id: str, home: str, warehouse_root: str = "") -> dict[str, Any]:
    return {
        **run_config.partition_config(run_id),
        **run_config.bench_resource_config(home, warehouse_root),
    }


def partition_tags(suite: str, config_id: str, rep: int, run_id: str) -> dict[str, str]:
    """Tags that make a run of the partitioned job target one config x repetition (the config
    must be registered first: `bench_pipeline.defs.partitions.register_configs`)."""
    # The per-dimension tags make the step see a MultiPartitionKey, not the bare "config|rep".
    key = partition_key(suite, config_id, rep)
    return {**trial_partitions.get_tags_for_partition_key(key), "bench/run_id": run_id}


def results_run_config(run_id: str, home: str, warehouse_root: str = "") -> dict[str, Any]:
    return {
        **run_config.results_config(run_id),
        **run_config.bench_resource_config(home, warehouse_root),
    }
