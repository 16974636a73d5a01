"""A run's unscored cells and why (`results.unscored_cells`), read from its score files."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench_pipeline.formats.vocabulary import SCORE_SCORED
from bench_pipeline.warehouse.store import Warehouse

if TYPE_CHECKING:
    import pandas as pd

READ = ("run_id", "trial_id", "config_id", "scorer", "status", "reason", "scored_at")
# (read as categories: few distinct values, each decoded once)
FEW_VALUES = ("run_id", "config_id", "scorer", "status")


def unscored(
    warehouse: Warehouse,
    run_id: str,
    config_table: pd.DataFrame,
    per_trial: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """`results.with_missing` of `results.unscored_cells` of the run's latest score rows and
    its config table. Reads only the rows that are not `scored` (a run usually has few). A
    cell counts by its latest row, so one a later rescore scored is not listed: the run's
    per-trial results (`per_trial`, else `per_trial_results`: the cached ones) say which
    cells' latest row is not scored, and where a cell's latest row is not, it is the newest
    of the rows read. Rows whose trial the per-trial results do not hold (another run's rows
    in this run's folder) are decided by every row of their trials, read for them only."""
    import pyarrow.dataset as ds

    from bench_pipeline.results.unscored import unscored_cells, with_missing
    from bench_pipeline.warehouse.columns import read_columns

    files = warehouse.files("scores", run_id)  # (every read sees the same files)
    status = ds.field("status")
    not_scored = status.is_null() | (status != SCORE_SCORED)  # (a null compares to nothing)
    gap = read_columns(
        warehouse, "scores", run_id, READ, categorical=FEW_VALUES, where=not_scored, files=files
    )
    if not gap.empty:
        settled, unsettled = _settled_by_per_trial(warehouse, run_id, gap, per_trial)
        if len(unsettled):
            where = ds.field("trial_id").isin(sorted(unsettled))
            rows = read_columns(warehouse, "scores", run_id, READ, where=where, files=files)
            gap = rows if settled is None else _concat(settled, rows)
        else:
            gap = settled
    return with_missing(unscored_cells(gap), config_table)


def _settled_by_per_trial(
    warehouse: Warehouse, run_id: str, gap: pd.DataFrame, per_trial: pd.DataFrame | None
) -> tuple[pd.DataFrame | None, set[str]]:
    """(the rows of `gap` whose cell's latest status in the per-trial results is not scored;
    the trial ids of the rows those results cannot settle: every row when there are none)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from bench_pipeline.results._common import arrow_strings, status_col

    if per_trial is None:
        from bench_pipeline.runs.derived import per_trial_results

        found = per_trial_results(warehouse, run_id)
        per_trial = None if found is None else found[0]
    if (
        per_trial is None
        or len(per_trial) == 0
        or "trial_id" not in per_trial
        # (ids are unique within one run only)
        or set(per_trial["run_id"].unique().tolist()) != {run_id}
        or gap["trial_id"].isna().any()  # (a row without a trial: the rows decide, as read)
    ):
        return None, set(gap["trial_id"].astype(str))
    # Each gap row's trial among the per-trial rows: the gap's ids made unique, and those
    # looked up from the per-trial side (a hash table of the few, not of every trial's id).
    encoded = pc.dictionary_encode(arrow_strings(gap["trial_id"]))
    ids = encoded.dictionary
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    at = pc.index_in(arrow_strings(per_trial["trial_id"]), value_set=ids)
    found = np.flatnonzero(at.is_valid().to_numpy(zero_copy_only=False))
    row_of_id = np.full(len(ids), -1, dtype=np.int64)
    row_of_id[at.filter(at.is_valid()).to_numpy(zero_copy_only=False)] = found
    row = row_of_id[codes]
    row[(gap["run_id"] != run_id).to_numpy(dtype=bool, na_value=True)] = -1
    scorers = gap["scorer"]
    keep = np.zeros(len(gap), dtype=bool)
    for name in scorers.dropna().unique().tolist():
        mine = (scorers == name).to_numpy(dtype=bool, na_value=False, copy=True)
        column = status_col(str(name))
        if column not in per_trial:  # (a scorer the per-trial results do not know)
            row[mine] = -1
            continue
        scored = (per_trial[column] == SCORE_SCORED).to_numpy(dtype=bool, na_value=False)
        mine &= row >= 0
        keep[mine] = ~scored[row[mine]]
    row[scorers.isna().to_numpy()] = -1
    open_codes = np.unique(codes[row < 0])
    # (a trial read again is read whole: none of its rows is kept from here as well)
    keep &= ~np.isin(codes, open_codes)
    return gap.iloc[np.flatnonzero(keep)], set(ids.take(pa.array(open_codes)).to_pylist())


def _concat(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    import pandas as pd

    frames = [f.astype({"trial_id": object}) for f in (a, b) if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else b
