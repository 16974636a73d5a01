"""One Dagster run per launch: every partition's trials in one shared pool, each partition
scored as its last trial ends, then the derived tables, all reported as the assets' own
materializations.

Why one run and not one per partition: a Dagster run on a persistent instance costs ~0.3 s of
storage work plus gaps between runs (measured: 1.7x a plain loop on 100 cheap trials, against
a 1.15x bar), and partitions run one after another, so configurations never alternate within
a repetition. Here the trials of all partitions share one pool, interleaved task by task, and
the asset catalog stays exact: each partition the launch ran gets a `trials` and a `scores`
materialization with the same per-trial metadata the partitioned assets write, the derived
tables and their checks the same as the results asset's. The partitioned assets are still the
way to run or backfill one partition from the UI (and the celery path's steps).
"""

# No `from __future__ import annotations`: Dagster reads config and resource types from the
# real annotations.

from collections.abc import Iterator

import dagster as dg

# Private, on purpose: Dagster defers Ctrl-C inside a step until the step's next event, and a
# pool of trials yields none for minutes; the pool polls this to stop as `bench cancel` does.
from dagster._utils.interrupts import check_captured_interrupt

from bench_pipeline.defs.benchmark.assets import scores_metadata, task_set_metadata, trials_metadata
from bench_pipeline.defs.partitions import partition_key, register_configs
from bench_pipeline.defs.resources import BenchResource
from bench_pipeline.defs.run_config import LAUNCH_OP
from bench_pipeline.runs.benchmark_run import BenchmarkRun, load_run
from bench_pipeline.runs.execute import Partition, execute_trials
from bench_pipeline.runs.progress import trial_progress
from bench_pipeline.runs.score import INITIAL, score_partition
from bench_pipeline.warehouse import layout


class LaunchConfig(dg.Config):
    """The frozen benchmark run to execute (its trials without a final result run)."""

    run_id: str
    retry_infra: bool = True


@dg.op(
    name=LAUNCH_OP,
    pool="bench_trials",
    out={},
    tags={"bench/stage": "trials"},
    description="Run every trial of a frozen benchmark run in one pool (configurations "
    "alternating task by task), score each partition as it completes, derive the results; "
    "reports task_set, each partition's trials and scores, and the derived tables.",
)
def launch(context: dg.OpExecutionContext, config: LaunchConfig, bench: BenchResource):
    # Imported here: the results stack (derived tables, explorer page) is only needed once the
    # trials are done, and the definitions load on every `bench` command and code-server start.
    from bench_pipeline.defs.results.assets import derive_results

    paths = bench.paths
    run = load_run(config.run_id, paths.warehouse)
    register_configs(context.instance, run.suite, [c.id for c in run.launch.configs])
    yield dg.AssetMaterialization("task_set", metadata=task_set_metadata(run))
    total = len(run.taskset.tasks) * len(run.launch.configs) * run.repetitions
    progress = trial_progress(total) if bench.progress else None

    def materialized(partitions: list[Partition]) -> Iterator[dg.AssetMaterialization]:
        """Each partition's materializations as its last trial ends, while the others run."""
        for config_id, rep in execute_trials(
            run,
            partitions,
            paths,
            progress=progress,
            retry_infra=config.retry_infra,
            interrupted=check_captured_interrupt,
        ):
            yield from partition_materializations(run, bench, config_id, rep)

    if run.launch.adaptive is None:
        yield from materialized(run.partitions())
    else:  # rounds until the stop rule (runs/adaptive.py) call back into this op
        from bench_pipeline.runs.adaptive import run_adaptive

        def one_round(partitions: list[Partition]) -> None:
            for event in materialized(partitions):
                context.log_event(event)  # a callback cannot yield: stored with the next event

        run_adaptive(run, paths.warehouse, one_round, paths.cancel_flag(run.run_id).exists)
    tables, checks = derive_results(run.run_id, paths)
    for name, metadata in tables:
        yield dg.AssetMaterialization(name, metadata=metadata)
    for check in checks:
        yield dg.AssetCheckEvaluation(**check)


def partition_materializations(
    run: BenchmarkRun, bench: BenchResource, config_id: str, rep: int
) -> list[dg.AssetMaterialization]:
    """Score a partition whose trials are done; its `trials` and `scores` materializations.
    Its trial rows are read once for all three (a file per trial)."""
    paths = bench.paths
    rows = paths.warehouse.read("trials", run.run_id, under=layout.partition_dir(config_id, rep))
    scored = score_partition(run, config_id, rep, paths, trials=rows)
    key = str(partition_key(run.suite, config_id, rep))
    return [
        dg.AssetMaterialization("trials", partition=key, metadata=trials_metadata(run, rows)),
        dg.AssetMaterialization(
            "scores",
            partition=key,
            metadata=scores_metadata(run, paths, config_id, rep, scored, INITIAL, rows),
        ),
    ]
