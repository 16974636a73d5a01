"""Regressions of a run against the suite's pinned baseline run.

`detect_regressions(current_table, baseline_table, tolerance=None, suite=None, run_id=None,
baseline_run_id=None, *, current_trials=None, baseline_trials=None, alpha=0.05)` -> one row per
(config_id present in both tables, metric): `suite`, `run_id`, `baseline_run_id`, `config_id`,
`metric` ('overall' | 'cost'), `baseline`, `current`, `tolerance`, `regressed` (bool), `note`
(why a row could not be judged, or why it is not alerted), then for overall `verdict`
('regression' | 'within noise' | 'within tolerance' | null when not judged), `effect` (the
paired change current - baseline), `ci_low`, `ci_high` (95% cluster-bootstrap interval),
`p_value` (sign-flip over tasks, two-sided), `alpha`, `tasks_compared`, `flaky_tasks`
(comma-separated, excluded from the gate).

- overall, significance-gated (with the per-trial frames of both runs, `trial_overall`): per
  task, the mean overall of the config's trials in each run; the effect is the mean over tasks
  of current - baseline, tasks paired when both runs scored them. Flaky tasks — mixed outcomes
  (pass and fail) across the baseline's repetitions of the same config — are excluded and
  named. A regression is recorded only when the drop exceeds tolerance["overall"] (default
  0.05) AND p < alpha; a larger drop that is not significant is "within noise" with its interval,
  carries a note and is never alerted (nor closes an open regression). With G tasks the
  smallest p is 2 / 2^G, so fewer than 6 tasks can never be significant at 5%.
- overall without the per-trial frames: regressed when baseline - current > tolerance (no test);
- cost (avg_cost_usd): regressed when current > baseline * (1 + tolerance["cost"]) (relative,
  default 0.25), judged only with cost_coverage == 1 on both sides; otherwise regressed False
  and `note` says so.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ._common import EPS, nan_to_none
from .effects import effect

DEFAULT_TOLERANCE = {"overall": 0.05, "cost": 0.25}
COLUMNS = [
    "suite",
    "run_id",
    "baseline_run_id",
    "config_id",
    "metric",
    "baseline",
    "current",
    "tolerance",
    "regressed",
    "note",
    "verdict",
    "effect",
    "ci_low",
    "ci_high",
    "p_value",
    "alpha",
    "tasks_compared",
    "flaky_tasks",
]
REGRESSION, WITHIN_NOISE, WITHIN_TOLERANCE = "regression", "within noise", "within tolerance"
DEFAULT_ALPHA = 0.05


def _first(table: pd.DataFrame, column: str) -> str | None:
    if column in table.columns and len(table):
        return nan_to_none(table[column].iloc[0])
    return None


def detect_regressions(
    current_table: pd.DataFrame,
    baseline_table: pd.DataFrame,
    tolerance: dict[str, float] | None = None,
    suite: str | None = None,
    run_id: str | None = None,
    baseline_run_id: str | None = None,
    *,
    current_trials: pd.DataFrame | None = None,
    baseline_trials: pd.DataFrame | None = None,
    alpha: float = DEFAULT_ALPHA,
) -> pd.DataFrame:
    """Overall drops and cost rises beyond tolerance, per config (see module doc)."""
    tol = DEFAULT_TOLERANCE | {k: float(v) for k, v in (tolerance or {}).items() if v is not None}
    suite = suite if suite is not None else _first(current_table, "suite")
    run_id = run_id if run_id is not None else _first(current_table, "run_id")
    baseline_run_id = (
        baseline_run_id if baseline_run_id is not None else _first(baseline_table, "run_id")
    )
    base = baseline_table.set_index("config_id")
    rows = []
    for _, cur in current_table.iterrows():  # one row per config: a handful
        cid = cur["config_id"]
        if cid not in base.index:
            continue
        b = base.loc[cid]
        common = {
            "suite": suite,
            "run_id": run_id,
            "baseline_run_id": baseline_run_id,
            "config_id": cid,
        }
        bo, co = nan_to_none(b["overall"]), nan_to_none(cur["overall"])
        if bo is None or co is None:
            rows.append(
                common
                | {
                    "metric": "overall",
                    "baseline": bo,
                    "current": co,
                    "tolerance": tol["overall"],
                    "regressed": False,
                    "note": "overall unavailable on one side",
                }
            )
        elif current_trials is not None and baseline_trials is not None:
            gate = gated_overall(current_trials, baseline_trials, cid, tol["overall"], alpha)
            rows.append(
                common
                | {"metric": "overall", "baseline": bo, "current": co, "tolerance": tol["overall"]}
                | gate
            )
        else:
            rows.append(
                common
                | {
                    "metric": "overall",
                    "baseline": bo,
                    "current": co,
                    "tolerance": tol["overall"],
                    "regressed": bool(bo - co > tol["overall"] + EPS),
                    "note": None,
                }
            )
        bc, cc = nan_to_none(b.get("avg_cost_usd")), nan_to_none(cur.get("avg_cost_usd"))
        full = (nan_to_none(b.get("cost_coverage")) or 0) >= 1 - EPS and (
            nan_to_none(cur.get("cost_coverage")) or 0
        ) >= 1 - EPS
        if not full or bc is None or cc is None:
            rows.append(
                common
                | {
                    "metric": "cost",
                    "baseline": bc,
                    "current": cc,
                    "tolerance": tol["cost"],
                    "regressed": False,
                    "note": "cost not compared: cost coverage below 100% on one side",
                }
            )
        else:
            limit = bc * (1 + tol["cost"])
            regressed = cc > limit + EPS if bc > 0 else cc > EPS
            rows.append(
                common
                | {
                    "metric": "cost",
                    "baseline": bc,
                    "current": cc,
                    "tolerance": tol["cost"],
                    "regressed": bool(regressed),
                    "note": None if math.isfinite(limit) else "baseline cost not finite",
                }
            )
    return pd.DataFrame(rows, columns=COLUMNS)


def _config_rows(per_trial: pd.DataFrame, config_id: str) -> pd.DataFrame:
    rows = per_trial.loc[(per_trial["config_id"].astype(str) == str(config_id)).to_numpy()]
    return pd.DataFrame(
        {
            "task_id": rows["task_id"].astype(str).to_numpy(),
            "overall": rows["overall"].to_numpy(dtype=float, na_value=np.nan),
            "passed": rows["passed"].to_numpy(dtype=float, na_value=np.nan)
            if "passed" in rows
            else np.nan,
        }
    )


def flaky_tasks(baseline_rows: pd.DataFrame) -> list[str]:
    """Tasks whose baseline repetitions of one config both passed and failed."""
    scored = baseline_rows.dropna(subset=["passed"])
    spread = scored.groupby("task_id")["passed"].agg(["min", "max"])
    return sorted(str(t) for t in spread.index[spread["min"] != spread["max"]])


def gated_overall(
    current_trials: pd.DataFrame,
    baseline_trials: pd.DataFrame,
    config_id: str,
    tolerance: float,
    alpha: float = DEFAULT_ALPHA,
) -> dict[str, object]:
    """The overall row's verdict: drop beyond tolerance AND significant (see module doc)."""
    cur = _config_rows(current_trials, config_id)
    base = _config_rows(baseline_trials, config_id)
    flaky = flaky_tasks(base)
    cur_t = cur.dropna(subset=["overall"]).groupby("task_id")["overall"].mean()
    base_t = base.dropna(subset=["overall"]).groupby("task_id")["overall"].mean()
    both = sorted(set(cur_t.index) & set(base_t.index) - set(flaky))
    out: dict[str, object] = {
        "alpha": alpha,
        "flaky_tasks": ", ".join(flaky) or None,
        "tasks_compared": len(both),
    }
    if not both:
        return out | {
            "regressed": False,
            "verdict": None,
            "note": "no task scored in both runs (flaky tasks excluded)",
        }
    diffs = cur_t.loc[both].to_numpy() - base_t.loc[both].to_numpy()
    eff = effect(np.asarray(both), diffs)
    drop = -(eff.delta or 0.0)
    significant = eff.p_value is not None and eff.p_value < alpha
    shown = (
        f"change {eff.delta:+.3f} over {len(both)} tasks (95% CI "
        + (
            "unavailable"
            if eff.ci_low is None or eff.ci_high is None
            else f"{eff.ci_low:+.3f} to {eff.ci_high:+.3f}"
        )
        + f"), p = {eff.p_value:.3g}"
    )
    if drop <= tolerance + EPS:
        verdict, note = WITHIN_TOLERANCE, None
    elif significant:
        verdict, note = REGRESSION, None
    else:
        verdict = WITHIN_NOISE
        note = f"within noise: {shown} is not significant at {alpha:g}; not alerted"
    return out | {
        "regressed": verdict == REGRESSION,
        "verdict": verdict,
        "note": note,
        "effect": eff.delta,
        "ci_low": eff.ci_low,
        "ci_high": eff.ci_high,
        "p_value": eff.p_value,
    }
