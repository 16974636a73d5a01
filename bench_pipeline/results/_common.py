"""Shared helpers of the results package (not public API)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from bench_pipeline.tables import (
    SCORE_ERROR,
    SCORE_INCONCLUSIVE,
    SCORE_MISSING,
    SCORE_NOT_SCORED,
    SCORE_SCORED,
)

# Status codes used inside the vectorized code; position = code. "other" holds any status the
# tables module does not define (treated like any non-scored status).
STATUS_LABELS: list[str] = [
    SCORE_SCORED,
    SCORE_NOT_SCORED,
    SCORE_INCONCLUSIVE,
    SCORE_ERROR,
    SCORE_MISSING,
    "other",
]
STATUS_CODE = {label: code for code, label in enumerate(STATUS_LABELS)}
CODE_SCORED = 0
CODE_MISSING = STATUS_CODE[SCORE_MISSING]
CODE_OTHER = STATUS_CODE["other"]

# Scorers that decide pass/fail, in priority order; otherwise the first group in display order.
PRIMARY_PRIORITY = ("checks", "assert", "ci")
DISPLAY_ORDER = ("checks", "assert", "ci", "rubric", "llm_judge")
JUDGE_GROUP = "llm_judge"
UNTAGGED = "-"
EPS = 1e-9


def score_col(name: str) -> str:
    """Column holding the mean (tables) or value (per trial) of a scorer or scorer group."""
    return f"score_{name}"


def status_col(name: str) -> str:
    return f"status_{name}"


def scored_col(name: str) -> str:
    return f"scored_{name}"


def of_col(name: str) -> str:
    return f"of_{name}"


def display_key(name: str) -> tuple[int, str]:
    """Sort key putting well-known scorers first, judge criteria after their group."""
    group = name.split(":", 1)[0]
    rank = DISPLAY_ORDER.index(group) if group in DISPLAY_ORDER else len(DISPLAY_ORDER)
    return (rank, name)


def default_group(scorer: str) -> str:
    return JUDGE_GROUP if scorer.startswith(JUDGE_GROUP + ":") else scorer


def sql_str(value: str) -> str:
    """A SQL string literal."""
    return "'" + str(value).replace("'", "''") + "'"


def to_arrow(frame: pd.DataFrame, columns: Sequence[str]) -> pa.Table:
    return pa.Table.from_pandas(frame.loc[:, list(columns)], preserve_index=False)


def connect() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    return con


def as_str_series(values: Iterable[object] | pd.Series) -> pd.Series:
    """Categorical or arrow-backed keys back to plain strings for output tables."""
    s = pd.Series(values)
    if isinstance(s.dtype, pd.CategoricalDtype):
        s = s.astype(object)
    return s.astype("str")


def nan_to_none(value: object) -> object:
    if value is None:
        return None
    if isinstance(value, float | np.floating) and math.isnan(float(value)):
        return None
    if value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, np.generic):
        return value.item()
    return value


def single_run(trials: pd.DataFrame, what: str) -> str | None:
    """The one run_id of `trials` (None when empty); refuse several runs."""
    runs = pd.unique(trials["run_id"].astype(object)) if len(trials) else []
    if len(runs) > 1:
        raise ValueError(
            f"{what} takes the trials of ONE benchmark run, got {len(runs)} runs "
            f"({', '.join(sorted(map(str, runs))[:5])}...); filter by run_id first"
        )
    return str(runs[0]) if len(runs) else None
