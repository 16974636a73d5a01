"""Shared helpers of the results package (not public API)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    import duckdb

from bench_pipeline.formats.vocabulary import (
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
    import duckdb

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


def first_value(values: pd.Series) -> object:
    """The first value as a plain Python object (NaN where missing), as `values.astype(object)`
    would give it, converting that one value only: the whole column of Arrow strings made a
    Python object per row (~60 ms at a million trials)."""
    return values.iloc[:1].astype(object).iloc[0]


def n_distinct(values: pd.Series) -> int:
    """`values.nunique()`; for integers in a compact range by marking each value seen in a
    table of the range, not a hash table (a million repetitions numbers: ~15 ms less per
    call), and without a temporary the size of the values where none is below 0 (a fresh
    8 MiB array is ~2,000 page faults, ~15 ms on these machines)."""
    if isinstance(values.dtype, np.dtype) and values.dtype.kind in "iu" and len(values):
        v = values.to_numpy()
        lo, hi = int(v.min()), int(v.max())
        compact = 8 * len(v) + 1024
        if 0 <= lo and hi <= compact:  # a table from 0, indexed by the values themselves
            seen = np.zeros(hi + 1, dtype=bool)
            seen[v] = True
            return int(np.count_nonzero(seen))
        if hi - lo <= compact:  # a table of the range, by offset
            seen = np.zeros(hi - lo + 1, dtype=bool)
            seen[v - lo] = True
            return int(np.count_nonzero(seen))
    return int(values.nunique())


def unique_inverse(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`np.unique(values, return_inverse=True)` of integers: by a bincount where they are all
    >= 0 and their range is at most ~8x their count (no sort: at 25,000 tasks the cells and
    the (tag, config) pairs are hundreds of thousands)."""
    if len(values) and values.dtype.kind in "iu" and int(values.min()) >= 0:
        size = int(values.max()) + 1
        if size <= 8 * len(values) + 1024:
            ids = np.flatnonzero(np.bincount(values, minlength=size))
            remap = np.full(size, -1, dtype=np.int64)
            remap[ids] = np.arange(len(ids))
            return ids, remap[values]
    return np.unique(values, return_inverse=True)


def is_value(values: pd.Series, value: str) -> np.ndarray:
    """`values == value` as a numpy mask, False where null: a categorical by its codes (no
    comparison of every row's string)."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        categories = values.cat.categories
        if value not in categories:
            return np.zeros(len(values), dtype=bool)
        return values.array.codes == categories.get_loc(value)
    return (values == value).to_numpy(dtype=bool, na_value=False)


def single_run(trials: pd.DataFrame, what: str) -> str | None:
    """The one run_id of `trials` (None when empty); refuse several runs."""
    col = trials["run_id"] if len(trials) else None
    if col is not None and isinstance(col.dtype, pd.CategoricalDtype):
        codes = col.cat.codes.to_numpy()
        if codes.min() >= 0 and codes.min() == codes.max():  # (one run: no count needed)
            return str(col.cat.categories[int(codes[0])])
        # the categories in use, from the codes (no string per row)
        counts = np.bincount(col.cat.codes.to_numpy().astype(np.int64) + 1)
        runs = [col.cat.categories[i] for i in np.flatnonzero(counts[1:])]
        if counts[0]:
            runs.append(np.nan)  # (what astype(object) makes of a null)
    else:
        runs = pd.unique(col.astype(object)) if col is not None else []
    if len(runs) > 1:
        raise ValueError(
            f"{what} takes the trials of ONE benchmark run, got {len(runs)} runs "
            f"({', '.join(sorted(map(str, runs))[:5])}...); filter by run_id first"
        )
    return str(runs[0]) if len(runs) else None


# --------------------------------------------------------------------------- integer keys


def str_codes(values: pd.Series, sort: bool = False) -> tuple[np.ndarray, pd.Index]:
    """(int64 codes, -1 = null; uniques) of a string-like column. Categoricals come for free;
    `sort=True` orders the uniques as `astype("category")` would."""
    s = values if isinstance(values, pd.Series) else pd.Series(values)
    if isinstance(s.dtype, pd.CategoricalDtype):
        return s.cat.codes.to_numpy().astype(np.int64), s.cat.categories
    codes, uniques = pd.factorize(s, sort=sort, use_na_sentinel=True)
    return np.asarray(codes, dtype=np.int64), pd.Index(uniques)


def as_categorical(values: pd.Series) -> pd.Series:
    """`values.astype("category")` through one factorization (keeps an existing categorical)."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        return values
    codes, uniques = str_codes(values, sort=True)
    cat = pd.Categorical.from_codes(codes, categories=pd.Index(uniques))
    return pd.Series(cat, index=values.index, name=values.name)


