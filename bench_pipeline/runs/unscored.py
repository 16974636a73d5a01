"""A run's unscored cells and why (`results.unscored_cells`), read from its score files."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench_pipeline.formats.vocabulary import SCORE_SCORED
from bench_pipeline.warehouse.store import Warehouse

if TYPE_CHECKING:
    import pandas as pd

READ = ("run_id", "trial_id", "config_id", "scorer", "status", "reason", "scored_at")


def unscored(warehouse: Warehouse, run_id: str, config_table: pd.DataFrame) -> pd.DataFrame:
    """`results.with_missing` of `results.unscored_cells` of the run's latest score rows and
    its config table. Reads the rows that are not `scored` first (a run usually has few), then
    every row of their trials, so that a cell a later rescore scored is not listed: the whole
    score table is read only when most cells are unscored."""
    import pyarrow.dataset as ds

    from bench_pipeline.results.unscored import unscored_cells, with_missing
    from bench_pipeline.warehouse.columns import read_columns

    files = warehouse.files("scores", run_id)  # (both reads see the same files)
    status = ds.field("status")
    not_scored = status.is_null() | (status != SCORE_SCORED)  # (a null compares to nothing)
    gap = read_columns(warehouse, "scores", run_id, READ, where=not_scored, files=files)
    if not gap.empty:
        trial_ids = sorted(set(gap["trial_id"].astype(str)))
        where = ds.field("trial_id").isin(trial_ids)
        gap = read_columns(warehouse, "scores", run_id, READ, where=where, files=files)
    return with_missing(unscored_cells(gap), config_table)
