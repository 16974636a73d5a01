"""Start a benchmark run: load and check a launch, narrow it, freeze it, store it; and find
the run a later command means."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from bench_pipeline.agents import make_agent
from bench_pipeline.formats.errors import BenchInputError
from bench_pipeline.formats.loader import load_launch, load_prices
from bench_pipeline.formats.model import Launch
from bench_pipeline.formats.refs import FactoryView
from bench_pipeline.runs.benchmark_run import BenchmarkRun, freeze_run, load_run, save_run
from bench_pipeline.runs.paths import BenchPaths
from bench_pipeline.runs.score import preflight_scorers
from bench_pipeline.warehouse.store import Warehouse
from bench_pipeline.workspace.snapshot import freeze_inputs


def load_and_check(
    launch_path: str | Path, environ: dict[str, str] | None = None
) -> tuple[Launch, Any]:
    """Load a launch and refuse, before anything runs, what would fail mid-run."""
    launch = load_launch(launch_path)
    prices = load_prices(FactoryView(launch.factory_root))
    env = dict(environ if environ is not None else os.environ)
    for config in launch.configs:
        make_agent(config.agent).preflight(env)
        _check_isolation(config.agent)
    check_tasks_fit_agents(launch)
    return launch, prices


def check_tasks_fit_agents(launch: Launch) -> None:
    """Refuse a task that one of the launch's agents could never be given as configured."""
    for config in launch.configs:
        agent = make_agent(config.agent)
        for task in launch.tasks:
            problem = agent.task_problem(task)
            if problem is not None:
                key, why = problem
                raise BenchInputError(task.source_file or task.id, key, why)


def check_scorer_files(launch: Launch) -> None:
    """Refuse the launch's scorers' own files (a workflow scorer's YAML or module) as `run`
    refuses them before its first trial, for `validate`: not what depends on the environment
    (a judge's API key), which a factory's check does not need."""
    from bench_pipeline.scorers import ScorerContext, make_scorer

    root = launch.factory_root
    context = ScorerContext(judge=None, prices=load_prices(FactoryView(root)), factory_root=root)
    for spec in launch.scorers:
        scorer = make_scorer(spec, context)
        if not scorer.uses_judge:
            scorer.preflight()


def _check_isolation(agent: Any) -> None:
    """An explicit `isolation: sandbox` where bubblewrap cannot run is refused before anything
    runs: the results must never claim a sandbox the trials did not have."""
    from bench_pipeline.workspace.sandbox import SandboxUnavailable, resolve_mode

    try:
        resolve_mode(agent.isolation)
    except SandboxUnavailable as exc:
        raise BenchInputError(
            agent.source_file or f"agents/{agent.name}.yaml",
            "isolation",
            f"sandbox is unavailable here ({exc}); install bubblewrap (make system-deps) or "
            "set isolation: process",
        ) from None


def isolation_warnings(run: BenchmarkRun) -> list[str]:
    """One line per distinct reason the default sandbox fell back to `process` (shown when a
    run starts or resumes; each trial records the mode it really ran with)."""
    from bench_pipeline.workspace.sandbox import resolve_mode

    notes = []
    for config in run.launch.configs:
        if config.agent.isolation is None:
            _mode, note = resolve_mode(None)
            if note and note not in notes:
                notes.append(note)
    return notes


def start_run(
    launch_path: str | Path,
    paths: BenchPaths,
    environ: dict[str, str] | None = None,
    overrides: dict[str, Any] | None = None,
    checked: tuple[Launch, Any] | None = None,
) -> BenchmarkRun:
    """Validate, apply command-line overrides, freeze and store a new benchmark run.
    `checked`: what `load_and_check(launch_path, environ)` returned moments ago (the launch as
    loaded, before overrides), so the factory is not read and its refs resolved twice."""
    launch, prices = checked if checked is not None else load_and_check(launch_path, environ)
    if overrides:
        launch = apply_overrides(launch, **overrides)
    run = freeze_run(launch, prices, launch_path)
    preflight_scorers(run, run.launch.scorers, dict(environ if environ is not None else os.environ))
    save_run(run, paths.warehouse)
    # Freeze the grader files and references now, while they match the task set's hashes.
    freeze_inputs(
        run.launch.suite.directory, run.taskset.input_hashes, paths.inputs_root(run.run_id)
    )
    return run


def latest_run_id(warehouse: Warehouse, suite: str | None = None) -> str | None:
    runs = warehouse.read_runs()
    if suite:
        runs = runs[runs["suite"] == suite]
    if runs.empty:
        return None
    return str(runs.sort_values("created_at").iloc[-1]["run_id"])


def resolve_run(warehouse: Warehouse, run_id: str | None, suite: str | None = None) -> BenchmarkRun:
    """`run_id`'s run, else the latest run (of `suite` when given)."""
    rid = run_id or latest_run_id(warehouse, suite)
    if rid is None:
        where = f" of suite '{suite}'" if suite else ""
        raise LookupError(
            f"no benchmark run{where} in the warehouse yet; start one with `bench run`"
        )
    return load_run(rid, warehouse)


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
    from bench_pipeline.formats.model import (
        MAX_PARALLEL,
        MAX_REPETITIONS,
        MAX_TIMEOUT_SECONDS,
        MAX_TRIALS,
    )

    tasks = list(launch.tasks)
    if name:
        needles = [n.lower() for n in name.split("|") if n]
        tasks = [
            t for t in tasks if any(n in t.id.lower() or n in t.title.lower() for n in needles)
        ]
        if not tasks:
            raise BenchInputError(None, "name", f"no task id or title matches '{name}'")
    if max_tasks is not None:
        if max_tasks < 1:
            raise BenchInputError(None, "max_tasks", "must be at least 1")
        tasks = tasks[:max_tasks]
    configs = list(launch.configs)
    if parallel is not None:
        if not 1 <= parallel <= MAX_PARALLEL:  # (as a launch's max_parallel)
            raise BenchInputError(None, "parallel", f"must be between 1 and {MAX_PARALLEL}")
        configs = [replace(c, max_parallel=parallel) for c in configs]
    if timeout is not None:
        if not 1 <= timeout <= MAX_TIMEOUT_SECONDS:  # (as an agent's timeout_seconds; not NaN)
            raise BenchInputError(
                None, "timeout", f"must be between 1 and {MAX_TIMEOUT_SECONDS} seconds"
            )
        configs = [
            replace(c, agent=replace(c.agent, timeout_seconds=float(timeout))) for c in configs
        ]
    reps = launch.repetitions
    if repeats is not None:
        if not 1 <= repeats <= MAX_REPETITIONS:
            raise BenchInputError(None, "repetitions", f"must be between 1 and {MAX_REPETITIONS}")
        reps = repeats
    out = replace(
        launch,
        tasks=tuple(tasks),
        configs=tuple(configs),
        repetitions=reps,
        max_parallel=parallel or launch.max_parallel,
        # --repeats N asks for a fixed count: it replaces an adaptive plan.
        adaptive=None if repeats is not None else launch.adaptive,
    )
    if out.trial_count > MAX_TRIALS:
        raise BenchInputError(
            None, "repetitions", f"{out.trial_count} trials; a launch runs at most {MAX_TRIALS}"
        )
    return out
