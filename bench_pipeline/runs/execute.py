"""Execute one partition (configuration x repetition) of a benchmark run.

Each step reads what it needs from the warehouse and the frozen run manifest, never from memory
of an earlier step, so partitions can run in different processes (or on other machines).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from bench_pipeline.formats.vocabulary import INFRA_OUTCOMES, OUTCOME_CANCELLED
from bench_pipeline.runs.benchmark_run import BenchmarkRun
from bench_pipeline.runs.paths import BenchPaths
from bench_pipeline.trials.runner import TrialContext, TrialSpec, run_trials
from bench_pipeline.warehouse import layout
from bench_pipeline.warehouse.store import Warehouse
from bench_pipeline.workspace.snapshot import freeze_inputs


def execute_partition(
    run: BenchmarkRun,
    config_id: str,
    rep: int,
    paths: BenchPaths,
    *,
    environ: dict[str, str] | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
    retry_infra: bool = True,
    attempt_no: int = 1,
) -> pd.DataFrame:
    """Run the partition's trials that have no final result yet; each finished trial is written
    at once (its own file), so a crash loses nothing that finished and nothing runs twice."""
    warehouse = paths.warehouse
    config = run.config(config_id)
    done = finished_trials(warehouse, run.run_id, config_id, rep, retry_infra)
    todo: list[TrialSpec] = [s for s in run.trial_specs(config_id, rep) if s.trial_id not in done]
    cancel_flag = paths.cancel_flag(run.run_id)

    def on_tests(row: dict[str, Any], tests: list[dict[str, Any]]) -> None:
        # written before the trial row: a trial that counts as done has its test rows
        part = layout.trial_part(config_id, rep, row["task_id"])
        warehouse.write("test_results", tests, run.run_id, part)

    def on_done(row: dict[str, Any], checks: list[dict[str, Any]]) -> None:
        part = layout.trial_part(config_id, rep, row["task_id"])
        warehouse.write("trials", [row], run.run_id, part)
        warehouse.write("check_results", checks, run.run_id, part)
        if progress:
            progress(row)

    ctx = TrialContext(
        run_id=run.run_id,
        suite=run.suite,
        suite_dir=frozen_inputs(run, paths),
        taskset=run.taskset,
        prices=run.prices,
        evidence_root=paths.evidence_root(run.run_id),
        work_root=paths.work_root,
        prepare_commands=run.launch.suite.prepare_commands,
        environ=dict(environ if environ is not None else os.environ),
        cancelled=cancel_flag.exists,
        attempt_no=attempt_no,
        on_trial_done=on_done,
        on_test_results=on_tests,
        prepare_cache=paths.prepare_cache,
    )
    if run.launch.ci is not None:  # commit + push each trial's final state to bench/<run>/<trial>
        from bench_pipeline.runs.ci_push import ci_finalizer

        ctx.finalize_workspace = ci_finalizer(run)
    from bench_pipeline.workspace import process

    # One registry per run; concurrent partitions of the run share it.
    process.pid_registry = paths.pid_registry(run.run_id)
    run_trials(ctx, todo, config.max_parallel)
    return warehouse.read("trials", run.run_id, under=layout.partition_dir(config_id, rep))


def frozen_inputs(run: BenchmarkRun, paths: BenchPaths) -> Path:
    """The run's input store, filled from the factory the first time (idempotent): trials
    snapshot from here, so editing a grader during a run changes nothing already frozen."""
    store = paths.inputs_root(run.run_id)
    freeze_inputs(run.launch.suite.directory, run.taskset.input_hashes, store)
    return store


def finished_trials(
    warehouse: Warehouse, run_id: str, config_id: str, rep: int, retry_infra: bool
) -> set[str]:
    """Trial ids of the partition that have a final result (cancelled ones are redone on resume;
    infrastructure failures too when `retry_infra`)."""
    trials = warehouse.read("trials", run_id, under=layout.partition_dir(config_id, rep))
    if trials.empty:
        return set()
    redo = {OUTCOME_CANCELLED} | (set(INFRA_OUTCOMES) if retry_infra else set())
    return set(trials.loc[~trials["outcome"].isin(redo), "trial_id"])
