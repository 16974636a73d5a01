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

from ._common import as_str_series, display_key, score_col, single_run, str_codes
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
    t_codes, t_names = str_codes(pt["task_id"], sort=True)
    c_codes, c_names = str_codes(pt["config_id"], sort=True)
    n_c = len(c_names)
    ok = (t_codes >= 0) & (c_codes >= 0)
    raw = np.where(ok, t_codes * n_c + c_codes, 0)
    present = np.bincount(raw[ok], minlength=len(t_names) * n_c) > 0
    ids = np.flatnonzero(present)
    remap = np.full(len(present), -1, dtype=np.int64)
    remap[ids] = np.arange(len(ids))
    cell = np.where(ok, remap[raw], -1)
    del raw, remap, t_codes, c_codes  # (a million trials: every array here is 8 MiB)
    n_cells = len(ids)
    every = bool(ok.all())  # the usual case: no gathers of the rows
    rows = np.flatnonzero(ok)
    cr = cell if every else cell[rows]

    def fl(col: str) -> np.ndarray:
        values = pt[col].to_numpy(dtype=float, na_value=np.nan)
        return values if every else values[rows]

    def count(mask: np.ndarray) -> np.ndarray:
        return np.bincount(cr[mask], minlength=n_cells)

    def mean(x: np.ndarray) -> np.ndarray:
        m = ~np.isnan(x)
        num = np.bincount(cr[m], weights=x[m], minlength=n_cells)
        den = count(m)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(den > 0, num / np.maximum(den, 1), np.nan)

    passed = fl("passed")
    cost = fl("cost_usd")
    holdout = (
        pt["holdout"].to_numpy(dtype=bool, na_value=False)
        if "holdout" in pt
        else np.zeros(len(pt), dtype=bool)
    )
    holdout = holdout if every else holdout[rows]
    out = pd.DataFrame(
        {
            "task_id": np.asarray(t_names, dtype=object)[ids // n_c] if n_cells else [],
            "config_id": np.asarray(c_names, dtype=object)[ids % n_c] if n_cells else [],
        }
    )
    out["holdout"] = count(holdout) > 0
    out["reps"] = count(np.ones(len(rows), dtype=bool)).astype(int)
    out["reps_scored"] = count(~np.isnan(passed)).astype(int)
    out["reps_passed"] = count(passed == 1.0).astype(int)
    out["overall"] = mean(fl("overall"))
    for g in groups:
        out[score_col(g)] = mean(fl(score_col(g)))
    out["avg_cost_usd"] = mean(cost)
    out["cost_known_reps"] = count(~np.isnan(cost)).astype(int)
    del passed, cost, holdout

    # trial ids per cell, in repetition order, without a Python loop over rows
    order = rows[np.lexsort((pt["repetition"].to_numpy()[rows], cr))]
    bounds = np.searchsorted(cell[order], np.arange(1, n_cells))
    # the strings once, then the order (not a reordered copy of the Arrow column first)
    ids_sorted = pt["trial_id"].to_numpy(dtype=object)[order]
    out["trial_ids"] = [chunk.tolist() for chunk in np.split(ids_sorted, bounds)][:n_cells]

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
