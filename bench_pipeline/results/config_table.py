"""Config table: one row per configuration of ONE benchmark run.

`config_table(trials, scores, baseline_table=None, *, per_trial=None)` columns, in order:

- `run_id`, `suite`, `config_id`, `agent`, `agent_kind`, `model`, `effort`, `factory_ref`,
  `is_baseline` (the replay of recorded originals) — descriptive, when present in TRIALS;
- `trials` (all trials of the config), `trials_succeeded` (outcome == succeeded);
- `overall`: mean of the scorer-group means; a group mean uses only status == scored rows; all
  `llm_judge:*` criteria form ONE group whose mean is the weight-weighted mean of the criteria
  means (weight 0: reported, not counted); groups with no scored row are left out;
  `overall_ci_low`, `overall_ci_high`: 95 % CI, `overall` +- 1.96 * CR1 SE (clustered by
  task) of the per-trial overall values, clipped to [0, 1];
- `pass_rate`: share of trials whose primary scorer (first of checks, assert, ci in the run,
  else the first group in display order) equals 1, over `primary_scored` trials (primary
  status == scored); `pass_rate_ci_low`, `pass_rate_ci_high` (clustered by task);
  `primary_scorer`, `primary_scored`;
- `k` (number of repetitions in the run), `pass_at_k`, `pass_hat_k` (unbiased, averaged over
  tasks with at least k scored repetitions);
- `avg_cost_usd` (mean over trials with known cost: null cost is unknown, never 0),
  `total_cost_usd` (sum of known costs), `cost_known_trials`, `cost_coverage` (known / trials),
  `cost_unknown` (text "reason: count; ..." of unknown-cost trials, null when coverage is 1);
- `avg_duration_seconds`, `avg_iterations`, `scorer_cost_usd` (total scorer/judge spend on the
  config's latest scores: kept apart, never part of the config's cost);
- `scored_share` (sum of scored / sum of of over the individual scorers);
- per scorer and per multi-criteria group, in display order: `score_<name>` (mean of scored
  values), `scored_<name>` (trials with status scored), `of_<name>` (trials that should have
  that score: every trial of a run using the scorer; error/inconclusive/not_scored/missing
  rows are the gap between the two);
- with `baseline_table` (another run's config table): `delta_overall`, `delta_pass_rate`
  (current - baseline, joined on config_id) and `delta_avg_cost_usd` (only when
  cost_coverage == 1 on both sides, else null).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from bench_pipeline.tables import OUTCOME_SUCCEEDED

from ._common import (
    EPS,
    SCORE_SCORED,
    as_str_series,
    display_key,
    of_col,
    score_col,
    scored_col,
    single_run,
    status_col,
)
from .scores import scorer_catalog, trial_overall
from .uncertainty import Z95, clustered_ci_by, pass_k_by

DESCRIPTIVE = ["suite", "agent", "agent_kind", "model", "effort", "factory_ref"]


def catalog_for(per_trial: pd.DataFrame, scores: pd.DataFrame | None) -> pd.DataFrame:
    """The scorer catalog stored on `per_trial` by trial_overall, else computed from scores."""
    records = per_trial.attrs.get("scorer_catalog")
    if records is not None:
        return pd.DataFrame(
            records, columns=["run_id", "scorer", "scorer_group", "weight", "is_primary_group"]
        )
    if scores is None:
        raise ValueError("per_trial carries no scorer catalog: pass scores too")
    return scorer_catalog(scores)


def score_names(catalog: pd.DataFrame) -> tuple[list[str], dict[str, list[str]]]:
    """(all score column names in display order, {multi-criteria group: its criteria})."""
    members: dict[str, list[str]] = {}
    for scorer, group in zip(catalog["scorer"], catalog["scorer_group"], strict=True):
        if scorer not in members.setdefault(group, []):
            members[group].append(scorer)
    multi = {g: m for g, m in members.items() if m != [g]}
    names = sorted(set(catalog["scorer"]) | set(multi), key=lambda n: (display_key(n), n))
    # a group sorts right before its criteria ("llm_judge" < "llm_judge:x" already)
    return names, multi


def aggregate_trials(
    pt: pd.DataFrame, keys: Sequence[str], catalog: pd.DataFrame, k: int | None = None
) -> pd.DataFrame:
    """Config-table metrics of per-trial rows grouped by `keys` (e.g. config_id, or tag+config)."""
    keys = list(keys)
    names, multi = score_names(catalog)
    names = [n for n in names if status_col(n) in pt.columns]
    work = pd.DataFrame({key: pt[key] for key in keys})
    work["_trial"] = 1
    work["_succ"] = (pt["outcome"] == OUTCOME_SUCCEEDED).fillna(False).to_numpy(dtype=bool)
    cost = pt["cost_usd"].astype(float)
    work["_cost"] = cost
    work["_cost_known"] = cost.notna()
    work["_dur"] = pt["duration_seconds"].astype(float) if "duration_seconds" in pt else np.nan
    work["_iter"] = pt["iterations"].astype(float) if "iterations" in pt else np.nan
    work["_scost"] = pt["scorer_cost_usd"].astype(float)
    passed = pt["passed"].to_numpy(dtype=float, na_value=np.nan)
    work["_pass"] = passed
    work["_pass_n"] = ~np.isnan(passed)
    aggs: dict[str, tuple[str, str]] = {
        "trials": ("_trial", "sum"),
        "trials_succeeded": ("_succ", "sum"),
        "pass_rate": ("_pass", "mean"),
        "primary_scored": ("_pass_n", "sum"),
        "avg_cost_usd": ("_cost", "mean"),
        "total_cost_usd": ("_cost", "sum"),
        "cost_known_trials": ("_cost_known", "sum"),
        "avg_duration_seconds": ("_dur", "mean"),
        "avg_iterations": ("_iter", "mean"),
        "scorer_cost_usd": ("_scost", "sum"),
    }
    for i, name in enumerate(names):
        st = pt[status_col(name)]
        work[f"_v{i}"] = pt[score_col(name)].astype(float)
        work[f"_s{i}"] = (st == SCORE_SCORED).to_numpy()
        work[f"_o{i}"] = st.notna().to_numpy()
        aggs[f"_v{i}"] = (f"_v{i}", "mean")
        aggs[f"_s{i}"] = (f"_s{i}", "sum")
        aggs[f"_o{i}"] = (f"_o{i}", "sum")
    inv, first, n_groups = group_index(work, keys)
    out = pd.DataFrame({key: work[key].iloc[first].reset_index(drop=True) for key in keys})
    for name, (col, how) in aggs.items():
        out[name] = _reduce(work[col].to_numpy(dtype=float), inv, n_groups, how)
    has_scost = _reduce(work["_scost"].to_numpy(dtype=float), inv, n_groups, "count") > 0
    out.loc[~has_scost, "scorer_cost_usd"] = np.nan
    has_cost = out["cost_known_trials"] > 0
    out.loc[~has_cost, "total_cost_usd"] = np.nan
    out["cost_coverage"] = out["cost_known_trials"] / out["trials"]

    # per-scorer columns, then group means (weight-weighted over criteria means) and overall
    for i, name in enumerate(names):
        out[score_col(name)] = out.pop(f"_v{i}")
        out[scored_col(name)] = out.pop(f"_s{i}").astype(int)
        out[of_col(name)] = out.pop(f"_o{i}").astype(int)
    weights = catalog.drop_duplicates("scorer").set_index("scorer")["weight"].astype(float)
    for group, crit in multi.items():
        if score_col(group) not in out:
            continue
        num = np.zeros(len(out))
        den = np.zeros(len(out))
        for c in crit:
            w = float(weights.get(c, 0.0))
            if w <= 0 or score_col(c) not in out:
                continue
            m = out[score_col(c)].to_numpy(dtype=float)
            ok = ~np.isnan(m)
            num[ok] += w * m[ok]
            den[ok] += w
        with np.errstate(divide="ignore", invalid="ignore"):
            out[score_col(group)] = np.where(den > 0, num / den, np.nan)
    all_groups = set(catalog["scorer_group"])
    group_names = [n for n in names if n in all_groups]
    if group_names:
        out["overall"] = out[[score_col(g) for g in group_names]].mean(axis=1, skipna=True)
    else:
        out["overall"] = np.nan
    scorer_only = [n for n in names if n not in multi]
    if scorer_only:
        s_sum = out[[scored_col(n) for n in scorer_only]].sum(axis=1)
        o_sum = out[[of_col(n) for n in scorer_only]].sum(axis=1)
        out["scored_share"] = np.where(o_sum > 0, s_sum / o_sum.where(o_sum > 0, 1), np.nan)
    else:
        out["scored_share"] = np.nan

    # uncertainty, clustered by task
    ci_frame = pd.DataFrame({key: pt[key] for key in keys})
    ci_frame["task_id"] = pt["task_id"]
    ci_frame["overall"] = pt["overall"].astype(float)
    ci_frame["passed"] = passed
    oc = clustered_ci_by(ci_frame, "overall", "task_id", keys)[[*keys, "se"]]
    out = out.merge(oc.rename(columns={"se": "_ose"}), on=keys, how="left")
    low = (out["overall"] - Z95 * out["_ose"]).clip(0, 1)
    high = (out["overall"] + Z95 * out["_ose"]).clip(0, 1)
    out["overall_ci_low"], out["overall_ci_high"] = low, high
    pc = clustered_ci_by(ci_frame, "passed", "task_id", keys)[[*keys, "ci_low", "ci_high"]]
    out = out.merge(
        pc.rename(columns={"ci_low": "pass_rate_ci_low", "ci_high": "pass_rate_ci_high"}),
        on=keys,
        how="left",
    )
    if k is None:
        k = int(pt["repetition"].nunique()) if len(pt) else 0
    pk = pass_k_by(ci_frame, "passed", "task_id", keys, k)
    out = out.merge(pk, on=keys, how="left")
    out["k"] = k

    # unknown cost reasons
    unknown = pt.loc[pt["cost_usd"].isna(), keys].copy()
    if len(unknown):
        reason = (
            pt.loc[pt["cost_usd"].isna(), "cost_unknown_reason"].astype(object)
            if "cost_unknown_reason" in pt
            else pd.Series(None, index=unknown.index, dtype=object)
        )
        unknown["_reason"] = reason.where(reason.notna() & (reason != ""), "unknown").to_numpy()
        counts = unknown.groupby([*keys, "_reason"], observed=True).size().reset_index(name="_n")
        counts = counts.sort_values(
            [*keys, "_n", "_reason"], ascending=[True] * len(keys) + [False, True]
        )
        counts["_txt"] = counts["_reason"].astype(str) + ": " + counts["_n"].astype(str)
        text = (
            counts.groupby(keys, observed=True)["_txt"]
            .agg("; ".join)
            .reset_index(name="cost_unknown")
        )
        out = out.merge(text, on=keys, how="left")
    else:
        out["cost_unknown"] = None
    out["cost_unknown"] = (
        out["cost_unknown"].astype(object).where(out["cost_unknown"].notna(), None)
    )

    # descriptive columns: from the first trial of each group (constant within a config)
    desc_cols = [c for c in DESCRIPTIVE if c in pt.columns]
    if desc_cols or "is_baseline" in pt:
        for col in desc_cols:
            out[col] = pt[col].iloc[first].astype(object).to_numpy()
        if "is_baseline" in pt:
            flag = pt["is_baseline"].fillna(False).astype(bool).to_numpy(dtype=float)
            out["is_baseline"] = _reduce(flag, inv, n_groups, "sum") > 0
    run_id = pt["run_id"].astype(object).iloc[0] if len(pt) else None
    out.insert(0, "run_id", run_id)
    out = out.drop(columns=["_ose"])
    for key in keys:
        out[key] = as_str_series(out[key]).to_numpy()
    primary = pt["primary_scorer"].astype(object).dropna()
    out["primary_scorer"] = primary.iloc[0] if len(primary) else None
    for col in (
        "trials",
        "trials_succeeded",
        "primary_scored",
        "cost_known_trials",
        "pass_k_tasks",
    ):
        out[col] = out[col].fillna(0).astype(int)

    front = [
        "run_id",
        "suite",
        *keys,
        "agent",
        "agent_kind",
        "model",
        "effort",
        "factory_ref",
        "is_baseline",
    ]
    metrics = [
        "trials",
        "trials_succeeded",
        "overall",
        "overall_ci_low",
        "overall_ci_high",
        "pass_rate",
        "pass_rate_ci_low",
        "pass_rate_ci_high",
        "primary_scorer",
        "primary_scored",
        "k",
        "pass_k_tasks",
        "pass_at_k",
        "pass_hat_k",
        "avg_cost_usd",
        "total_cost_usd",
        "cost_known_trials",
        "cost_coverage",
        "cost_unknown",
        "avg_duration_seconds",
        "avg_iterations",
        "scorer_cost_usd",
        "scored_share",
    ]
    per_score = [c for n in names for c in (score_col(n), scored_col(n), of_col(n)) if c in out]
    ordered = [c for c in front if c in out] + metrics + per_score
    return out[ordered].reset_index(drop=True)


def group_index(frame: pd.DataFrame, keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray, int]:
    """(group number per row, first row of each group, number of groups), groups sorted by keys."""
    combined = np.zeros(len(frame), dtype=np.int64)
    for key in keys:
        col = frame[key]
        if not isinstance(col.dtype, pd.CategoricalDtype):
            col = col.astype("category")
        codes = col.cat.codes.to_numpy().astype(np.int64)
        combined = combined * (len(col.cat.categories) + 1) + (codes + 1)
    uniq, inv = np.unique(combined, return_inverse=True)
    order = np.argsort(inv, kind="stable")
    if len(inv):
        starts = np.r_[0, np.flatnonzero(np.diff(inv[order])) + 1]
    else:
        starts = np.zeros(0, dtype=np.int64)
    return inv, order[starts], len(uniq)


def _reduce(x: np.ndarray, inv: np.ndarray, n: int, how: str) -> np.ndarray:
    """Per-group sum / nan-skipping mean / non-null count with bincount."""
    ok = ~np.isnan(x)
    if how == "count":
        return np.bincount(inv[ok], minlength=n)
    total = np.bincount(inv[ok], weights=x[ok], minlength=n)
    if how == "sum":
        return total
    count = np.bincount(inv[ok], minlength=n)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def add_baseline_deltas(table: pd.DataFrame, baseline_table: pd.DataFrame) -> pd.DataFrame:
    """delta_overall, delta_pass_rate, delta_avg_cost_usd against another run's config table."""
    base = baseline_table.set_index("config_id")
    ids = table["config_id"]
    b_overall = ids.map(base["overall"]).astype(float)
    b_pass = ids.map(base["pass_rate"]).astype(float)
    b_cost = ids.map(base["avg_cost_usd"]).astype(float)
    b_cov = ids.map(base["cost_coverage"]).astype(float)
    out = table.copy()
    out["delta_overall"] = out["overall"] - b_overall
    out["delta_pass_rate"] = out["pass_rate"] - b_pass
    full = (out["cost_coverage"] >= 1 - EPS) & (b_cov >= 1 - EPS)
    out["delta_avg_cost_usd"] = (out["avg_cost_usd"] - b_cost).where(full)
    return out


def config_table(
    trials: pd.DataFrame,
    scores: pd.DataFrame,
    baseline_table: pd.DataFrame | None = None,
    *,
    per_trial: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per config_id of one run (see module doc). `per_trial`: reuse trial_overall()."""
    pt = per_trial if per_trial is not None else trial_overall(trials, scores)
    single_run(pt, "config_table")
    catalog = catalog_for(pt, scores)
    out = aggregate_trials(pt, ["config_id"], catalog)
    if baseline_table is not None:
        out = add_baseline_deltas(out, baseline_table)
    return out
