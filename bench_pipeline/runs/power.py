"""Power in the estimate: how many repetitions would detect a difference in overall.

From past runs of the suite (their trials on the launch's tasks):

- within-task variance s_w^2: the variance of overall across repetitions of one task under one
  config in one run, pooled over every (run, config, task) with at least two scored
  repetitions (weighted by their degrees of freedom);
- task-by-config variance tau^2: in past runs with two or more configs, how much the per-task
  difference between two configs varies from task to task beyond what repetition noise
  explains (var_t(d_t) - 2 s_w^2 / r, clipped at 0, averaged over config pairs); 0 when no past
  run had two configs (then the figure assumes a uniform shift, and says so).

The paired difference of two configs over T tasks x r repetitions then has
SE(r) = sqrt((tau^2 + 2 s_w^2 / r) / T), and a two-sided test at level alpha detects a true
difference delta with power ~ Phi(delta / SE(r) - z_{1-alpha/2}) (normal approximation, the
far tail ignored). `repetitions_needed` is the smallest r in 1..10 reaching the target power;
above 10 (what a launch allows) it says how many tasks 10 repetitions would need instead.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from bench_pipeline import results as R
from bench_pipeline.formats.model import MAX_REPETITIONS, Launch
from bench_pipeline.warehouse.store import Warehouse

DEFAULT_DELTA = 0.05
DEFAULT_POWER = 0.8
DEFAULT_ALPHA = 0.05


def variance_components(per_trial: pd.DataFrame) -> dict[str, Any]:
    """s_w^2, tau^2 and what they rest on, from past per-trial overall values (module doc)."""
    d = per_trial.loc[per_trial["overall"].notna(), ["run_id", "config_id", "task_id", "overall"]]
    d = d.assign(
        run_id=d["run_id"].astype(str),
        config_id=d["config_id"].astype(str),
        task_id=d["task_id"].astype(str),
        overall=d["overall"].astype(float),
    )
    cells = d.groupby(["run_id", "config_id", "task_id"])["overall"].agg(["var", "count", "mean"])
    repeated = cells[cells["count"] >= 2]
    if repeated.empty:
        return {"within_var": None, "between_var": None, "cells": 0, "runs": d["run_id"].nunique()}
    dof = repeated["count"] - 1
    within = float((repeated["var"] * dof).sum() / dof.sum())
    taus = []
    for _run, run_cells in cells.reset_index().groupby("run_id"):
        wide = run_cells.pivot(index="task_id", columns="config_id", values="mean")
        reps = float(run_cells["count"].mean())
        cols = list(wide.columns)
        for i in range(len(cols)):
            for j in range(i + 1, len(cols)):
                diff = (wide[cols[i]] - wide[cols[j]]).dropna()
                if len(diff) >= 2:
                    taus.append(max(0.0, float(diff.var(ddof=1)) - 2 * within / reps))
    return {
        "within_var": within,
        "between_var": float(np.mean(taus)) if taus else None,
        "cells": len(repeated),
        "runs": int(d["run_id"].nunique()),
    }


def power_at(reps: int, tasks: int, within: float, between: float, delta: float, alpha: float):
    se = math.sqrt(max(0.0, between + 2 * within / reps) / tasks)
    if se == 0:
        return 1.0
    return float(stats.norm.cdf(delta / se - stats.norm.ppf(1 - alpha / 2)))


def power_estimate(
    launch: Launch,
    warehouse: Warehouse,
    per_rep_cost_usd: float | None,
    per_rep_cap_usd: float | None = None,
    *,
    delta: float = DEFAULT_DELTA,
    power: float = DEFAULT_POWER,
    alpha: float = DEFAULT_ALPHA,
) -> dict[str, Any]:
    """Repetitions needed to detect `delta` in overall at `power`, and their cost."""
    suite, tasks = launch.suite.name, len(launch.tasks)
    out: dict[str, Any] = {
        "delta": delta,
        "power": power,
        "alpha": alpha,
        "tasks": tasks,
        "repetitions_needed": None,
        "cost_usd": None,
        "cost_cap_usd": None,
    }
    trials = warehouse.read("trials")
    need = (
        f"needs past runs of suite {suite} with repeated trials: run the launch once with "
        "repetitions >= 2 so the per-task variance can be measured"
    )
    if trials.empty:
        return out | {"basis": f"no past runs; {need}"}
    trials = trials[
        (trials["suite"] == suite) & trials["task_id"].isin([t.id for t in launch.tasks])
    ]
    if trials.empty:
        return out | {"basis": f"no past runs on these tasks; {need}"}
    scores = warehouse.read("scores")
    scores = scores[scores["run_id"].isin(set(trials["run_id"]))] if not scores.empty else scores
    per_trial = R.trial_overall(R.latest_trials(trials), R.latest_scores(scores))
    comp = variance_components(per_trial)
    if comp["within_var"] is None:
        return out | {"basis": f"past runs have no task repeated under one config; {need}"}
    within = comp["within_var"]
    between = comp["between_var"] or 0.0
    basis = (
        f"{comp['runs']} past runs, {comp['cells']} repeated task cells: within-task variance "
        f"{within:.4f}, task-by-config variance {between:.4f}"
        + ("" if comp["between_var"] is not None else " (no two-config past run: assumed 0)")
    )
    out |= {"within_var": within, "between_var": between, "basis": basis}
    for reps in range(1, MAX_REPETITIONS + 1):
        if power_at(reps, tasks, within, between, delta, alpha) >= power:
            return out | {
                "repetitions_needed": reps,
                "power_at_needed": power_at(reps, tasks, within, between, delta, alpha),
                "trials": reps * tasks * len(launch.configs),
                "cost_usd": None if per_rep_cost_usd is None else per_rep_cost_usd * reps,
                "cost_cap_usd": None if per_rep_cap_usd is None else per_rep_cap_usd * reps,
            }
    z = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)
    tasks_needed = math.ceil((between + 2 * within / MAX_REPETITIONS) * z**2 / delta**2)
    return out | {
        "power_at_max": power_at(MAX_REPETITIONS, tasks, within, between, delta, alpha),
        "tasks_needed_at_max": tasks_needed,
    }
