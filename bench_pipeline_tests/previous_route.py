"""The previous route to the derived tables: the oracle of test_derived_route.py.

Commit a5575a0's `compute_derived` read every column of the run's trials and scores whole
(`Warehouse.read`), took `latest_trials` and `latest_scores`, then `trial_overall`, and handed
those frames to the table functions. The route that replaced it reads only the columns it uses,
as categoricals, and picks the latest scores in the same pass as the per-trial pivot
(`results.latest_trial_overall`). What changed is the reading and that pass, so this oracle is
the old composition over the product's own step-by-step functions, which remain the general
case of the new pass; the table functions are the product's, unchanged since a5575a0
(`git diff a5575a0 -- bench_pipeline/results/` touches none of config_table, grid, recommend,
by_tag, compare, regressions, uncertainty; pareto only moved its matplotlib import). McNemar's
p-value, the one statistic whose code changed (no SciPy), is checked against SciPy itself.
(A verbatim copy of a5575a0's results package stood here first: 2,955 lines, 7 of its 11
modules identical to the product's, and a copy that freezes every table's behaviour forever.)

Where a table function itself was rewritten for speed, the oracle keeps what it replaced: the
recommendations below are the pandas version of `results.recommend` (commit 73a2e45, with its
later rule that no pick goes to a config that scored 0), and the
paired comparison is every config's `paired_comparison` (the general merge-based route), not
`compare_all`'s fast path; the config table and the table by tag are previous_config_table.py's;
the grid's lists of trial ids (cut from Arrow's strings since) are a pandas groupby's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from bench_pipeline.results._common import EPS, nan_to_none
from bench_pipeline.results.compare import paired_comparison
from bench_pipeline.results.grid import task_config_grid
from bench_pipeline.results.pareto import pareto_frontier
from bench_pipeline.results.recommend import KINDS, _fmt, _why_none
from bench_pipeline.results.regressions import COLUMNS as REGRESSION_COLUMNS
from bench_pipeline.results.regressions import detect_regressions
from bench_pipeline.results.scores import latest_scores, latest_trials, trial_overall
from bench_pipeline.runs.derived import scenario_turns
from bench_pipeline.warehouse.store import Warehouse
from bench_pipeline_tests.previous_config_table import config_table, config_table_by_tag


def run_rows(warehouse: Warehouse, run_id: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    trials = warehouse.read("trials", run_id)
    scores = warehouse.read("scores", run_id)
    if not trials.empty:
        trials = latest_trials(trials)
    if not scores.empty:
        scores = latest_scores(scores)
    return trials, scores


def trial_ids_by_cell(per_trial: pd.DataFrame, grid: pd.DataFrame) -> list[list[str]]:
    """Each grid row's trial ids by repetition (ties: row order), as Python lists."""
    keys = ["task_id", "config_id"]
    rows = per_trial[[*keys, "repetition", "trial_id"]].astype(
        {"task_id": object, "config_id": object, "trial_id": object}
    )
    rows = rows[rows["task_id"].notna() & rows["config_id"].notna()]
    rows = rows.sort_values("repetition", kind="stable")
    lists = rows.groupby(keys, sort=False)["trial_id"].agg(list)
    return [lists[(t, c)] for t, c in zip(grid["task_id"], grid["config_id"], strict=True)]


