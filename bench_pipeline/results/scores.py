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

import numpy as np
import pandas as pd
import pyarrow as pa

from bench_pipeline.tables import OUTCOME_SUCCEEDED

from ._common import (
    CODE_MISSING,
    CODE_OTHER,
    CODE_SCORED,
    EPS,
    PRIMARY_PRIORITY,
    STATUS_CODE,
    STATUS_LABELS,
    connect,
    default_group,
    display_key,
    score_col,
    sql_str,
    status_col,
    to_arrow,
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

__all__ = ["latest_scores", "latest_trials", "scorer_catalog", "trial_overall", "OUTCOME_SUCCEEDED"]

# Order key of catalog look-ups: newest scored_at.
_ORDER_KEY = "coalesce(epoch_us(scored_at), -9223372036854775807)"


def _scores_arrow(scores: pd.DataFrame, extra: list[str]):
    cols = ["run_id", "trial_id", "scorer", *extra, "scored_at"]
    table = to_arrow(scores, cols)
    return table.append_column("__r", pa.array(np.arange(len(scores))))


def latest_scores(scores: pd.DataFrame) -> pd.DataFrame:
    """Per (run_id, trial_id, scorer) the newest row by `scored_at`; input order preserved."""
    if len(scores) == 0:
        return scores.copy()
    con = connect()
    con.register("s", _scores_arrow(scores, []))
    # Cheap pass: a 64-bit hash per key; only keys whose hash repeats are resolved exactly.
    h = con.sql("SELECT hash(run_id, trial_id, scorer) AS h FROM s").df()["h"]
    dup = h.duplicated(keep=False).to_numpy()
    if not dup.any():
        return scores.copy()
    cand = np.flatnonzero(dup)
    con.register("c", _scores_arrow(scores.iloc[cand], []))
    winners = con.sql(
        f"SELECT arg_max(__r, ({_ORDER_KEY})::HUGEINT * 1099511627776 + __r) AS w "
        "FROM c GROUP BY run_id, trial_id, scorer"
    ).df()["w"]
    keep = ~dup
    keep[cand[winners.to_numpy()]] = True
    return scores.loc[keep].copy()


def latest_trials(trials: pd.DataFrame) -> pd.DataFrame:
    """Per (run_id, trial_id) the row of the latest `attempt_no` (resumed runs rewrite trials)."""
    if len(trials) == 0 or "attempt_no" not in trials.columns:
        return trials
    con = connect()
    t = to_arrow(trials, ["run_id", "trial_id", "attempt_no"])
    con.register("t", t.append_column("__row", pa.array(np.arange(len(trials)))))
    dups = con.sql(
        "SELECT count(*) FROM (SELECT 1 FROM t GROUP BY run_id, trial_id HAVING count(*) > 1)"
    ).fetchall()[0][0]
    if not dups:
        return trials
    rows = con.sql(
        "SELECT arg_max(__row, attempt_no::BIGINT * 4294967296 + __row) AS r "
        "FROM t GROUP BY run_id, trial_id"
    ).df()["r"]
    return trials.iloc[np.sort(rows.to_numpy())]


def _catalog_from_con(con) -> pd.DataFrame:
    cat = con.sql(
        f"SELECT run_id, scorer, arg_max(scorer_group, {_ORDER_KEY}) AS scorer_group, "
        f"arg_max(weight, {_ORDER_KEY}) AS weight FROM s GROUP BY run_id, scorer"
    ).df()
    return _finish_catalog(cat)


def _finish_catalog(cat: pd.DataFrame) -> pd.DataFrame:
    cat = cat.astype({"run_id": object, "scorer": object, "scorer_group": object})
    missing_group = cat["scorer_group"].isna() | (cat["scorer_group"] == "")
    cat.loc[missing_group, "scorer_group"] = cat.loc[missing_group, "scorer"].map(default_group)
    cat["weight"] = cat["weight"].astype(float).fillna(1.0)
    cat["_key"] = cat["scorer"].map(display_key)
    cat = cat.sort_values(["run_id", "_key"]).drop(columns="_key").reset_index(drop=True)
    primary: dict[str, str] = {}
    for run_id, sub in cat.groupby("run_id", sort=False):
        groups = list(dict.fromkeys(sub["scorer_group"]))
        first = [g for g in PRIMARY_PRIORITY if g in groups]
        primary[run_id] = first[0] if first else sorted(groups, key=display_key)[0]
    cat["is_primary_group"] = cat["scorer_group"] == cat["run_id"].map(primary)
    return cat


def scorer_catalog(scores: pd.DataFrame) -> pd.DataFrame:
    """Scorers used per run with their group, weight and whether they decide pass/fail."""
    if len(scores) == 0:
        return pd.DataFrame(
            columns=["run_id", "scorer", "scorer_group", "weight", "is_primary_group"]
        )
    con = connect()
    con.register("s", _scores_arrow(scores, ["scorer_group", "weight"]))
    return _catalog_from_con(con)


def _group_members(catalog: pd.DataFrame) -> dict[str, list[str]]:
    members: dict[str, list[str]] = {}
    for scorer, group in zip(catalog["scorer"], catalog["scorer_group"], strict=True):
        if scorer not in members.get(group, []):
            members.setdefault(group, []).append(scorer)
    return members


def trial_overall(trials: pd.DataFrame, scores: pd.DataFrame) -> pd.DataFrame:
    """One row per trial with its latest score per scorer, group values, overall and pass."""
    trials = latest_trials(trials)
    base = trials.loc[:, [c for c in TRIAL_COLUMNS if c in trials.columns]].reset_index(drop=True)
    n = len(base)
    for col in CATEGORICAL:
        base[col] = base[col].astype("category")
    con = connect()
    if len(scores):
        con.register("s", _scores_arrow(scores, ["scorer_group", "weight", "status"]))
        catalog = _catalog_from_con(con)
    else:
        catalog = _finish_catalog(
            pd.DataFrame(columns=["run_id", "scorer", "scorer_group", "weight"])
        )
    scorers = sorted(dict.fromkeys(catalog["scorer"]), key=display_key)
    run_codes = base["run_id"].cat.codes.to_numpy()
    run_names = list(base["run_id"].cat.categories.astype(object))

    values: dict[str, np.ndarray] = {}
    codes: dict[str, np.ndarray] = {}
    cost_total = np.zeros(n)
    cost_known = np.zeros(n, dtype=bool)
    if scorers and n:
        row, scorer_code, status_code, win = _latest_rows(con, base, scores, scorers)
        n_s = len(scorers)
        cell = row[win] * n_s + scorer_code[win]
        src = np.flatnonzero(win)
        v_all = np.full(n * n_s, np.nan)
        s_all = np.full(n * n_s, CODE_MISSING, dtype=np.int8)
        c_all = np.full(n * n_s, np.nan)
        v_all[cell] = scores["value"].to_numpy(dtype=float, na_value=np.nan)[src]
        s_all[cell] = status_code[src]
        if "cost_usd" in scores.columns:
            c_all[cell] = scores["cost_usd"].to_numpy(dtype=float, na_value=np.nan)[src]
        v_all, s_all, c_all = (a.reshape(n, n_s) for a in (v_all, s_all, c_all))
        for i, scorer in enumerate(scorers):
            v, st, c = v_all[:, i].copy(), s_all[:, i].copy(), c_all[:, i]
            # trials of runs that do not use this scorer: no status at all
            runs = set(catalog.loc[catalog["scorer"] == scorer, "run_id"])
            in_run = np.array([r in runs for r in run_names] or [False])[run_codes]
            st[~in_run] = -1
            v[st != CODE_SCORED] = np.nan
            values[scorer], codes[scorer] = v, st
            known = ~np.isnan(c)
            cost_total[known] += c[known]
            cost_known |= known

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
            w = _run_lookup(catalog, scorer, "weight", run_names, run_codes, default=0.0)
            counted = w > 0
            ok = counted & (codes[scorer] == CODE_SCORED)
            num[ok] += w[ok] * values[scorer][ok]
            den[ok] += w[ok]
            take = counted & (first_code == -1) & (codes[scorer] != -1)
            first_code[take] = codes[scorer][take]
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
    if group_values:
        stack = np.vstack([group_values[g] for g in group_values])
        groups_scored = (~np.isnan(stack)).sum(axis=0)
        with np.errstate(invalid="ignore"):
            overall = np.where(
                groups_scored > 0, np.nansum(stack, axis=0) / np.maximum(groups_scored, 1), np.nan
            )
    else:
        groups_scored = np.zeros(n, dtype=int)
        overall = np.full(n, np.nan)
    out["groups_scored"] = groups_scored
    out["overall"] = overall

    primary_by_run = (
        catalog.loc[catalog["is_primary_group"]]
        .drop_duplicates("run_id")
        .set_index("run_id")["scorer_group"]
    )
    prim_names = sorted(set(primary_by_run), key=display_key)
    prim_code_of_run = np.array(
        [
            prim_names.index(primary_by_run[r]) if r in primary_by_run.index else -1
            for r in run_names
        ]
        or [-1],
        dtype=np.int64,
    )
    prim_idx = prim_code_of_run[run_codes] if n else np.zeros(0, dtype=np.int64)
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
    passed = pd.array(np.where(np.isnan(pvalue), False, pvalue >= 1 - EPS), dtype="boolean")
    passed[np.isnan(pvalue)] = pd.NA
    out["passed"] = passed
    out["scorer_cost_usd"] = np.where(cost_known, cost_total, np.nan)
    extra = pd.DataFrame(out, index=base.index)
    result = pd.concat([base, extra], axis=1)
    result.attrs["scorer_catalog"] = catalog.to_dict("records")
    return result


def _latest_rows(
    con, base: pd.DataFrame, scores: pd.DataFrame, scorers: list[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per score row: trial row in `base` (-1 if none), scorer code, status code, is-latest.

    Score rows are matched to trials by an exact join on (run_id, trial_id); duplicates (rescores) are resolved with numpy: newest
    scored_at wins, ties go to the row written last.
    """
    scorer_case = " ".join(f"WHEN {sql_str(x)} THEN {i}" for i, x in enumerate(scorers))
    status_case = " ".join(f"WHEN {sql_str(k)} THEN {v}" for k, v in STATUS_CODE.items())
    proj = con.sql(
        f"SELECT (CASE scorer {scorer_case} ELSE -1 END)::SMALLINT AS sc, "
        f"(CASE status {status_case} ELSE {CODE_OTHER} END)::TINYINT AS st, "
        f"{_ORDER_KEY} AS k FROM s"
    ).df()
    t = to_arrow(base, ["run_id", "trial_id"])
    con.register("t", t.append_column("__row", pa.array(np.arange(len(base), dtype=np.int64))))
    match = con.sql("SELECT s.__r, t.__row FROM s JOIN t USING (run_id, trial_id)").df()
    row = np.full(len(scores), -1, dtype=np.int64)
    row[match["__r"].to_numpy()] = match["__row"].to_numpy()
    sc = proj["sc"].to_numpy(dtype=np.int64)
    st = proj["st"].to_numpy(dtype=np.int8)
    k = proj["k"].to_numpy(dtype=np.int64)
    ok = (row >= 0) & (sc >= 0)
    cell = np.where(ok, row.astype(np.int64) * len(scorers) + sc, -1)
    win = ok.copy()
    counts = np.bincount(cell[ok], minlength=len(base) * len(scorers))
    dup = ok & (counts[np.where(ok, cell, 0)] > 1)
    if dup.any():
        idx = np.flatnonzero(dup)
        order = np.lexsort((idx, k[idx], cell[idx]))  # by cell, then time, then row
        last = np.ones(len(idx), dtype=bool)
        last[:-1] = cell[idx][order][1:] != cell[idx][order][:-1]
        win[idx] = False
        win[idx[order][last]] = True
    return row, sc, st, win


def _status_categorical(codes: np.ndarray) -> pd.Categorical:
    return pd.Categorical.from_codes(codes.astype(np.int8), categories=STATUS_LABELS)


def _run_lookup(
    catalog: pd.DataFrame,
    scorer: str,
    column: str,
    run_names: list[str],
    run_codes: np.ndarray,
    default: float,
) -> np.ndarray:
    sub = catalog.loc[catalog["scorer"] == scorer].set_index("run_id")[column]
    table = np.array([float(sub.get(r, default)) for r in run_names] or [default])
    return table[run_codes] if len(run_codes) else np.zeros(0)
