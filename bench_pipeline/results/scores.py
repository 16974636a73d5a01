"""Latest scores and per-trial results.

Rescores append rows and history is never overwritten, so every reader first keeps, per
(run_id, trial_id, scorer), the row with the newest `scored_at` (ties: the row written last).

`latest_scores(scores)` -> the SCORES columns, one row per (run_id, trial_id, scorer).

`scorer_catalog(scores)` -> one row per (run_id, scorer): `run_id`, `scorer`, `scorer_group`,
`weight` (criterion weight within its group, null read as 1; 0 = reported, not counted),
`is_primary_group` (the group deciding pass/fail in that run), ordered for display.

`trial_overall(trials, scores)` -> one row per trial (latest `attempt_no` per run_id/trial_id):
the trial columns that exist among `run_id, suite, task_set_revision, trial_id, task_id,
config_id, repetition, tags, holdout, difficulty, agent, agent_kind, model, effort,
config_hash, factory_ref, is_baseline, outcome, error, iterations, cost_usd,
cost_unknown_reason, duration_seconds` (run_id, task_id and config_id as categoricals), then
for every scorer `score_<scorer>` (value when status == scored, else null) and
`status_<scorer>` (the latest status; `missing` when the run uses the scorer but the trial has
no row; null when the trial's run does not use that scorer), for every multi-criteria group
(`llm_judge`) `score_llm_judge` (weight-weighted mean of the trial's scored criteria with
weight > 0) and `status_llm_judge` (`scored` when at least one counted criterion is scored),
then `groups_scored` (scorer groups with a value), `overall` (mean of the group values; null
when none), `primary_scorer`, `primary_status`, `passed` (nullable boolean: primary value == 1;
null when the primary is not scored) and `scorer_cost_usd` (sum of the trial's latest scorer
costs, e.g. judge tokens; null when none known).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from bench_pipeline.formats.vocabulary import OUTCOME_SUCCEEDED

from ._common import (
    CODE_MISSING,
    CODE_OTHER,
    CODE_SCORED,
    EPS,
    PRIMARY_PRIORITY,
    STATUS_CODE,
    STATUS_LABELS,
    as_categorical,
    default_group,
    display_key,
    last_of_max,
    lookup_rows,
    score_col,
    status_col,
    str_codes,
    time_key,
)

TRIAL_COLUMNS = [
    "run_id",
    "suite",
    "task_set_revision",
    "trial_id",
    "task_id",
    "config_id",
    "repetition",
    "tags",
    "holdout",
    "difficulty",
    "agent",
    "agent_kind",
    "model",
    "effort",
    "config_hash",
    "factory_ref",
    "is_baseline",
    "outcome",
    "error",
    "iterations",
    "cost_usd",
    "cost_unknown_reason",
    "duration_seconds",
]
CATEGORICAL = ("run_id", "task_id", "config_id", "outcome")

__all__ = [
    "latest_scores",
    "latest_trial_overall",
    "latest_trials",
    "scorer_catalog",
    "trial_overall",
    "OUTCOME_SUCCEEDED",
]


def _key_codes(frame: pd.DataFrame, cols: list[str]) -> np.ndarray:
    """One int64 code per row for the combination of `cols` (nulls are a value of their own)."""
    combined = np.zeros(len(frame), dtype=np.int64)
    for col in cols:
        codes, uniques = str_codes(frame[col])
        if len(cols) > 1 and combined.max(initial=0) * (len(uniques) + 1) > 2**62:
            combined = pd.factorize(combined)[0].astype(np.int64)
        combined = combined * (len(uniques) + 1) + (codes + 1)
    return combined


def _latest_per_key(key: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Boolean mask keeping, per key, the row with the largest `order` (ties: the last row)."""
    keep = np.ones(len(key), dtype=bool)
    if len(key) == 0:
        return keep
    lo, hi = int(key.min()), int(key.max())
    if hi - lo <= 8 * len(key) + 1024:  # dense keys: bincount instead of a sort
        inv = key - lo
        counts = np.bincount(inv)
    else:
        inv, counts = np.unique(key, return_inverse=True, return_counts=True)[1:]
    dup = np.flatnonzero(counts[inv] > 1)
    if len(dup) == 0:
        return keep
    srt = np.lexsort((dup, order[dup], inv[dup]))  # by key, then order, then row
    last = np.ones(len(dup), dtype=bool)
    last[:-1] = inv[dup][srt][1:] != inv[dup][srt][:-1]
    keep[dup] = False
    keep[dup[srt][last]] = True
    return keep