def derived_tables(
    warehouse: Warehouse,
    run_id: str,
    baseline_run_id: str | None = None,
    tolerance: dict[str, float] | None = None,
    suite: str | None = None,
) -> tuple[dict[str, pd.DataFrame], dict]:
    """(tables, recommendations) of a5575a0's compute_derived, before its annotations."""
    trials, scores = run_rows(warehouse, run_id)
    per_trial = trial_overall(trials, scores)
    baseline_table = baseline_per_trial = None
    if baseline_run_id:
        bt, bs = run_rows(warehouse, baseline_run_id)
        baseline_per_trial = trial_overall(bt, bs) if not bt.empty else None
        baseline_table = (
            config_table(bt, bs, per_trial=baseline_per_trial) if not bt.empty else None
        )
    table = config_table(trials, scores, baseline_table, per_trial=per_trial)
    grid = task_config_grid(trials, scores, per_trial=per_trial)
    grid["trial_ids"] = trial_ids_by_cell(per_trial, grid)
    recs = recommend(table)
    frontier = pareto_frontier(table)
    by_tag = config_table_by_tag(trials, scores, per_trial=per_trial)
    comparison = compare_all(per_trial)
    if baseline_table is not None:
        regressions = detect_regressions(
            table,
            baseline_table,
            tolerance,
            suite=suite,
            run_id=run_id,
            baseline_run_id=baseline_run_id,
            current_trials=per_trial,
            baseline_trials=baseline_per_trial,
        )
    else:
        regressions = pd.DataFrame(columns=REGRESSION_COLUMNS)
    tables = {
        "config_table": table,
        "task_grid": grid,
        "recommendations": recommendations_frame(table),
        "pareto_frontier": frontier,
        "config_table_by_tag": by_tag,
        "recommendations_by_tag": recommendations_frame(by_tag, keys=["tag"]),
        "paired_comparison": comparison,
        "regressions": regressions,
        "scenario_turns": scenario_turns(scores),
    }
    return tables, recs


def compare_all(pt: pd.DataFrame) -> pd.DataFrame:
    """`results.compare_all` by its general route: each config's `paired_comparison` (pairs by
    a merge on (task, repetition)) against the is_baseline config, else the first config."""
    configs = [str(c) for c in pd.unique(pt["config_id"])]
    flags = pt["is_baseline"].to_numpy(dtype=bool, na_value=False)
    first = np.flatnonzero(flags)[:1]
    baseline = str(pt["config_id"].iloc[int(first[0])]) if len(first) else configs[0]
    rows = [
        paired_comparison(pt, pt, cfg, baseline, per_trial=pt) for cfg in configs if cfg != baseline
    ]
    return pd.DataFrame(rows)


# ---- results.recommend as of commit 73a2e45 (pandas), before its rewrite on plain arrays


def _comparability(table: pd.DataFrame) -> tuple[bool, str | None]:
    differing = []
    for col in table.columns:
        if not col.startswith("scored_") or col == "scored_share":
            continue
        name = col[len("scored_") :]
        of = table.get(f"of_{name}")
        if of is None:
            continue
        mask = of > 0
        share = table.loc[mask, col] / of[mask]
        if len(share) > 1 and share.max() - share.min() > EPS:
            parts = ", ".join(
                f"{cid} {int(s)}/{int(o)}"
                for cid, s, o in zip(
                    table.loc[mask, "config_id"], table.loc[mask, col], of[mask], strict=True
                )
            )
            differing.append(f"{name}: {parts}")
    if not differing:
        return True, None
    return False, "configs have different shares of trials scored — " + "; ".join(differing)


