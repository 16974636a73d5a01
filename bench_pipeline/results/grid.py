"""Task x config grid of one run.

`task_config_grid(trials, scores, *, per_trial=None)` -> one row per (task_id, config_id):
`run_id`, `task_id`, `config_id`, `holdout`, `reps` (trials in the cell), `reps_scored`
(primary scorer scored), `reps_passed` (primary scorer == 1), `overall` (mean per-trial overall
over the repetitions), `score_<group>` for every scorer group (mean of scored values over the
repetitions, e.g. `score_checks`, `score_llm_judge`), `avg_cost_usd` (known costs only),
`cost_known_reps`, `trial_ids` (list of the trial ids behind the cell, by repetition: an Arrow
list column, `list<item: string>[pyarrow]`, whose values read as Python lists).

`grid_pivot(grid, value="overall")` -> display table: index task_id, one column per config_id.
`value` is any grid column, or "passed" for "reps_passed/reps" text.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from ._common import (
    arrow_strings,
    as_str_series,
    display_key,
    first_value,
    score_col,
    single_run,
    str_codes,
)
from .config_table import ConfigCells, catalog_for
from .scores import trial_overall


def task_config_grid(
    trials: pd.DataFrame,
    scores: pd.DataFrame,
    *,
    per_trial: pd.DataFrame | None = None,
    cells: ConfigCells | None = None,
) -> pd.DataFrame:
    """One row per (task_id, config_id) with repetition counts, means and the trial ids.
    `cells`: `config_cells(per_trial)`, whose per-(config, task) sums are the grid's cells
    (then only the trial ids are gathered row by row)."""
    pt = per_trial if per_trial is not None else trial_overall(trials, scores)
    single_run(pt, "task_config_grid")
    catalog = catalog_for(pt, scores)
    groups = sorted(
        {g for g in catalog["scorer_group"] if score_col(g) in pt.columns}, key=display_key
    )
    if cells is not None and cells.per_trial is pt:
        grid = _grid_from_cells(pt, cells, groups)
        if grid is not None:
            return grid
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
            "task_id": _names_at(t_names, ids // n_c if n_cells else ids),
            "config_id": _names_at(c_names, ids % n_c if n_cells else ids),
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
    out["trial_ids"] = _id_lists(pt["trial_id"], order, bounds, n_cells)

    out.insert(0, "run_id", first_value(pt["run_id"]) if len(pt) else None)
    for key in keys:
        out[key] = as_str_series(out[key]).to_numpy()
    cols = ["run_id", "task_id", "config_id", "holdout", "reps", "reps_scored", "reps_passed"]
    cols += ["overall", *[score_col(g) for g in groups], "avg_cost_usd", "cost_known_reps"]
    return out[[*cols, "trial_ids"]]


def _grid_from_cells(
    pt: pd.DataFrame, config_cells: ConfigCells, groups: list[str]
) -> pd.DataFrame | None:
    """task_config_grid from the per-(config, task) sums of `config_cells` (the same sums in
    the same row order: equal to the row-by-row route), None when they lack a column the grid
    needs or the keys are not categoricals (the row-by-row route then)."""
    cs = config_cells.cells
    names = set(cs["_names"])
    tasks, configs = pt["task_id"], pt["config_id"]
    if (
        any(g not in names for g in groups)
        or ("holdout" in pt) != ("holdout" in cs)
        or not isinstance(tasks.dtype, pd.CategoricalDtype)
        or not isinstance(configs.dtype, pd.CategoricalDtype)
    ):
        return None
    t_names, c_names = tasks.cat.categories, configs.cat.categories
    n_c = len(c_names)
    # (int32 codes while a cell's number fits: a million trials' int64 arrays are 8 MiB
    # each, and the grid is the analysis's peak)
    width = np.int32 if (len(t_names) + 1) * (n_c + 1) < 2**31 else np.int64
    c_codes = configs.cat.codes.to_numpy().astype(width)
    t_codes = tasks.cat.codes.to_numpy().astype(width)
    # the config code of each config group, then a cell's grid position: task-major
    group_config = c_codes[config_cells.first] if len(pt) else np.zeros(0, dtype=np.int64)
    cfg_of_cell = group_config[cs["group"]]
    ok = (cs["task"] >= 0) & (cfg_of_cell >= 0)
    position = cs["task"][ok] * n_c + cfg_of_cell[ok]
    by_position = _key_order(position)
    take = np.flatnonzero(ok)[by_position]
    ids = position[by_position]
    n_cells = len(take)

    def mean(s: str, c: str) -> np.ndarray:
        num, den = cs[s][take], cs[c][take]
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(den > 0, num / np.maximum(den, 1), np.nan)

    out = pd.DataFrame(
        {
            "task_id": _names_at(t_names, ids // n_c if n_cells else ids),
            "config_id": _names_at(c_names, ids % n_c if n_cells else ids),
        }
    )
    out["holdout"] = cs["holdout"][take] > 0 if "holdout" in cs else np.zeros(n_cells, bool)
    out["reps"] = cs["trials"][take].astype(int)
    out["reps_scored"] = cs["pass_n"][take].astype(int)
    out["reps_passed"] = np.rint(cs["pass_sum"][take]).astype(int)
    out["overall"] = mean("overall_sum", "overall_n")
    for g in groups:
        out[score_col(g)] = mean(f"v_sum:{g}", f"v_n:{g}")
    out["avg_cost_usd"] = mean("cost_sum", "cost_n")
    out["cost_known_reps"] = cs["cost_n"][take].astype(int)
    out["trial_ids"] = _trial_ids(pt, t_codes, c_codes, n_c, n_cells)
    out.insert(0, "run_id", first_value(pt["run_id"]) if len(pt) else None)
    cols = ["run_id", "task_id", "config_id", "holdout", "reps", "reps_scored", "reps_passed"]
    cols += ["overall", *[score_col(g) for g in groups], "avg_cost_usd", "cost_known_reps"]
    return out[[*cols, "trial_ids"]]


def _names_at(names: pd.Index, at: np.ndarray) -> pd.Series:
    """`names[at]` as a string column, cut from the names as Arrow strings: a Python string
    per cell, then a string column made of them, cost ~25 ms per 100,000 cells."""
    strings = arrow_strings(as_str_series(names)).take(pa.array(at))
    return pd.Series(strings, dtype="str")


def _trial_ids(
    pt: pd.DataFrame, t_codes: np.ndarray, c_codes: np.ndarray, n_c: int, n_cells: int
) -> pd.arrays.ArrowExtensionArray:
    """The trial ids of every grid cell (rows with a task and a config), by repetition (ties:
    row order), cells in grid order."""
    ok = (t_codes >= 0) & (c_codes >= 0)
    every = bool(ok.all())
    rows = None if every else np.flatnonzero(ok)
    cell = t_codes * n_c + c_codes
    del t_codes, c_codes
    rep = pt["repetition"].to_numpy()
    if not every:
        cell, rep = cell[rows], rep[rows]
    # dense ranks of the cells present (a bincount, not a sort)
    present = np.bincount(cell, minlength=1) > 0 if len(cell) else np.zeros(1, dtype=bool)
    cell_rank = (np.cumsum(present) - 1).astype(cell.dtype)[cell]
    del present
    lo, hi = (int(rep.min()), int(rep.max())) if len(rep) else (0, 0)
    if np.issubdtype(rep.dtype, np.integer) and (hi - lo + 1) * max(n_cells, 1) < 2**62:
        wide = (hi - lo + 1) * max(n_cells, 1) >= 2**31
        width = np.int64 if wide else np.int32
        # (the offset first, in int64: the repetitions themselves may not fit the width)
        offset = (rep.astype(np.int64) - lo).astype(width)
        key = cell_rank.astype(width, copy=False) * (hi - lo + 1) + offset
        # the usual order (a task's configs, each by repetition) needs no sort at all
        order = None if bool((key[1:] >= key[:-1]).all()) else _key_order(key)
        # a cell's rows are side by side in key order: it starts where the ones before end
        bounds = np.cumsum(np.bincount(cell_rank, minlength=n_cells))[: max(n_cells - 1, 0)]
    else:
        order = np.lexsort((rep, cell_rank))
        bounds = np.searchsorted(cell_rank[order], np.arange(1, n_cells))
    del cell, cell_rank, rep
    if rows is not None:
        order = rows if order is None else rows[order]
    return _id_lists(pt["trial_id"], order, bounds, n_cells)


def _key_order(key: np.ndarray) -> np.ndarray:
    """The positions of `key` (integers >= 0) in ascending order, ties in row order: where
    every key is another (one trial per cell and repetition) and they fill their range well,
    each is put in its slot and the slots read in order (a few passes, against a sort's ~22
    ms a million), else a stable sort."""
    slots_n = int(key.max()) + 1 if len(key) else 0
    if slots_n <= 4 * len(key) + 1024:
        slots = np.full(slots_n, -1, dtype=np.int64 if len(key) >= 2**31 else np.int32)
        slots[key] = np.arange(len(key), dtype=slots.dtype)
        order = slots[slots >= 0]
        if len(order) == len(key):  # (else two rows shared a key: one was written over)
            return order
    return np.argsort(key, kind="stable")


def _id_lists(
    ids: pd.Series, order: np.ndarray | None, bounds: np.ndarray, n_cells: int
) -> pd.arrays.ArrowExtensionArray:
    """One list of trial ids per cell: `ids` taken in `order` (None: as they are) and cut at
    `bounds` (where each cell after the first starts), as one Arrow list column. Arrow's
    strings are cut where they lie: a Python string per trial (a million of them in a big
    run) cost more than the rest of the grid, and again when the table is written."""
    values = arrow_strings(ids).cast(pa.string())
    if order is not None:
        values = values.take(pa.array(order))
    if n_cells == 0:
        offsets = np.zeros(1, dtype=np.int32)
    else:
        offsets = np.concatenate(([0], bounds, [len(values)])).astype(np.int32)
    return pd.arrays.ArrowExtensionArray(pa.ListArray.from_arrays(pa.array(offsets), values))


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