def latest_scores(scores: pd.DataFrame) -> pd.DataFrame:
    """Per (run_id, trial_id, scorer) the newest row by `scored_at`; input order preserved."""
    if len(scores) == 0:
        return scores.copy()
    key = _key_codes(scores, ["run_id", "trial_id", "scorer"])
    keep = _latest_per_key(key, time_key(scores.get("scored_at"), len(scores)))
    if keep.all():
        return scores.copy(deep=False)
    return scores.loc[keep]


def latest_trials(trials: pd.DataFrame) -> pd.DataFrame:
    """Per (run_id, trial_id) the row of the latest `attempt_no` (resumed runs rewrite trials)."""
    if len(trials) == 0 or "attempt_no" not in trials.columns:
        return trials
    key = _key_codes(trials, ["run_id", "trial_id"])
    keep = _latest_per_key(key, _attempt_order(trials))
    if keep.all():
        return trials
    return trials.iloc[np.flatnonzero(keep)]


def _attempt_order(trials: pd.DataFrame) -> np.ndarray:
    attempt = trials["attempt_no"].to_numpy(dtype=float, na_value=np.nan)
    return np.where(np.isnan(attempt), -(2.0**62), attempt).astype(np.int64)


def latest_trial_positions(trials: pd.DataFrame, trial_codes: np.ndarray) -> np.ndarray | None:
    """`latest_trials` of one run's trials whose trial ids have the integer codes
    `trial_codes` (equal codes for equal ids): the positions it keeps, None when it keeps
    every row."""
    if len(trials) == 0 or "attempt_no" not in trials.columns:
        return None
    keep = _latest_per_key(trial_codes.astype(np.int64), _attempt_order(trials))
    return None if keep.all() else np.flatnonzero(keep)


