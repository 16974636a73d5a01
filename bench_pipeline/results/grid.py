"""Task x config grid of one run.

`task_config_grid(trials, scores, *, per_trial=None)` -> one row per (task_id, config_id):
`run_id`, `task_id`, `config_id`, `holdout`, `reps` (trials in the cell), `reps_scored`
(primary scorer scored), `reps_passed` (primary scorer == 1), `overall` (mean per-trial overall
over the repetitions), `score_<group>` for every scorer group (mean of scored values over the
repetitions, e.g. `score_checks`, `score_llm_judge`), `avg_cost_usd` (known costs only),
`cost_known_reps`, `trial_ids` (list of the trial ids behind the cell, by repetition).

`grid_pivot(grid, value="overall")` -> display table: index task_id, one column per config_id.
`value` is any grid column, or "passed" for "reps_passed/reps" text.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ._common import as_str_series, display_key, score_col, single_run
from .config_table import catalog_for
from .scores import trial_overall


def task_config_grid(
    trials: pd.DataFrame, scores: pd.DataFrame, *, per_trial: pd.DataFrame | None = None
) -> pd.DataFrame:
    """One row per (task_id, config_id) with repetition counts, means and the trial ids."""
    pt = per_trial if per_trial is not None else trial_overall(trials, scores)
    single_run(pt, "task_config_grid")
    catalog = catalog_for(pt, scores)
    groups = sorted(
        {g for g in catalog["scorer_group"] if score_col(g) in pt.columns}, key=display_key
    )
    keys = ["task_id", "config_id"]
    passed = pt["passed"].to_numpy(dtype=float, na_value=np.nan)
    cost = pt["cost_usd"].astype(float)
    work = pd.DataFrame(
        {
            "task_id": pt["task_id"],
            "config_id": pt["config_id"],
            "_one": 1,
            "_pass": np.nan_to_num(passed, nan=0.0),
            "_scored": ~np.isnan(passed),
            "_overall": pt["overall"].astype(float),
            "_cost": cost,
            "_holdout": pt["holdout"].fillna(False).astype(bool) if "holdout" in pt else False,
        }
    )
    aggs = {
        "reps": ("_one", "sum"),
        "reps_scored": ("_scored", "sum"),
        "reps_passed": ("_pass", "sum"),
        "overall": ("_overall", "mean"),
        "avg_cost_usd": ("_cost", "mean"),
        "cost_known_reps": ("_cost", "count"),
        "holdout": ("_holdout", "any"),
    }
    for i, g in enumerate(groups):
        work[f"_g{i}"] = pt[score_col(g)].astype(float)
        aggs[score_col(g)] = (f"_g{i}", "mean")
    out = work.groupby(keys, observed=True, sort=True).agg(**aggs).reset_index()
    for col in ("reps", "reps_scored", "reps_passed", "cost_known_reps"):
        out[col] = out[col].astype(int)

    # trial ids per cell, in repetition order, without a Python loop over rows
    order = np.lexsort(
        (
            pt["repetition"].to_numpy(),
            pt["config_id"].cat.codes.to_numpy(),
            pt["task_id"].cat.codes.to_numpy(),
        )
    )
    ids = pt["trial_id"].to_numpy(dtype=object)[order]
    t_codes = pt["task_id"].cat.codes.to_numpy()[order]
    c_codes = pt["config_id"].cat.codes.to_numpy()[order]
    cell = t_codes.astype(np.int64) * (len(pt["config_id"].cat.categories) + 1) + c_codes
    bounds = np.flatnonzero(np.diff(cell)) + 1 if len(cell) else np.zeros(0, dtype=int)
    chunks = np.split(ids, bounds) if len(ids) else []
    out["trial_ids"] = [chunk.tolist() for chunk in chunks]

    out.insert(0, "run_id", pt["run_id"].astype(object).iloc[0] if len(pt) else None)
    for key in keys:
        out[key] = as_str_series(out[key]).to_numpy()
    cols = ["run_id", "task_id", "config_id", "holdout", "reps", "reps_scored", "reps_passed"]
    cols += ["overall", *[score_col(g) for g in groups], "avg_cost_usd", "cost_known_reps"]
    return out[[*cols, "trial_ids"]]


def grid_pivot(grid: pd.DataFrame, value: str = "overall") -> pd.DataFrame:
    """Wide display: rows task_id, columns config_id; "passed" gives "reps_passed/reps" text."""
    if value == "passed":
        cells = grid.assign(
            _v=grid["reps_passed"].astype(int).astype(str)
            + "/"
            + grid["reps"].astype(int).astype(str)
        )
        value_col = "_v"
    else:
        if value not in grid.columns:
            raise ValueError(f"unknown grid value {value!r}; choose one of {list(grid.columns)}")
        cells, value_col = grid, value
    wide = cells.pivot(index="task_id", columns="config_id", values=value_col)
    wide.columns.name = None
    return wide