def arrow_strings(values: pd.Series) -> pa.Array:
    """A string column (categorical, Arrow-backed or objects) as one Arrow string array (an
    Arrow-backed one's own, uncopied, when it is one chunk: at a million trial ids a copy
    is ~40 MiB on the peak of the table that asked)."""
    backing = getattr(values.array, "__arrow_array__", None)
    arr = backing() if backing is not None else None
    if arr is None or not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        arr = pa.Table.from_pandas(pd.DataFrame({"v": values}), preserve_index=False).column(0)
    if not pa.types.is_string(arr.type) and not pa.types.is_large_string(arr.type):
        arr = arr.cast(pa.large_string())
    if isinstance(arr, pa.ChunkedArray):  # (one chunk as it is: combine_chunks copies it)
        return arr.chunk(0) if arr.num_chunks == 1 else arr.combine_chunks()
    return arr


def lookup_rows(keys: pd.Series, table: pd.Series) -> np.ndarray:
    """Position in `table` (unique non-null strings) of every key; -1 when absent or null."""
    if len(keys) == 0 or len(table) == 0:
        return np.full(len(keys), -1, dtype=np.int64)
    if isinstance(keys.dtype, pd.CategoricalDtype):
        pos = lookup_rows(pd.Series(keys.cat.categories.astype(object)), table)
        codes = keys.cat.codes.to_numpy()
        return np.where(codes >= 0, pos[np.maximum(codes, 0)] if len(pos) else -1, -1)
    if isinstance(table.dtype, pd.CategoricalDtype):
        table = table.astype(object)
    k, v = arrow_strings(keys), arrow_strings(table)
    if k.type != v.type:
        k, v = k.cast(pa.large_string()), v.cast(pa.large_string())
    idx = pc.fill_null(pc.index_in(k, value_set=v), -1)
    return idx.to_numpy(zero_copy_only=False).astype(np.int64)


def time_key(values: pd.Series | None, n: int) -> np.ndarray:
    """int64 order key of a timestamp column (null = oldest)."""
    if values is None:
        return np.zeros(n, dtype=np.int64)
    s = values
    if not pd.api.types.is_datetime64_any_dtype(s.dtype):
        s = pd.to_datetime(s, utc=True, errors="coerce")
    if getattr(s.dtype, "tz", None) is not None:
        s = s.dt.tz_convert("UTC").dt.tz_localize(None)
    key = s.to_numpy(dtype="datetime64[us]").view(np.int64).copy()
    key[key == np.iinfo(np.int64).min] = np.iinfo(np.int64).min + 1
    return key


def last_of_max(group: np.ndarray, key: np.ndarray, n_groups: int) -> np.ndarray:
    """Per group the row with the largest `key` (ties: the last row); -1 for empty groups.
    Rows with group < 0 are ignored."""
    best = np.full(n_groups, -1, dtype=np.int64)
    rows = np.flatnonzero(group >= 0)
    if len(rows) == 0:
        return best
    if n_groups <= 64:  # few groups (scorers of a run): masked max beats ufunc.at
        for g in np.flatnonzero(np.bincount(group[rows], minlength=n_groups)):
            sel = np.flatnonzero(group == g)
            k = key[sel]
            best[g] = sel[np.flatnonzero(k == k.max())[-1]]
        return best
    g, k = group[rows], key[rows]
    top = np.full(n_groups, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(top, g, k)
    cand = rows[k == top[g]]
    np.maximum.at(best, group[cand], cand)
    return best


def first_rows(codes: np.ndarray, n_groups: int) -> np.ndarray:
    """Per code the first row having it (-1 when none); negative codes ignored."""
    first = np.full(n_groups, len(codes), dtype=np.int64)
    ok = codes >= 0
    np.minimum.at(first, codes[ok], np.flatnonzero(ok))
    first[first == len(codes)] = -1
    return first


class GroupSums:
    """`np.bincount(groups, weights=w, minlength=n)` for many `w` over the same `groups`.
    Where each group's rows lie side by side (cells sorted by group; trials ordered by config
    and task), every addition of bincount waits for the one before it to the same bin: 3.8 ms
    a million rows, against 1.1 ms for the same rows shuffled. Then, past RUNS_FROM rows, each
    run is summed by `np.add.reduceat`, one pass in order: 0.17 ms. A group's sum is its rows
    added in their order, as with bincount, so groups holding the same values in the same
    order get the same sums to the last bit (two configs with equal results stay tied: the
    rankings and the frontier compare sums exactly). Other orders take bincount as it is;
    sums differ from it in rounding only."""

    RUNS_FROM = 1 << 16

    def __init__(self, groups: np.ndarray, n: int) -> None:
        self.groups, self.n = groups, n
        self.starts: np.ndarray | None = None  # where each run starts, when groups are runs
        if len(groups) >= self.RUNS_FROM:
            starts = np.flatnonzero(np.diff(groups)) + 1
            present = np.count_nonzero(np.bincount(groups, minlength=n))
            if len(starts) + 1 == present:  # every group one run
                self.starts = np.concatenate(([0], starts))
                self.run_groups = groups[self.starts]

    def __call__(self, weights: np.ndarray) -> np.ndarray:
        if self.starts is None:
            return np.bincount(self.groups, weights=weights, minlength=self.n)
        sums = np.zeros(self.n)
        sums[self.run_groups] = np.add.reduceat(np.asarray(weights, dtype=float), self.starts)
        return sums
