"""Pin a suite's baseline run: the one use case behind `bench baseline set` and the Dagster
`bench_set_baseline_job`."""

from __future__ import annotations

from bench_pipeline.runs.benchmark_run import load_run, run_exists
from bench_pipeline.warehouse.store import Warehouse


class BaselineError(ValueError):
    """The run cannot be the suite's baseline (one line saying why)."""


def set_baseline(warehouse: Warehouse, suite: str, run_id: str) -> None:
    if not run_id:
        raise BaselineError("baseline set: give SUITE RUN")
    if not run_exists(warehouse, run_id):
        raise BaselineError(f"baseline: no benchmark run '{run_id}'")
    from bench_pipeline.runs.derived import pin_baseline  # the results load only when pinning

    run = load_run(run_id, warehouse)
    if run.suite != suite:
        raise BaselineError(f"baseline: run {run_id} is of suite '{run.suite}', not '{suite}'")
    if not warehouse.files("trials", run_id):  # (a gate against it would compare nothing)
        raise BaselineError(
            f"baseline: run {run_id} has no trials; pin a run with results "
            "(`bench results --list`), or finish it first with `bench run --resume`"
        )
    pin_baseline(warehouse, suite, run_id)
