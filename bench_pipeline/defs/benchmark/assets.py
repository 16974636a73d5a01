"""Stage 1 and 2 assets: the frozen task set, then trials and scores per config x repetition."""
# No `from __future__ import annotations` in this layer: Dagster reads config and resource
# types from the real annotations.

import json
import os
from collections import Counter
from typing import TYPE_CHECKING

import dagster as dg

# Private, on purpose: Dagster defers Ctrl-C inside a step until the step's next event, and a
# pool of trials yields none for minutes; the pool polls this to stop as `bench cancel` does.
from dagster._utils.interrupts import check_captured_interrupt

from bench_pipeline.defs.metadata import KINDS, OWNERS, rows_table
from bench_pipeline.defs.partitions import register_configs, split_config_key, trial_partitions
from bench_pipeline.defs.resources import BenchResource
from bench_pipeline.formats.model import Judge
from bench_pipeline.formats.serialize import from_jsonable
from bench_pipeline.runs.benchmark_run import BenchmarkRun, load_run
from bench_pipeline.runs.execute import execute_partition
from bench_pipeline.runs.partition_view import PARTITION_COLUMNS, partition_trials, trial_rows
from bench_pipeline.runs.paths import BenchPaths
from bench_pipeline.runs.progress import trial_progress
from bench_pipeline.runs.score import INITIAL, score_partition
from bench_pipeline.runs.start import resolve_run, start_run

if TYPE_CHECKING:  # a type only: importing pandas here would cost every definitions load
    import pandas as pd


class StartRunConfig(dg.Config):
    """Which launch to freeze (a path; default $BENCH_LAUNCH), or an already frozen run id."""

    launch: str = ""
    run_id: str = ""


class RunSelection(dg.Config):
    """The benchmark run a partition belongs to; empty = the latest run in the warehouse."""

    run_id: str = ""
    retry_infra: bool = True


class ScoreConfig(dg.Config):
    run_id: str = ""
    scorers: list[str] = []  # empty = the launch's scorers
    rescore_id: str = INITIAL
    only_unscored: bool = True
    judge_json: str = (
        ""  # a judge with merged criteria (bench rescore --criteria); empty = the run's
    )


PARTITION_SCHEMA = dg.TableSchema(
    columns=[dg.TableColumn(n, t, description=d) for n, (t, d) in PARTITION_COLUMNS.items()]
)


@dg.asset(
    group_name="tasks",
    description="The suite's tasks frozen at launch (content-hashed): prompt, repo and base "
    "commit, checks and their grader files. Config: `launch` (a launch file) or `run_id`.",
    kinds=KINDS,
    owners=OWNERS,
    tags={"bench/stage": "tasks"},
)
def task_set(
    context: dg.AssetExecutionContext, config: StartRunConfig, bench: BenchResource
) -> dg.MaterializeResult:
    paths = bench.paths
    if config.run_id:
        run = load_run(config.run_id, paths.warehouse)
    else:
        launch = config.launch or os.environ.get("BENCH_LAUNCH", "")
        if not launch:
            raise dg.Failure(
                "no launch given: set config `launch` or BENCH_LAUNCH to a launch file"
            )
        run = start_run(launch, paths)
    register_configs(context.instance, run.suite, [c.id for c in run.launch.configs])
    return dg.MaterializeResult(metadata=task_set_metadata(run))


def task_set_metadata(run: BenchmarkRun) -> dict[str, object]:
    """What a task_set materialization shows, whoever froze the run (a launch, the nightly)."""
    tasks = run.taskset.tasks
    return {
        "run_id": run.run_id,
        "suite": run.suite,
        "revision": run.taskset.revision,
        "tasks": len(tasks),
        "configs": ", ".join(c.id for c in run.launch.configs),
        "repetitions": run.launch.repetitions,
        "launch_file": dg.MetadataValue.path(run.launch_path),
        "task_list": dg.MetadataValue.md(
            "| task | tags | difficulty | holdout | checks |\n|---|---|---|---|---|\n"
            + "\n".join(
                f"| {t.id} | {', '.join(t.tags) or '-'} | {t.difficulty or ''} | {t.holdout} | {len(t.checks)} |"
                for t in tasks
            )
        ),
    }


