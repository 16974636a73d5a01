"""The config table and the table by tag as they were before `finish_cells` built its columns
as arrays (commit 172992f): the oracle of test_derived_route.py for those two tables, so the
rewritten function is never checked against itself. Only `finish_cells` changed; the other
helpers are the product's."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bench_pipeline.formats.vocabulary import UNTAGGED
from bench_pipeline.results._common import (
    as_str_series,
    first_rows,
    n_distinct,
    of_col,
    score_col,
    scored_col,
    single_run,
    str_codes,
)
from bench_pipeline.results.by_tag import _tag_list
from bench_pipeline.results.config_table import (
    DESCRIPTIVE,
    _keys_valid,
    add_baseline_deltas,
    catalog_for,
    cell_stats,
    group_index,
    score_names,
)
from bench_pipeline.results.uncertainty import Z95, cells_clustered_se, cells_pass_k


def config_table(trials, scores, baseline_table=None, *, per_trial):
    pt = per_trial
    single_run(pt, "config_table")
    catalog = catalog_for(pt, scores)
    inv, first, n_groups = group_index(pt, ["config_id"])
    cells = cell_stats(pt, inv, n_groups, catalog)
    key_values = {"config_id": pt["config_id"].iloc[first].reset_index(drop=True)}
    out = finish_cells(
        pt, cells, cells["group"], n_groups, key_values, ["config_id"], catalog, None
    )
    return add_baseline_deltas(out, baseline_table) if baseline_table is not None else out


def config_table_by_tag(trials, scores, *, per_trial):
    pt = per_trial
    single_run(pt, "config_table_by_tag")
    catalog = catalog_for(pt, scores)
    k = n_distinct(pt["repetition"]) if len(pt) else 0
    inv, cfg_first, n_cfg = group_index(pt, ["config_id"])
    cells = cell_stats(pt, inv, n_cfg, catalog)
    task_codes, task_names = str_codes(pt["task_id"])
    first = first_rows(task_codes, len(task_names))
    raw_tags = pt["tags"] if "tags" in pt else None
    tags_of: list[list[str]] = []
    for row in first:
        value = raw_tags.iloc[row] if raw_tags is not None and row >= 0 else []
        tags_of.append(list(dict.fromkeys(_tag_list(value))) or [UNTAGGED])
    tag_names = sorted({t for tags in tags_of for t in tags})
    tag_index = {t: i for i, t in enumerate(tag_names)}
    take, out_key = [], []
    for c, (g, t) in enumerate(zip(cells["group"], cells["task"], strict=True)):
        if t < 0:
            continue
        for tag in tags_of[t]:
            take.append(c)
            out_key.append(tag_index[tag] * n_cfg + g)
    take_a = np.asarray(take, dtype=np.int64)
    uniq, group = np.unique(np.asarray(out_key, dtype=np.int64), return_inverse=True)
    key_values = {
        "tag": pd.Series([tag_names[u // n_cfg] for u in uniq], dtype=object),
        "config_id": pt["config_id"].iloc[cfg_first[uniq % n_cfg]].reset_index(drop=True),
    }
    out = finish_cells(
        pt, cells, group, len(uniq), key_values, ["tag", "config_id"], catalog, k, take=take_a
    )
    return out.sort_values(["tag", "config_id"]).reset_index(drop=True)


def finish_cells(
    pt: pd.DataFrame,
    cells: dict[str, np.ndarray],
    group: np.ndarray,
    n_groups: int,
    key_values: dict[str, pd.Series],
    keys: list[str],
    catalog: pd.DataFrame,
    k: int | None,
    take: np.ndarray | None = None,
) -> pd.DataFrame:
    """The table rows from cell sums; `group[i]` is the output row of cell `take[i]` (a cell
    may feed several rows, e.g. a task with several tags)."""
    if take is None:
        take = np.arange(len(group))
    names = list(cells["_names"])
    _, multi = score_names(catalog)

    def agg(name: str) -> np.ndarray:
        return np.bincount(group, weights=cells[name][take], minlength=n_groups)

    def mean(s: str, c: str) -> np.ndarray:
        num, den = agg(s), agg(c)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(den > 0, num / np.maximum(den, 1), np.nan)

    out = pd.DataFrame(key_values)
    out["trials"] = agg("trials")
    out["trials_succeeded"] = agg("succ")
    out["pass_rate"] = mean("pass_sum", "pass_n")
    out["primary_scored"] = agg("pass_n")
    out["avg_cost_usd"] = mean("cost_sum", "cost_n")
    out["cost_known_trials"] = agg("cost_n")
    out["total_cost_usd"] = np.where(out["cost_known_trials"] > 0, agg("cost_sum"), np.nan)
    out["avg_duration_seconds"] = mean("dur_sum", "dur_n")
    out["avg_iterations"] = mean("iter_sum", "iter_n")
    out["scorer_cost_usd"] = np.where(agg("scost_n") > 0, agg("scost_sum"), np.nan)
    out["cost_coverage"] = out["cost_known_trials"] / out["trials"]
    for name in names:
        out[score_col(name)] = mean(f"v_sum:{name}", f"v_n:{name}")
        out[scored_col(name)] = agg(f"scored:{name}").astype(int)
        out[of_col(name)] = agg(f"of:{name}").astype(int)
    weights = catalog.drop_duplicates("scorer").set_index("scorer")["weight"].astype(float)
    for grp, crit in multi.items():
        if score_col(grp) not in out:
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
            out[score_col(grp)] = np.where(den > 0, num / den, np.nan)
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

    # uncertainty, clustered by task (cells with a null task or key take no part)
    valid = (cells["task"][take] >= 0) & _keys_valid(key_values, n_groups)[group]
    g_ok, t_ok = group[valid], take[valid]
    ose = cells_clustered_se(g_ok, cells["overall_sum"][t_ok], cells["overall_n"][t_ok], n_groups)[
        1
    ]
    out["overall_ci_low"] = (out["overall"] - Z95 * ose).clip(0, 1)
    out["overall_ci_high"] = (out["overall"] + Z95 * ose).clip(0, 1)
    p_mean, p_se = cells_clustered_se(
        g_ok, cells["pass_sum"][t_ok], cells["pass_n"][t_ok], n_groups
    )
    out["pass_rate_ci_low"] = pd.Series(p_mean - Z95 * p_se).clip(0, 1).to_numpy()
    out["pass_rate_ci_high"] = pd.Series(p_mean + Z95 * p_se).clip(0, 1).to_numpy()
    if k is None:
        k = n_distinct(pt["repetition"]) if len(pt) else 0
    tasks_n, at_k, hat_k = cells_pass_k(
        g_ok, cells["pass_n"][t_ok], cells["pass_sum"][t_ok], n_groups, k
    )
    out["pass_k_tasks"] = tasks_n
    out["pass_at_k"] = at_k
    out["pass_hat_k"] = hat_k
    out["k"] = k

    # unknown cost reasons, "reason: count; ..." by count desc then reason
    reasons = list(cells["_reasons"])
    text: list[str | None] = [None] * n_groups
    if reasons:
        n_cells = len(cells["trials"])
        per_cell = np.zeros((n_cells, len(reasons)))
        np.add.at(per_cell, (cells["_unknown_cell"], cells["_unknown_reason"]), 1)
        per_group = np.zeros((n_groups, len(reasons)))
        np.add.at(per_group, group, per_cell[take])
        for g in np.flatnonzero(per_group.sum(axis=1) > 0):
            items = sorted(
                ((int(c), r) for r, c in zip(reasons, per_group[g], strict=True) if c > 0),
                key=lambda it: (-it[0], it[1]),
            )
            text[g] = "; ".join(f"{r}: {c}" for c, r in items)
    out["cost_unknown"] = pd.Series(text, dtype=object)

    # descriptive columns: from the first trial of each group (constant within a config)
    first = np.full(n_groups, len(pt), dtype=np.int64)
    np.minimum.at(first, group, cells["first"][take])
    first = np.minimum(first, max(len(pt) - 1, 0))
    for col in [c for c in DESCRIPTIVE if c in pt.columns]:
        out[col] = pt[col].iloc[first].astype(object).to_numpy() if len(pt) else None
    if "is_baseline" in pt:
        out["is_baseline"] = agg("baseline") > 0
    run_id = pt["run_id"].astype(object).iloc[0] if len(pt) else None
    out.insert(0, "run_id", run_id)
    for key in keys:
        out[key] = as_str_series(out[key]).to_numpy()
    p_codes, p_u = str_codes(pt["primary_scorer"])
    p_first = np.flatnonzero(p_codes >= 0)
    out["primary_scorer"] = p_u[p_codes[p_first[0]]] if len(p_first) else None
    for col in ("trials", "trials_succeeded", "primary_scored", "cost_known_trials"):
        out[col] = out[col].astype(int)
    out["pass_k_tasks"] = out["pass_k_tasks"].astype(int)

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
