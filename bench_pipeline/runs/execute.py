"""Execute a benchmark run's trials: some or all of its (configuration x repetition) partitions.

Each step reads what it needs from the warehouse and the frozen run manifest, never from memory
of an earlier step, so partitions can run in different processes (or on other machines).
"""

from __future__ import annotations

import os
import queue
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench_pipeline.formats.vocabulary import INFRA_OUTCOMES, OUTCOME_CANCELLED
from bench_pipeline.runs.benchmark_run import BenchmarkRun
from bench_pipeline.runs.paths import BenchPaths
from bench_pipeline.trials.runner import TrialContext, TrialSpec, run_trials
from bench_pipeline.warehouse import layout
from bench_pipeline.warehouse.store import Warehouse
from bench_pipeline.warehouse.trial_rows import (
    TrialRowWriter,
    forget_trials,
    is_quick,
    join_partition,
)
from bench_pipeline.workspace.snapshot import freeze_inputs

if TYPE_CHECKING:  # the return type only: a launch never builds a frame here
    import pandas as pd

Partition = tuple[str, int]  # (config id, repetition)


def _stop_when(
    cancelled: Callable[[], bool],
    interrupted: Callable[[], bool] | None,
    stopping: threading.Event,
) -> Callable[[], bool]:
    def stop() -> bool:
        return stopping.is_set() or cancelled() or (interrupted is not None and interrupted())

    return stop


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
    interrupted: Callable[[], bool] | None = None,
) -> pd.DataFrame:
    """Run one partition's trials that have no final result yet (a UI backfill or a celery
    step runs one partition); returns the partition's trial rows."""
    for _ in execute_trials(
        run,
        [(config_id, rep)],
        paths,
        environ=environ,
        progress=progress,
        retry_infra=retry_infra,
        attempt_no=attempt_no,
        interrupted=interrupted,
    ):
        pass
    return paths.warehouse.read("trials", run.run_id, under=layout.partition_dir(config_id, rep))