def recommend(table: pd.DataFrame) -> dict:
    """Best quality, most efficient and lowest cost config with comparability caveats.

    Controls (`is_control`: the oracle and the do-nothing agent) bound the scale but are never
    recommended; a pick that no configuration qualifies for says why in `reasons`."""
    controls = (
        table["is_control"].fillna(False).astype(bool)
        if "is_control" in table
        else pd.Series(False, index=table.index)
    )
    candidates = table.loc[~controls]
    rows = candidates.loc[candidates["overall"].notna()].copy()
    full = rows["cost_coverage"].fillna(0) >= 1 - EPS
    cost_known = full & rows["avg_cost_usd"].notna()
    result: dict = dict.fromkeys(KINDS)
    reasons: dict[str, str] = {}
    rank = rows.iloc[:0]
    if len(rows):
        rank = rows.assign(_cost=rows["avg_cost_usd"].where(cost_known, np.inf)).sort_values(
            ["overall", "_cost", "config_id"], ascending=[False, True, True]
        )
    if len(rank) and rank.iloc[0]["overall"] > 0:
        best = rank.iloc[0]
        result["best_quality"] = {
            "config_id": best["config_id"],
            "overall": nan_to_none(best["overall"]),
            "avg_cost_usd": nan_to_none(best["avg_cost_usd"]) if cost_known[best.name] else None,
        }
    eff = rows.loc[cost_known & (rows["overall"] > 0)].copy()
    if len(eff):
        free = eff.loc[eff["avg_cost_usd"] <= EPS]
        if len(free):  # a known cost of $0 with a score above 0 beats every ratio
            top = free.sort_values(["overall", "config_id"], ascending=[False, True]).iloc[0]
            ratio = None
        else:
            eff["_ratio"] = eff["overall"] / eff["avg_cost_usd"]
            top = eff.sort_values(["_ratio", "config_id"], ascending=[False, True]).iloc[0]
            ratio = float(top["_ratio"])
        result["most_efficient"] = {
            "config_id": top["config_id"],
            "overall_per_usd": ratio,  # None: free (known cost $0)
            "overall": float(top["overall"]),
            "avg_cost_usd": float(top["avg_cost_usd"]),
        }
    cheap = rows.loc[cost_known & (rows["overall"] > 0)]
    if len(cheap):
        top = cheap.sort_values(
            ["avg_cost_usd", "overall", "config_id"], ascending=[True, False, True]
        ).iloc[0]
        result["lowest_cost"] = {
            "config_id": top["config_id"],
            "avg_cost_usd": float(top["avg_cost_usd"]),
            "overall": nan_to_none(top["overall"]),
        }
    for kind in KINDS:
        if result[kind] is None:
            reasons[kind] = _why_none(kind, table, controls, rows, cost_known)
    result["reasons"] = reasons
    result["controls"] = sorted(table.loc[controls, "config_id"].astype(str))
    result["comparable"], result["comparable_note"] = _comparability(table)
    result["overlap"], result["overlap_note"] = False, None
    if len(rank) >= 2 and result["best_quality"] is not None:
        first, second = rank.iloc[0], rank.iloc[1]
        lows = (first["overall_ci_low"], second["overall_ci_low"])
        highs = (first["overall_ci_high"], second["overall_ci_high"])
        if all(nan_to_none(v) is not None for v in (*lows, *highs)):
            if lows[0] <= highs[1] and lows[1] <= highs[0]:
                result["overlap"] = True
                result["overlap_note"] = (
                    f"best quality {first['config_id']} ({_fmt(first['overall'])}, 95% CI "
                    f"{_fmt(lows[0])}-{_fmt(highs[0])}) and runner-up {second['config_id']} "
                    f"({_fmt(second['overall'])}, 95% CI {_fmt(lows[1])}-{_fmt(highs[1])}) "
                    "overlap: the difference may be noise; add repetitions or tasks"
                )
        else:
            result["overlap_note"] = "confidence intervals unavailable (fewer than two tasks)"
    result["excluded_from_cost"] = sorted(
        table.loc[table["cost_coverage"].fillna(0) < 1 - EPS, "config_id"].astype(str)
    )
    return result


_METRIC = {
    "best_quality": ("overall", "overall"),
    "most_efficient": ("overall_per_usd", "overall_per_usd"),
    "lowest_cost": ("avg_cost_usd", "avg_cost_usd"),
}


def recommendations_frame(
    table: pd.DataFrame, keys: Sequence[str] = (), *, recommended: dict | None = None
) -> pd.DataFrame:
    """recommend() as rows, per value of `keys` (e.g. ["tag"]) when given; `recommended`:
    recommend(table) already made (without keys)."""
    keys = list(keys)
    parts = [((), table)] if not keys else list(table.groupby(keys, sort=True))
    rows = []
    for key, sub in parts:
        key = key if isinstance(key, tuple) else (key,)
        rec = recommended if recommended is not None and not keys else recommend(sub)
        for kind in KINDS:
            pick = rec[kind] or {}
            metric, field = _METRIC[kind]
            rows.append(
                dict(zip(keys, key, strict=True))
                | {
                    "recommendation": kind,
                    "config_id": pick.get("config_id"),
                    "metric": metric,
                    "value": pick.get(field),
                    "overall": pick.get("overall"),
                    "avg_cost_usd": pick.get("avg_cost_usd"),
                    "comparable": rec["comparable"],
                    "comparable_note": rec["comparable_note"],
                    "overlap": rec["overlap"],
                    "overlap_note": rec["overlap_note"],
                }
            )
    cols = [*keys, "recommendation", "config_id", "metric", "value", "overall", "avg_cost_usd"]
    cols += ["comparable", "comparable_note", "overlap", "overlap_note"]
    return pd.DataFrame(rows, columns=cols)
