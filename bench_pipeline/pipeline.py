"""The operations of a benchmark, shared by the Dagster assets and the `bench` CLI.

start a run (validate, freeze, store) -> execute a partition (config x repetition) -> score it
-> build the derived tables. Each step reads what it needs from the warehouse and the frozen
run manifest, never from memory of an earlier step, so steps can run in different processes.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from bench_pipeline.agents import make_agent
from bench_pipeline.benchmark_run import BenchmarkRun, freeze_run, load_run, save_run
from bench_pipeline.formats.loader import load_launch, load_prices
from bench_pipeline.formats.model import Judge, Launch
from bench_pipeline.formats.refs import FactoryView
from bench_pipeline.scoring import INITIAL, preflight_scorers, score_trials
from bench_pipeline.tables import INFRA_OUTCOMES, OUTCOME_CANCELLED
from bench_pipeline.trials.runner import TrialContext, TrialSpec, run_trials
from bench_pipeline.warehouse.store import Warehouse


@dataclass(frozen=True)
class BenchPaths:
    """Where a bench installation keeps its state (all derived from one home folder)."""

    home: Path
    warehouse_root: str

    @classmethod
    def from_home(cls, home: str | Path, warehouse_root: str | None = None) -> BenchPaths:
        home = Path(home).absolute()
        return cls(home, warehouse_root or str(home / "warehouse"))

    @property
    def warehouse(self) -> Warehouse:
        return Warehouse(self.warehouse_root)

    def evidence_root(self, run_id: str) -> Path:
        return self.home / "evidence" / run_id

    @property
    def work_root(self) -> Path:
        return self.home / "work"

    def cancel_flag(self, run_id: str) -> Path:
        return self.home / "cancel" / run_id

    def pid_registry(self, run_id: str) -> Path:
        """Process groups a run's trials have alive (killed when the run is found orphaned)."""
        return self.home / "pids" / run_id


def default_home() -> Path:
    return Path(os.environ.get("BENCH_HOME") or Path.cwd() / ".bench").absolute()


# --------------------------------------------------------------------------- start


def load_and_check(
    launch_path: str | Path, environ: dict[str, str] | None = None
) -> tuple[Launch, Any]:
    """Load a launch and refuse, before anything runs, what would fail mid-run."""
    launch = load_launch(launch_path)
    prices = load_prices(FactoryView(launch.factory_root))
    env = dict(environ if environ is not None else os.environ)
    for config in launch.configs:
        make_agent(config.agent).preflight(env)
    return launch, prices


def start_run(
    launch_path: str | Path,
    paths: BenchPaths,
    environ: dict[str, str] | None = None,
    overrides: dict[str, Any] | None = None,
) -> BenchmarkRun:
    """Validate, apply command-line overrides, freeze and store a new benchmark run."""
    launch, prices = load_and_check(launch_path, environ)
    if overrides:
        launch = apply_overrides(launch, **overrides)
    run = freeze_run(launch, prices, launch_path)
    preflight_scorers(run, run.launch.scorers, dict(environ if environ is not None else os.environ))
    save_run(run, paths.warehouse)
    return run


def latest_run_id(warehouse: Warehouse, suite: str | None = None) -> str | None:
    runs = warehouse.read_runs()
    if suite:
        runs = runs[runs["suite"] == suite]
    if runs.empty:
        return None
    return str(runs.sort_values("created_at").iloc[-1]["run_id"])


def resolve_run(warehouse: Warehouse, run_id: str | None) -> BenchmarkRun:
    rid = run_id or latest_run_id(warehouse)
    if rid is None:
        raise LookupError("no benchmark run in the warehouse yet; start one with `bench run`")
    return load_run(rid, warehouse)


# --------------------------------------------------------------------------- trials


def trial_part(config_id: str, rep: int, task_id: str) -> str:
    return f"{partition_dir(config_id, rep)}/{task_id}"


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

    def on_done(row: dict[str, Any], checks: list[dict[str, Any]]) -> None:
        part = trial_part(config_id, rep, row["task_id"])
        warehouse.write("trials", [row], run.run_id, part)
        warehouse.write("check_results", checks, run.run_id, part)
        if progress:
            progress(row)

    ctx = TrialContext(
        run_id=run.run_id,
        suite=run.suite,
        suite_dir=run.launch.suite.directory,
        taskset=run.taskset,
        prices=run.prices,
        evidence_root=paths.evidence_root(run.run_id),
        work_root=paths.work_root,
        prepare_commands=run.launch.suite.prepare_commands,
        environ=dict(environ if environ is not None else os.environ),
        cancelled=cancel_flag.exists,
        attempt_no=attempt_no,
        on_trial_done=on_done,
    )
    if run.launch.ci is not None:  # commit + push each trial's final state to bench/<run>/<trial>
        from bench_pipeline.ci.push import ci_finalizer

        ctx.finalize_workspace = ci_finalizer(run)
    from bench_pipeline.workspace import process

    # One registry per run; concurrent partitions of the run share it.
    process.pid_registry = paths.pid_registry(run.run_id)
    run_trials(ctx, todo, config.max_parallel)
    return warehouse.read("trials", run.run_id, under=partition_dir(config_id, rep))


