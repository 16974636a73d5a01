"""Regressions of a run against the suite's pinned baseline run.

`detect_regressions(current_table, baseline_table, tolerance=None, suite=None, run_id=None,
baseline_run_id=None)` -> one row per (config_id present in both tables, metric):
`suite`, `run_id`, `baseline_run_id`, `config_id`, `metric` ('overall' | 'cost'),
`baseline`, `current`, `tolerance`, `regressed` (bool), `note` (why a row could not be judged).

- overall: regressed when baseline - current > tolerance["overall"] (absolute, default 0.05);
- cost (avg_cost_usd): regressed when current > baseline * (1 + tolerance["cost"]) (relative,
  default 0.25), judged only with cost_coverage == 1 on both sides; otherwise regressed False
  and `note` says so.
"""

from __future__ import annotations

import math

import pandas as pd

from ._common import EPS, nan_to_none

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
]


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