def _partition(
    context: dg.AssetExecutionContext, bench: BenchResource, run_id: str
) -> tuple[BenchmarkRun, tuple[str, int] | None]:
    """The run a partition step belongs to, and its (config, rep) when the run has it."""
    keys = context.partition_key.keys_by_dimension  # type: ignore[attr-defined]
    suite, config_id = split_config_key(keys["config"])
    rep = int(keys["rep"])
    # Without a run id (a UI launch or backfill): the latest run of the partition's own suite.
    run = resolve_run(bench.paths.warehouse, run_id or None, suite)
    if suite not in (None, run.suite):
        raise dg.Failure(f"run {run.run_id} is of suite '{run.suite}', partition of '{suite}'")
    if config_id not in {c.id for c in run.launch.configs} or rep > run.launch.repetitions:
        return run, None
    return run, (config_id, rep)


def _not_in_run(context: dg.AssetExecutionContext, run: BenchmarkRun) -> None:
    # Nothing is materialized (output_required=False): a partition the run does not have stays
    # "missing" in the UI instead of turning green with nothing behind it.
    context.log.info(
        f"partition {context.partition_key} is not part of run {run.run_id}: nothing to do"
    )


# What the two partitioned assets share: the partitions, the catalog's kinds, owners and
# column schema, and no output on a partition the run does not have.
PARTITIONED = {
    "group_name": "trials",
    "partitions_def": trial_partitions,
    "kinds": KINDS,
    "owners": OWNERS,
    "tags": {"bench/stage": "trials"},
    "metadata": {"dagster/column_schema": PARTITION_SCHEMA},
    "output_required": False,
}


@dg.asset(
    **PARTITIONED,
    deps=[task_set],
    pool="bench_trials",
    description="One row per trial (task x config x repetition) with outcome, tokens, cost and "
    "evidence. Partitions: `<suite>:<config>` x repetition; each materialization lists its trials.",
)
def trials(context: dg.AssetExecutionContext, config: RunSelection, bench: BenchResource):
    paths = bench.paths
    run, part = _partition(context, bench, config.run_id)
    if part is None:
        _not_in_run(context, run)
        return
    config_id, rep = part
    progress = trial_progress(len(run.taskset.tasks)) if bench.progress else None
    rows = execute_partition(
        run,
        config_id,
        rep,
        paths,
        progress=progress,
        retry_infra=config.retry_infra,
        interrupted=check_captured_interrupt,
    )
    yield dg.MaterializeResult(metadata=trials_metadata(run, rows))


def trials_metadata(run: BenchmarkRun, rows: "pd.DataFrame") -> dict[str, object]:
    """What a trials partition's materialization shows: its trials, one row each."""
    outcomes = Counter(rows["outcome"]) if not rows.empty else Counter()
    cost = rows["cost_usd"] if not rows.empty else None
    table = trial_rows(rows)
    return {
        "run_id": run.run_id,
        "suite": run.suite,
        "trials": len(rows),
        "trial_table": rows_table(table, PARTITION_COLUMNS),
        "dagster/row_count": len(table),
        "outcomes": dict(outcomes),
        "cost_usd_known": float(cost.dropna().sum()) if cost is not None else 0.0,
        "cost_unknown_trials": int(cost.isna().sum()) if cost is not None else 0,
    }


@dg.asset(
    **PARTITIONED,
    deps=[trials],
    description="Every scorer's result per trial; rescores append rows, history is kept. Each "
    "materialization lists the partition's trials with their overall score and reason.",
)
def scores(context: dg.AssetExecutionContext, config: ScoreConfig, bench: BenchResource):
    paths = bench.paths
    run, part = _partition(context, bench, config.run_id)
    if part is None:
        _not_in_run(context, run)
        return
    config_id, rep = part
    rows = score_partition(
        run,
        config_id,
        rep,
        paths,
        scorer_specs=config.scorers or None,
        rescore_id=config.rescore_id,
        only_unscored=config.only_unscored,
        judge=from_jsonable(Judge, json.loads(config.judge_json)) if config.judge_json else None,
    )
    yield dg.MaterializeResult(
        metadata=scores_metadata(run, bench.paths, config_id, rep, rows, config.rescore_id)
    )


def scores_metadata(
    run: BenchmarkRun,
    paths: BenchPaths,
    config_id: str,
    rep: int,
    rows: list[dict[str, object]],
    rescore_id: str,
    trials: "pd.DataFrame | None" = None,
) -> dict[str, object]:
    """What a scores partition's materialization shows: its trials with overall and reason
    (`trials`: the partition's trial rows, when just read)."""
    statuses = Counter(r["status"] for r in rows)
    table = partition_trials(paths.warehouse, run.run_id, config_id, rep, trials)
    return {
        "run_id": run.run_id,
        "suite": run.suite,
        "trial_table": rows_table(table, PARTITION_COLUMNS),
        "dagster/row_count": len(table),
        "rescore_id": rescore_id,
        "rows": len(rows),
        "statuses": dict(statuses),
    }