def _catalog_arrays(
    scores: pd.DataFrame, tkey: np.ndarray, keep: np.ndarray | None = None
) -> tuple[pd.DataFrame, tuple]:
    """The raw catalog (run_id, scorer, newest non-null scorer_group and weight) and the
    (run codes, run names, scorer codes, scorer names) of every score row."""
    run_c, run_u = str_codes(scores["run_id"])
    sc_c, sc_u = str_codes(scores["scorer"])
    n_sc = max(len(sc_u), 1)
    valid = (run_c >= 0) & (sc_c >= 0)
    if keep is not None:  # rows outside `keep` take no part (as if filtered out)
        valid &= keep
    gid = np.where(valid, run_c * n_sc + sc_c, -1)
    n_g = max(len(run_u), 1) * n_sc
    present = np.bincount(gid[gid >= 0], minlength=n_g) > 0
    cols: dict[str, list] = {"scorer_group": [None] * n_g, "weight": [None] * n_g}
    if "scorer_group" in scores:
        g_c, g_u = str_codes(scores["scorer_group"])
        best = last_of_max(np.where(g_c >= 0, gid, -1), tkey, n_g)
        cols["scorer_group"] = [g_u[g_c[r]] if r >= 0 else None for r in best]
    if "weight" in scores:
        w = scores["weight"].to_numpy(dtype=float, na_value=np.nan)
        best = last_of_max(np.where(np.isnan(w), -1, gid), tkey, n_g)
        cols["weight"] = [float(w[r]) if r >= 0 else None for r in best]
    groups = np.flatnonzero(present)
    cat = pd.DataFrame(
        {
            "run_id": [run_u[g // n_sc] for g in groups],
            "scorer": [sc_u[g % n_sc] for g in groups],
            "scorer_group": [cols["scorer_group"][g] for g in groups],
            "weight": pd.array([cols["weight"][g] for g in groups], dtype="Float64").to_numpy(
                dtype=float, na_value=np.nan
            ),
        }
    )
    return cat, (run_c, run_u, sc_c, sc_u)


def _catalog_records(cat: pd.DataFrame) -> list[dict[str, Any]]:
    """The finished scorer catalog (a raw one completed: default group, weight 1, sorted, the
    primary group marked) as plain records. Plain Python, not pandas: the catalog has one row
    per (run, scorer), and a dozen pandas calls on a frame that small cost ~10 ms, paid by every
    partition's materialization, the explorer page and the derived tables alike."""
    rows = []
    for run_id, scorer, group, weight in zip(
        cat["run_id"].tolist(),
        cat["scorer"].tolist(),
        cat["scorer_group"].tolist(),
        cat["weight"].astype(float).tolist(),
        strict=True,
    ):
        if _missing_text(group):
            group = default_group(scorer)
        rows.append(
            {
                "run_id": run_id,
                "scorer": scorer,
                "scorer_group": group,
                "weight": 1.0 if weight != weight else weight,  # NaN: unweighted
            }
        )
    rows.sort(key=lambda r: (r["run_id"], display_key(r["scorer"])))
    groups_of: dict[str, list[str]] = {}
    for r in rows:
        groups = groups_of.setdefault(r["run_id"], [])
        if r["scorer_group"] not in groups:
            groups.append(r["scorer_group"])
    primary = {}
    for run_id, groups in groups_of.items():
        first = [g for g in PRIMARY_PRIORITY if g in groups]
        primary[run_id] = first[0] if first else sorted(groups, key=display_key)[0]
    for r in rows:
        r["is_primary_group"] = r["scorer_group"] == primary[r["run_id"]]
    return rows


def _missing_text(value: Any) -> bool:
    # (as pandas' isna, for the values a group column holds: text, None, NaN or NA)
    return (
        value is None
        or value is pd.NA
        or value == ""
        or (isinstance(value, float) and value != value)
    )


def _catalog_frame(records: list[dict[str, Any]]) -> pd.DataFrame:
    """The catalog records as the frame `scorer_catalog` returns (typed even when empty)."""
    return pd.DataFrame(
        {
            "run_id": pd.Series([r["run_id"] for r in records], dtype=object),
            "scorer": pd.Series([r["scorer"] for r in records], dtype=object),
            "scorer_group": pd.Series([r["scorer_group"] for r in records], dtype=object),
            "weight": np.array([r["weight"] for r in records], dtype=float),
            "is_primary_group": np.array([r["is_primary_group"] for r in records], dtype=bool),
        }
    )


def _finish_catalog(cat: pd.DataFrame) -> pd.DataFrame:
    return _catalog_frame(_catalog_records(cat))


def scorer_catalog(scores: pd.DataFrame) -> pd.DataFrame:
    """Scorers used per run with their group, weight and whether they decide pass/fail."""
    if len(scores) == 0:
        return pd.DataFrame(
            columns=["run_id", "scorer", "scorer_group", "weight", "is_primary_group"]
        )
    tkey = time_key(scores.get("scored_at"), len(scores))
    return _finish_catalog(_catalog_arrays(scores, tkey)[0])


def _group_members(catalog: list[dict[str, Any]]) -> dict[str, list[str]]:
    members: dict[str, list[str]] = {}
    for row in catalog:
        scorer, group = row["scorer"], row["scorer_group"]
        if scorer not in members.get(group, []):
            members.setdefault(group, []).append(scorer)
    return members


def latest_trial_overall(
    trials: pd.DataFrame,
    scores: pd.DataFrame,
    *,
    trials_are_latest: bool = False,
    trial_rows: np.ndarray | None = None,
) -> pd.DataFrame:
    """`trial_overall(latest_trials(trials), latest_scores(scores))` in one pass over the scores:
    the trial row of every score row is looked up once, the latest score per (trial, scorer) is
    picked on those integer keys and the superseded rows are masked, never copied out.

    Exact only when every score row names a trial of the one run in `trials` (then the trial row
    stands for (run_id, trial_id)); otherwise it is the composition above, step by step.
    `trials_are_latest`: `trials` is latest_trials' output already (skips that pass).
    `trial_rows`: `lookup_rows(scores["trial_id"], trials["trial_id"])`, looked up by the
    caller (so the score rows' trial ids need not be in memory with the other columns); a
    -1 in it means `scores` must carry `trial_id` for the general route."""
    if not trials_are_latest:
        trials = latest_trials(trials)
    if len(scores) == 0 or len(trials) == 0:
        return trial_overall(trials, latest_scores(scores))
    t_run, t_run_u = str_codes(trials["run_id"])
    s_run, s_run_u = str_codes(scores["run_id"])
    one_run = len(t_run_u) == 1 and (t_run == 0).all() and (s_run >= 0).all()
    used = np.flatnonzero(np.bincount(s_run[s_run >= 0], minlength=len(s_run_u)))
    if not one_run or {str(s_run_u[i]) for i in used} != {str(t_run_u[0])}:
        return trial_overall(trials, latest_scores(scores))
    row = (
        trial_rows
        if trial_rows is not None
        else lookup_rows(scores["trial_id"], trials["trial_id"].reset_index(drop=True))
    )
    sc_c, sc_u = str_codes(scores["scorer"])
    if (row < 0).any() or (sc_c < 0).any():
        return trial_overall(trials, latest_scores(scores))
    key = row * len(sc_u) + sc_c
    tkey = time_key(scores.get("scored_at"), len(scores))
    keep = _latest_per_key(key, tkey)
    del key
    return trial_overall(trials, scores, _keep=keep, _row=row, _tkey=tkey, _latest=True)


def trial_overall(
    trials: pd.DataFrame,
    scores: pd.DataFrame,
    *,
    _keep: np.ndarray | None = None,
    _row: np.ndarray | None = None,
    _tkey: np.ndarray | None = None,
    _latest: bool = False,
    _cells: LatestCells | None = None,
) -> pd.DataFrame:
    """One row per trial with its latest score per scorer, group values, overall and pass.
    (Private: latest_trial_overall's mask of the rows to use, their trial rows, their time keys
    and that `trials` is already latest_trials' output; `_cells`: the latest score per
    (trial, scorer) already picked while reading, see `LatestCells`.)"""
    if not _latest:
        trials = latest_trials(trials)
    base = trials.loc[:, [c for c in TRIAL_COLUMNS if c in trials.columns]].reset_index(drop=True)
    n = len(base)
    for col in CATEGORICAL:
        if col in base:
            base[col] = as_categorical(base[col])
    run_codes = base["run_id"].cat.codes.to_numpy().astype(np.int64)
    run_names = list(base["run_id"].cat.categories.astype(object))
    if _cells is not None:
        catalog = _catalog_records(_cells.finish())
    elif len(scores):
        tkey = _tkey if _tkey is not None else time_key(scores.get("scored_at"), len(scores))
        raw, (s_run, s_run_u, s_sc, s_sc_u) = _catalog_arrays(scores, tkey, _keep)
        catalog = _catalog_records(raw)
    else:
        catalog = []
    scorers = sorted(dict.fromkeys(r["scorer"] for r in catalog), key=display_key)
    # (run -> value) per scorer of the catalog's columns
    runs_of: dict[str, set[str]] = {}
    weight_of: dict[str, dict[str, float]] = {}
    for r in catalog:
        runs_of.setdefault(r["scorer"], set()).add(r["run_id"])
        weight_of.setdefault(r["scorer"], {})[r["run_id"]] = r["weight"]
    run_index = {r: i for i, r in enumerate(run_names)}

    values: dict[str, np.ndarray] = {}
    codes: dict[str, np.ndarray] = {}
    cost_total = np.zeros(n)
    cost_known = np.zeros(n, dtype=bool)
    if _cells is not None and scorers and n:
        for scorer in scorers:  # one run, every scorer of the catalog is used by it
            v, st, c = _cells.columns(scorer)
            v[st != CODE_SCORED] = np.nan
            values[scorer], codes[scorer] = v, st
            if c is not None:
                known = ~np.isnan(c)
                np.add(cost_total, c, out=cost_total, where=known)
                cost_known |= known
    elif scorers and n:
        n_s = len(scorers)
        row = (
            _row
            if _row is not None
            else _match_trials(base, run_codes, run_names, scores, s_run, s_run_u)
        )
        sc_map = np.array([scorers.index(x) if x in scorers else -1 for x in s_sc_u] + [-1])
        sc = sc_map[s_sc]  # -1 (null scorer) takes the trailing -1
        del s_run, s_sc
        ok = (row >= 0) & (sc >= 0)
        if _keep is not None:
            ok &= _keep
        cell = np.where(ok, row * n_s + sc, -1)
        del row, sc
        # one winner per (trial, scorer); `_keep` holds exactly one row per cell already
        win = ok if _keep is not None else _latest_per_key(cell, tkey) & ok
        del tkey
        src = np.flatnonzero(win)
        cell = cell[src]
        st_c, st_u = str_codes(scores["status"])
        st_map = np.array([STATUS_CODE.get(x, CODE_OTHER) for x in st_u] + [CODE_OTHER])
        v_all = np.full(n * n_s, np.nan)
        s_all = np.full(n * n_s, CODE_MISSING, dtype=np.int8)
        c_all = np.full(n * n_s, np.nan)
        v_all[cell] = scores["value"].to_numpy(dtype=float, na_value=np.nan)[src]
        s_all[cell] = st_map[st_c[src]]
        del st_c
        if "cost_usd" in scores.columns:
            c_all[cell] = scores["cost_usd"].to_numpy(dtype=float, na_value=np.nan)[src]
        del cell, src, win
        v_all, s_all, c_all = (a.reshape(n, n_s) for a in (v_all, s_all, c_all))
        for i, scorer in enumerate(scorers):
            v, st, c = v_all[:, i].copy(), s_all[:, i].copy(), c_all[:, i]
            # trials of runs that do not use this scorer: no status at all
            runs = runs_of.get(scorer, set())
            in_run = np.array([r in runs for r in run_names] or [False])[run_codes]
            st[~in_run] = -1
            v[st != CODE_SCORED] = np.nan
            values[scorer], codes[scorer] = v, st
            known = ~np.isnan(c)
            np.add(cost_total, c, out=cost_total, where=known)
            cost_known |= known
        del v_all, s_all, c_all

    out = {}
    members = _group_members(catalog)
    group_values: dict[str, np.ndarray] = {}
    group_codes: dict[str, np.ndarray] = {}
    for group, crit in members.items():
        if group in values and crit == [group]:
            group_values[group], group_codes[group] = values[group], codes[group]
            continue
        num = np.zeros(n)
        den = np.zeros(n)
        first_code = np.full(n, -1, dtype=np.int8)
        for scorer in crit:
            weights = weight_of.get(scorer, {})
            w = np.array([weights.get(r, 0.0) for r in run_names] or [0.0])[run_codes]
            counted = w > 0
            ok = counted & (codes[scorer] == CODE_SCORED)
            # (sums where a mask holds, not over gathered copies: ~3x faster at a million)
            np.add(num, w * values[scorer], out=num, where=ok)
            np.add(den, w, out=den, where=ok)
            take = counted & (first_code == -1) & (codes[scorer] != -1)
            np.copyto(first_code, codes[scorer], where=take)
        with np.errstate(divide="ignore", invalid="ignore"):
            gv = np.where(den > 0, num / den, np.nan)
        gc = np.where(den > 0, CODE_SCORED, first_code).astype(np.int8)
        # a run whose judge criteria all have weight 0: reported, nothing counted
        uses = np.zeros(n, dtype=bool)
        for scorer in crit:
            uses |= codes[scorer] != -1
        gc[uses & (gc == -1)] = STATUS_CODE["not_scored"]
        group_values[group], group_codes[group] = gv, gc

    for scorer in scorers:
        out[score_col(scorer)] = values[scorer]
        out[status_col(scorer)] = _status_categorical(codes[scorer])
    for group in sorted(group_values, key=display_key):
        if group not in values:
            out[score_col(group)] = group_values[group]
            out[status_col(group)] = _status_categorical(group_codes[group])
    total = np.zeros(n)
    groups_scored = np.zeros(n, dtype=np.int64)
    for g in group_values:  # same order as before: insertion order of the groups
        gv = group_values[g]
        ok = ~np.isnan(gv)
        np.add(total, gv, out=total, where=ok)
        groups_scored += ok
    # (in place: at a million trials each fresh 8 MiB array is ~2,000 page faults)
    overall = total
    np.divide(total, groups_scored, out=overall, where=groups_scored > 0)
    overall[groups_scored == 0] = np.nan
    out["groups_scored"] = groups_scored
    out["overall"] = overall

    primary_by_run: dict[str, str] = {}
    for r in catalog:
        if r["is_primary_group"]:
            primary_by_run.setdefault(r["run_id"], r["scorer_group"])
    prim_names = sorted(set(primary_by_run.values()), key=display_key)
    prim_code_of_run = np.array(
        [prim_names.index(primary_by_run[r]) if r in primary_by_run else -1 for r in run_names]
        or [-1],
        dtype=np.int64,
    )
    prim_idx = prim_code_of_run[run_codes] if n else np.zeros(0, dtype=np.int64)
    if len(prim_names) == 1 and bool((prim_idx == 0).all()):  # (one primary group: its copy)
        pvalue, pcode = group_values[prim_names[0]].copy(), group_codes[prim_names[0]].copy()
    else:
        pvalue = np.full(n, np.nan)
        pcode = np.full(n, -1, dtype=np.int8)
        for j, g in enumerate(prim_names):
            sel = prim_idx == j
            pvalue[sel] = group_values[g][sel]
            pcode[sel] = group_codes[g][sel]
    out["primary_scorer"] = (
        pd.Categorical.from_codes(prim_idx, categories=prim_names)
        if prim_names
        else pd.Categorical([None] * n)
    )
    out["primary_status"] = _status_categorical(pcode)
    nan_p = np.isnan(pvalue)
    out["passed"] = pd.arrays.BooleanArray(np.where(nan_p, False, pvalue >= 1 - EPS), nan_p)
    out["scorer_cost_usd"] = np.where(cost_known, cost_total, np.nan)
    del run_index
    # One frame from the columns as they are: `frame[name] = array` copies every array it is
    # given (~0.25 s of page faults at a million trials), and a dict with copy=False makes one
    # block per column, so nothing is consolidated (copied) either.
    columns: dict[str, Any] = {name: base[name] for name in base.columns}
    columns.update(out)
    result = pd.DataFrame(columns, index=base.index, copy=False)
    result.attrs.update(base.attrs)
    result.attrs["scorer_catalog"] = catalog
    return result


_NO_TIME = np.iinfo(np.int64).min + 1  # time_key of a null scored_at: older than any time


class _Slot:
    """The latest row so far of every trial for one scorer (small codes: the memory these
    arrays take is also the time: every new page is a fault)."""

    def __init__(self, n: int, rows_total: int) -> None:
        self.time = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
        # read position of the winner (ties: the row read last)
        self.pos = np.full(n, -1, dtype=np.int32 if rows_total < 2**31 else np.int64)
        self.value = np.full(n, np.nan)
        self.status = np.full(n, CODE_MISSING, dtype=np.int8)
        self.cost: np.ndarray | None = None  # made when the first cost is met
        self.group = np.full(n, -1, dtype=np.int8)  # code in LatestCells.groups; -1 null
        self.weight = np.full(n, -1, dtype=np.int8)  # code in self.weights; -1 null
        self.weights: dict[float, int] = {}


_MAX_CODES = 127  # distinct groups / weights of one scorer that an int8 code holds
_FINISHED = np.zeros(0, dtype=np.int8)  # what a slot's freed arrays point to


class LatestCells:
    """`latest_trial_overall`'s pick of the latest score per (trial, scorer), made batch by batch
    while the score rows are read, so the rows themselves are never all in memory: per scorer,
    one array over the trials holds the winner's time, read position, value, status, cost,
    group and weight. Only for the fast case of `latest_trial_overall` (every score row of the
    one run names one of the `n_trials` latest trials and a scorer); `add` returns False at the
    first row that does not, and the caller takes the general route.

    Batches carry the `SCORES` columns `run_id, scorer, scorer_group, weight, status, value,
    cost_usd, scored_at` in read order, with the string ones dictionary-encoded; `rows` gives
    the trial row of each of the batch's rows (`lookup_rows` of their trial ids)."""

    # A bound on the rows of one analysis for a reader that cannot count them first: the
    # read positions stay int32, and a batch past it takes the general route.
    MAX_ROWS = 2**31 - 1

    def __init__(self, n_trials: int, run_id: str, rows_total: int) -> None:
        """`rows_total`: how many score rows will be added, or a bound on it."""
        self.n = n_trials
        self.run_id = run_id
        self.rows_total = rows_total
        self.slots: dict[str, _Slot] = {}
        self.groups: dict[str, int] = {}
        self.read = 0  # rows seen so far (the read position of the next one)

    def add(self, batch: pa.RecordBatch, rows: np.ndarray) -> bool:
        assert self.read >= 0, "LatestCells.add after finish()"
        n_b = batch.num_rows
        if n_b == 0:
            return True
        run = batch.column("run_id")
        names = run.dictionary.to_pylist()
        if run.null_count or (
            names != [self.run_id]
            and any(names[int(i)] != self.run_id for i in np.unique(run.indices))
        ):
            return False
        scorer = batch.column("scorer")
        if scorer.null_count or None in scorer.dictionary.to_pylist():
            return False
        if len(rows) != n_b or (rows < 0).any() or self.read + n_b > self.rows_total:
            return False
        # (int32 positions when they fit, as the slots hold them: ufunc.at casting is slow)
        pos = np.arange(
            self.read, self.read + n_b, dtype=np.int32 if self.rows_total < 2**31 else np.int64
        )
        rows = rows.astype(np.intp, copy=False)
        self.read += n_b
        when = batch.column("scored_at")
        # (a timestamp's own int64 values, viewed: a cast copies them)
        when = when.view(pa.int64()) if pa.types.is_timestamp(when.type) else when.cast(pa.int64())
        if when.null_count:  # (else the batch's own buffer, uncopied)
            when = pc.fill_null(when, _NO_TIME)
        when = when.to_numpy(zero_copy_only=False)
        st_col = batch.column("status")
        st_map = np.array(
            [STATUS_CODE.get(x, CODE_OTHER) for x in st_col.dictionary.to_pylist()] + [CODE_OTHER],
            dtype=np.int8,
        )
        status = st_map[_codes(st_col)]
        value = _floats(batch.column("value"))
        cost = _floats(batch.column("cost_usd"))
        weight = _floats(batch.column("weight"))
        g_col = batch.column("scorer_group")
        g_codes = [
            -1 if g is None else self.groups.setdefault(g, len(self.groups))
            for g in g_col.dictionary.to_pylist()
        ]
        if len(self.groups) > _MAX_CODES:
            return False
        # int8, as the slots hold them: a scatter that casts is several times slower
        group = np.array([*g_codes, -1], dtype=np.int8)[_codes(g_col)]
        sc_codes = scorer.indices.to_numpy(zero_copy_only=False)  # (no nulls: checked above)
        names = scorer.dictionary.to_pylist()
        period = _repeat(sc_codes, len(names))
        present = (
            sc_codes[:period]
            if period
            else np.flatnonzero(np.bincount(sc_codes, minlength=len(names)))
        )
        # (Python ints: a numpy int64 would widen the int32 codes for every comparison)
        for first, code in enumerate(present.tolist()):
            slot = self.slots.get(names[code])
            if slot is None:
                slot = self.slots[names[code]] = _Slot(self.n, self.rows_total)
            # the scorer's rows of the batch: every period-th row when the scorers repeat in
            # one order (the usual layout: a trial's scores written together), a view then
            sel: slice | np.ndarray
            if period is not None:
                sel = slice(first, n_b, period)  # (the code's first row: `present` is in row order)
            else:
                sel = np.flatnonzero(sc_codes == code) if len(names) > 1 else np.arange(n_b)
            r, t, p = rows[sel], when[sel], pos[sel]
            rw: slice | np.ndarray
            sw: slice | np.ndarray
            if len(r) and int(r[-1]) - int(r[0]) == len(r) - 1 and _increasing(r):
                # consecutive trials (the usual order): their slots are one run, and when
                # every row wins (a first score) both sides of each copy are views
                run = slice(int(r[0]), int(r[0]) + len(r))
                newer = t >= slot.time[run]
                if newer.all():
                    rw, sw = run, sel
                else:
                    win = np.flatnonzero(newer)
                    rw, sw = win + run.start, _positions_of(sel, n_b)[win]
                    t, p = t[win], p[win]
                slot.time[rw] = t
                slot.pos[rw] = p
            elif len(r) < 2 or _increasing(r):
                # each trial at most once in this batch: a row wins when it is not older than
                # the winner so far (ties: it was read later)
                win = np.flatnonzero(t >= slot.time[r])
                slot.time[r[win]] = t[win]
                slot.pos[r[win]] = p[win]
                rw, sw = r[win], _positions_of(sel, n_b)[win]
            else:
                np.maximum.at(slot.time, r, t)  # newest time per trial, old winner included
                cand = np.flatnonzero(t == slot.time[r])
                np.maximum.at(slot.pos, r[cand], p[cand])  # ties: the row read last
                win = cand[slot.pos[r[cand]] == p[cand]]
                rw, sw = r[win], _positions_of(sel, n_b)[win]
            slot.value[rw] = value[sw]
            slot.status[rw] = status[sw]
            slot.group[rw] = group[sw]
            c = cost[sw]
            if slot.cost is None and not np.isnan(c).all():
                slot.cost = np.full(self.n, np.nan)
            if slot.cost is not None:
                slot.cost[rw] = c
            w = weight[sw]
            if len(w) == 0:
                continue
            if w.min() == w.max():  # one weight (the usual case; a NaN fails ==)
                code = slot.weights.setdefault(float(w[0]), len(slot.weights))
                if len(slot.weights) > _MAX_CODES:
                    return False
                slot.weight[rw] = code
                continue
            w_codes = np.full(len(w), -1, dtype=np.int8)
            known = ~np.isnan(w)
            if known.any():
                uniq, inv = np.unique(w[known], return_inverse=True)
                table = np.array(
                    [slot.weights.setdefault(float(u), len(slot.weights)) for u in uniq]
                )
                if len(slot.weights) > _MAX_CODES:
                    return False
                w_codes[known] = table[inv]
            slot.weight[rw] = w_codes
        return True

    def scorers(self) -> list[str]:
        return list(self.slots)

    def finish(self) -> pd.DataFrame:
        """The raw scorer catalog (`_catalog_arrays`'s): per scorer the newest non-null group
        and weight among the latest rows (ties: the row read last). Ends the reading: the
        winners' times, positions and group and weight codes are freed here (at a million
        trials they are ~70 MiB the per-trial columns made next would sit on)."""
        catalog = self._catalog()
        for slot in self.slots.values():
            slot.time = slot.pos = slot.group = slot.weight = _FINISHED
        self.read = -1  # add() refuses from now on
        return catalog

    def _catalog(self) -> pd.DataFrame:
        group_names = list(self.groups)
        records = []
        for name, slot in self.slots.items():
            top = _newest(slot, None)  # usually has both a group and a weight: no mask needed
            g = top if top >= 0 and slot.group[top] >= 0 else _newest(slot, slot.group >= 0)
            w = top if top >= 0 and slot.weight[top] >= 0 else _newest(slot, slot.weight >= 0)
            weights = list(slot.weights)
            records.append(
                {
                    "run_id": self.run_id,
                    "scorer": name,
                    "scorer_group": group_names[slot.group[g]] if g >= 0 else None,
                    "weight": weights[slot.weight[w]] if w >= 0 else np.nan,
                }
            )
        return pd.DataFrame(records, columns=["run_id", "scorer", "scorer_group", "weight"])

    def columns(self, scorer: str) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """(value, status code, cost or None when no cost at all) of `scorer` per trial; the
        arrays are handed over (the slot is dropped)."""
        slot = self.slots.pop(scorer)
        return slot.value, slot.status, slot.cost


def _repeat(codes: np.ndarray, most: int) -> int | None:
    """k when the first k rows hold k different codes (2 <= k <= `most`) and row i's code
    is row i-k's, else None. Then a code's rows are every k-th row from its first (found
    from the rows themselves: counting the codes of every row was a pass more)."""
    again = np.flatnonzero(codes[1 : most + 1] == codes[0]) if len(codes) else codes
    if len(again) == 0:
        return None
    k = int(again[0]) + 1
    if k < 2 or len(set(codes[:k].tolist())) != k:
        return None
    return k if np.array_equal(codes[k:], codes[:-k]) else None


def _increasing(values: np.ndarray) -> bool:
    return len(values) < 2 or bool((values[1:] > values[:-1]).all())


def _positions_of(sel: slice | np.ndarray, n: int) -> np.ndarray:
    """`sel` as the positions it selects (a slice's made only when they are needed)."""
    return np.arange(n)[sel] if isinstance(sel, slice) else sel


def _newest(slot: _Slot, mask: np.ndarray | None) -> int:
    """The trial whose winner is newest among `mask` (None: among all trials with a winner;
    ties: read last); -1 when none."""
    if mask is None:
        if len(slot.time) == 0 or slot.pos.max() < 0:
            return -1
        rows = np.flatnonzero(slot.time == slot.time.max())
    else:
        rows = np.flatnonzero(mask)
        if len(rows) == 0:
            return -1
        t = slot.time[rows]
        rows = rows[t == t.max()]
    return int(rows[np.argmax(slot.pos[rows])])


def _codes(column: pa.DictionaryArray) -> np.ndarray:
    """Dictionary indices with -1 for null."""
    idx = column.indices
    idx = (pc.fill_null(idx, 0) if idx.null_count else idx).to_numpy(zero_copy_only=False)
    idx = idx.astype(np.int64)
    if column.null_count:
        idx[~column.is_valid().to_numpy(zero_copy_only=False)] = -1
    return idx


def _floats(column: pa.Array) -> np.ndarray:
    return column.to_numpy(zero_copy_only=False).astype(float, copy=False)


def _match_trials(
    base: pd.DataFrame,
    run_codes: np.ndarray,
    run_names: list[str],
    scores: pd.DataFrame,
    s_run: np.ndarray,
    s_run_u: list,
) -> np.ndarray:
    """Row in `base` of every score row by exact (run_id, trial_id); -1 when none."""
    run_of = {r: i for i, r in enumerate(run_names)}
    s_to_base = np.array([run_of.get(r, -1) for r in s_run_u] + [-1], dtype=np.int64)
    s_base_run = s_to_base[s_run]
    if len(run_names) == 1 and (s_base_run == 0).all() and (run_codes == 0).all():
        return lookup_rows(scores["trial_id"], base["trial_id"])
    row = np.full(len(scores), -1, dtype=np.int64)
    for i in range(len(run_names)):
        t_rows = np.flatnonzero(run_codes == i)
        s_rows = np.flatnonzero(s_base_run == i)
        if len(t_rows) == 0 or len(s_rows) == 0:
            continue
        pos = lookup_rows(
            scores["trial_id"].iloc[s_rows].reset_index(drop=True),
            base["trial_id"].iloc[t_rows].reset_index(drop=True),
        )
        row[s_rows] = np.where(pos >= 0, t_rows[np.maximum(pos, 0)], -1)
    return row


def _status_categorical(codes: np.ndarray) -> pd.Categorical:
    return pd.Categorical.from_codes(codes.astype(np.int8), categories=STATUS_LABELS)