def finished_trials(
    warehouse: Warehouse, run_id: str, config_id: str, rep: int, retry_infra: bool
) -> set[str]:
    """Trial ids of the partition that have a final result (cancelled ones are redone on resume;
    infrastructure failures too when `retry_infra`)."""
    trials = warehouse.read("trials", run_id, under=partition_dir(config_id, rep))
    if trials.empty:
        return set()
    redo = {OUTCOME_CANCELLED} | (set(INFRA_OUTCOMES) if retry_infra else set())
    return set(trials.loc[~trials["outcome"].isin(redo), "trial_id"])


def partition_dir(config_id: str, rep: int) -> str:
    """The warehouse sub-folder of one partition's rows (trials, check results, scores)."""
    return f"{config_id}/rep{int(rep)}"


# --------------------------------------------------------------------------- scores


def score_partition(
    run: BenchmarkRun,
    config_id: str,
    rep: int,
    paths: BenchPaths,
    *,
    scorer_specs: list[str] | None = None,
    rescore_id: str = INITIAL,
    only_unscored: bool = True,
    judge: Judge | None = None,
    environ: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Grade the partition's trials; rows are added to the `<rescore_id>` file, never replaced.
    `judge` replaces the run's judge (criteria merged by a rescore)."""
    warehouse = paths.warehouse
    trials = warehouse.read("trials", run.run_id, under=partition_dir(config_id, rep))
    if trials.empty:
        return []
    trials = trials.sort_values("attempt_no").drop_duplicates("trial_id", keep="last")
    existing = warehouse.read("scores", run.run_id, under=partition_dir(config_id, rep))
    rows = score_trials(
        run,
        trials,
        scorer_specs,
        existing=existing,
        only_unscored=only_unscored,
        rescore_id=rescore_id,
        judge=judge if judge is not None else run.launch.judge,
        environ=environ,
    )
    if rows:
        part = f"{partition_dir(config_id, rep)}/{rescore_id}"
        same_file = (
            existing[existing["rescore_id"] == rescore_id] if not existing.empty else existing
        )
        merged = (
            pd.concat([same_file, pd.DataFrame(rows)], ignore_index=True)
            if not same_file.empty
            else rows
        )
        warehouse.write("scores", merged, run.run_id, part)
    return rows


def print_progress(total: int) -> Callable[[dict[str, Any]], None]:
    """A progress printer for long work: one line per finished trial on stderr."""
    import threading

    state = {"n": 0}
    lock = threading.Lock()  # trials finish on several threads at once

    def show(row: dict[str, Any]) -> None:
        with lock:
            _show(row)

    def _show(row: dict[str, Any]) -> None:
        state["n"] += 1
        cost = "?" if row.get("cost_usd") is None else f"${row['cost_usd']:.4f}"
        print(
            f"  [{state['n']:>3}/{total}] {row['trial_id']:<40} {row['outcome']:<16} "
            f"{row['duration_seconds']:6.2f}s {cost}",
            file=sys.stderr,
            flush=True,
        )

    return show


# --------------------------------------------------------------------------- launch overrides


def apply_overrides(
    launch: Launch,
    *,
    name: str | None = None,
    max_tasks: int | None = None,
    repeats: int | None = None,
    parallel: int | None = None,
    timeout: float | None = None,
) -> Launch:
    """The command line's narrowing of a launch (`bench run --name/--max/--repeats/...`)."""
    from dataclasses import replace

    from bench_pipeline.formats.errors import BenchInputError
    from bench_pipeline.formats.model import MAX_REPETITIONS, MAX_TRIALS

    tasks = list(launch.tasks)
    if name:
        needles = [n.lower() for n in name.split("|") if n]
        tasks = [
            t for t in tasks if any(n in t.id.lower() or n in t.title.lower() for n in needles)
        ]
        if not tasks:
            raise BenchInputError(None, "--name", f"no task id or title matches '{name}'")
    if max_tasks is not None:
        if max_tasks < 1:
            raise BenchInputError(None, "--max", "must be at least 1")
        tasks = tasks[:max_tasks]
    configs = list(launch.configs)
    if parallel is not None:
        if parallel < 1:
            raise BenchInputError(None, "--parallel", "must be at least 1")
        configs = [replace(c, max_parallel=parallel) for c in configs]
    if timeout is not None:
        if timeout <= 0:
            raise BenchInputError(None, "--timeout", "must be a positive number of seconds")
        configs = [
            replace(c, agent=replace(c.agent, timeout_seconds=float(timeout))) for c in configs
        ]
    reps = launch.repetitions
    if repeats is not None:
        if not 1 <= repeats <= MAX_REPETITIONS:
            raise BenchInputError(None, "--repeats", f"must be between 1 and {MAX_REPETITIONS}")
        reps = repeats
    out = replace(
        launch,
        tasks=tuple(tasks),
        configs=tuple(configs),
        repetitions=reps,
        max_parallel=parallel or launch.max_parallel,
    )
    if out.trial_count > MAX_TRIALS:
        raise BenchInputError(
            None, "--repeats", f"{out.trial_count} trials; a launch runs at most {MAX_TRIALS}"
        )
    return out
