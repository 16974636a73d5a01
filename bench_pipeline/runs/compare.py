"""`bench compare`: paired comparison of a run's configurations against a config or a run.

The statistics live in `results.compare`; this module picks the rows (latest trial and score
per cell), refuses to mix task-set revisions, and renders the result for the terminal.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from bench_pipeline import results as R
from bench_pipeline.formats.errors import BenchInputError
from bench_pipeline.runs.benchmark_run import load_run, run_exists
from bench_pipeline.runs.derived import run_rows
from bench_pipeline.warehouse.store import Warehouse


def compare_command(
    warehouse: Warehouse, run_id: str, against: str | None, candidate: str | None = None
) -> dict[str, Any]:
    """Every config of `run_id` (or only `candidate`) paired against `against`: a config id of
    the run, another run id (same config ids), or None for the baseline config."""
    run = load_run(run_id, warehouse)
    trials, scores = run_rows(warehouse, run_id)
    config_ids = [c.id for c in run.launch.configs]
    if candidate is not None and candidate not in config_ids:
        raise BenchInputError(
            None,
            "candidate",
            f"run {run_id} has no config '{candidate}'; configs: {', '.join(config_ids)}",
        )
    if against is None or against in config_ids:
        rows = R.compare_all(trials, scores, against)
        mode = "config"
    elif run_exists(warehouse, against):
        other = load_run(against, warehouse)
        if other.taskset.revision != run.taskset.revision:
            raise BenchInputError(
                None,
                "against",
                f"run {against} ran task-set revision {other.taskset.revision}, run {run_id} "
                f"{run.taskset.revision}: results of different revisions are never compared",
            )
        bt, bs = run_rows(warehouse, against)
        both_t, both_s = (
            pd.concat([trials, bt], ignore_index=True),
            pd.concat([scores, bs], ignore_index=True),
        )
        shared = [c for c in config_ids if c in {c2.id for c2 in other.launch.configs}]
        rows = pd.DataFrame(
            [
                R.paired_comparison(
                    both_t, both_s, c, c, candidate_run_id=run_id, baseline_run_id=against
                )
                for c in shared
            ]
        )
        mode = "run"
    else:
        raise BenchInputError(
            None, "against", f"'{against}' is neither a config of run {run_id} nor a run id"
        )
    if candidate is not None and not rows.empty:
        rows = rows[rows["candidate_config"] == candidate]
    return {
        "run_id": run_id,
        "against": against,
        "mode": mode,
        "comparisons": [{k: _plain(v) for k, v in r.items()} for r in rows.to_dict("records")],
    }


def _plain(value: Any) -> Any:
    if isinstance(value, float) and value != value:
        return None
    if hasattr(value, "item"):
        return value.item()
    return value