def execute_trials(
    run: BenchmarkRun,
    partitions: list[Partition],
    paths: BenchPaths,
    *,
    environ: dict[str, str] | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
    retry_infra: bool = True,
    attempt_no: int = 1,
    interrupted: Callable[[], bool] | None = None,
) -> Iterator[Partition]:
    """Run the trials of `partitions` that have no final result yet, all in one pool.

    Within a repetition the configurations alternate task by task (`interleaved`), so a slow
    hour of the machine or the provider falls on every configuration alike, not on whichever
    partition happened to run then. The pool is as wide as the widest config's `max_parallel`
    and no config exceeds its own. Each finished trial is written at once (its own file), so
    a crash loses nothing that finished and nothing runs twice — but for trials quicker than a
    second, written together within half a second (warehouse/trial_rows.py). When a
    partition's last trial ends its files are joined into one per table (`join_partition`).

    Yields each partition, in the caller's thread, as its last trial ends (in completion
    order; at once for a partition with nothing left to run) while the other partitions'
    trials go on, so the caller can score it and report it then.

    Ctrl-C in the caller's thread, a caller that stops early, and `interrupted` (Dagster's
    deferred Ctrl-C or run termination, polled) stop the pool as `bench cancel` does: running
    agents are killed, trials not started stay without a result for `--resume`.
    """
    warehouse = paths.warehouse
    # One partition (a backfill or celery step) reads only its own folder.
    only = layout.partition_dir(*partitions[0]) if len(partitions) == 1 else None
    done = finished_trials(warehouse, run.run_id, retry_infra, under=only)
    todo = [s for s in interleaved(run, partitions) if s.trial_id not in done]
    # A trial run again first loses its earlier rows (a batch file would keep them).
    forget_trials(warehouse, run.run_id, partitions, todo)
    left = Counter((s.config.id, s.repetition) for s in todo)
    finished: queue.Queue[Partition | None] = queue.Queue()
    counts = threading.Lock()
    writer = TrialRowWriter(warehouse, run.run_id)
    tests_of: dict[str, list[dict[str, Any]]] = {}

    def on_tests(row: dict[str, Any], tests: list[dict[str, Any]]) -> None:
        tests_of[row["trial_id"]] = tests  # written with the trial's row, before it

    def on_done(row: dict[str, Any], checks: list[dict[str, Any]]) -> None:
        quick = is_quick(row.get("duration_seconds"))
        writer.add(row, checks, tests_of.pop(row["trial_id"], []), quick=quick)
        if progress:
            progress(row)
        key = (row["config_id"], int(row["repetition"]))
        with counts:
            left[key] -= 1
            ended = left[key] == 0
            if ended:
                writer.flush(key)  # its held rows on disk before the caller reads them
        if ended:  # (outside the lock: the other partitions' trials go on ending meanwhile)
            # one file per table for every later read (scoring it first), not one per trial
            join_partition(warehouse, run.run_id, key)
            finished.put(key)

    stopping = threading.Event()  # the caller is gone (Ctrl-C in its thread, or it stopped early)
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
        cancelled=_stop_when(paths.cancel_flag(run.run_id).exists, interrupted, stopping),
        attempt_no=attempt_no,
        on_trial_done=on_done,
        on_test_results=on_tests,
        prepare_cache=paths.prepare_cache,
        objects_cache=paths.objects_cache,
    )
    if run.launch.ci is not None:  # commit + push each trial's final state to bench/<run>/<trial>
        from bench_pipeline.runs.ci_push import ci_finalizer

        ctx.finalize_workspace = ci_finalizer(run)
    from bench_pipeline.workspace import process

    # One registry per run; every trial of the run is in it.
    process.pid_registry = paths.pid_registry(run.run_id)
    width = max(run.config(c).max_parallel for c, _ in partitions) if partitions else 1
    failure: list[BaseException] = []

    def pool() -> None:
        try:
            run_trials(ctx, todo, width)
        except BaseException as exc:  # re-raised in the calling thread below
            failure.append(exc)
        finally:
            try:
                writer.close()  # the held rows of trials that ended, whatever stopped the pool
            except BaseException as exc:
                failure.append(exc)
            finished.put(None)

    reported: set[Partition] = set()
    nothing_to_run = [key for key in partitions if left[key] == 0]  # before any trial ends
    worker = threading.Thread(target=pool, name="trial-pool", daemon=True)
    worker.start()
    try:
        for key in nothing_to_run:
            # (ended before: joined then, unless a kill -9 came between its end and the join)
            join_partition(warehouse, run.run_id, key)
            reported.add(key)
            yield key
        while (key := finished.get()) is not None:
            reported.add(key)
            yield key
    except BaseException:
        # Ctrl-C reaches this thread, not the pool's; a caller that stops early lands here
        # too. The pool stops as on `bench cancel`: running agents killed, the rest left to
        # `--resume`.
        stopping.set()
        raise
    finally:  # no trial outlives the call
        worker.join()
    if failure:
        raise failure[0]
    # A trial that ended without a row (a harness fault inside the pool) still leaves its
    # partition to be scored and shown with what it has.
    yield from (key for key in partitions if key not in reported)


def interleaved(run: BenchmarkRun, partitions: list[Partition]) -> list[TrialSpec]:
    """The trials of `partitions` in start order: repetition by repetition (in the order the
    partitions are given), and within one, task by task with every configuration's trial of
    that task side by side (the run's per-repetition config and task orders alternate)."""
    by_rep: dict[int, list[str]] = {}
    for config_id, rep in partitions:
        by_rep.setdefault(rep, []).append(config_id)
    order: list[TrialSpec] = []
    for rep, config_ids in by_rep.items():
        columns = [run.trial_specs(c, rep) for c in config_ids]
        for row in zip(*columns, strict=True):
            order.extend(row)
    return order


def frozen_inputs(run: BenchmarkRun, paths: BenchPaths) -> Path:
    """The run's input store, filled from the factory the first time (idempotent): trials
    snapshot from here, so editing a grader during a run changes nothing already frozen."""
    store = paths.inputs_root(run.run_id)
    freeze_inputs(run.launch.suite.directory, run.taskset.input_hashes, store)
    return store


def finished_trials(
    warehouse: Warehouse, run_id: str, retry_infra: bool, under: str | None = None
) -> set[str]:
    """Trial ids of the run (of one partition folder, `under`) that have a final result
    (cancelled ones are redone on resume; infrastructure failures too when `retry_infra`)."""
    trials = warehouse.read("trials", run_id, under=under)
    if trials.empty:
        return set()
    redo = {OUTCOME_CANCELLED} | (set(INFRA_OUTCOMES) if retry_infra else set())
    return set(trials.loc[~trials["outcome"].isin(redo), "trial_id"])
