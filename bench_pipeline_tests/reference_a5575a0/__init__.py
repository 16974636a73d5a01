"""The derived tables as commit a5575a0 computed them: the oracle of test_derived_route.py.

The modules beside this one are verbatim copies of `bench_pipeline/results/*.py` at a5575a0
(pandas frames of every column, read with `Warehouse.read`); `derived_tables` is the table part
of that commit's `runs.derived.compute_derived`. They are copied rather than checked out from
git at test time because CI may run on a shallow clone, and an oracle must not change when the
product code does. Never edit them to make a test pass: a difference is a regression.
"""

from __future__ import annotations

import json

import pandas as pd

from bench_pipeline.warehouse.store import Warehouse

from .by_tag import config_table_by_tag, recommendations_by_tag
from .compare import compare_all
from .config_table import config_table
from .grid import task_config_grid
from .pareto import pareto_frontier
from .recommend import recommend, recommendations_frame
from .regressions import COLUMNS as REGRESSION_COLUMNS
from .regressions import detect_regressions
from .scores import latest_scores, latest_trials, trial_overall


def run_rows(warehouse: Warehouse, run_id: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    trials = warehouse.read("trials", run_id)
    scores = warehouse.read("scores", run_id)
    if not trials.empty:
        trials = latest_trials(trials)
    if not scores.empty:
        scores = latest_scores(scores)
    return trials, scores


def scenario_turns(scores: pd.DataFrame) -> pd.DataFrame:
    from bench_pipeline.scorers.asserts import turn_pass_hat_n

    columns = ["task_id", "config_id", "turn", "repetitions", "passes", "passed", "pass_rate"]
    rows = []
    asserts = scores[scores["scorer"] == "assert"] if not scores.empty else scores
    for r in asserts.itertuples():
        details = json.loads(r.details_json) if isinstance(r.details_json, str) else {}
        for t in details.get("turns", []):
            rows.append(
                {
                    "task_id": r.task_id,
                    "config_id": r.config_id,
                    "repetition": int(r.repetition),
                    "turn": t.get("turn"),
                    "passed": t.get("passed"),
                    "latency_ms": t.get("latency_ms"),
                    "completion_tokens": t.get("completion_tokens"),
                    "cost_usd": t.get("cost_usd"),
                    "judge_score": None,
                }
            )
    out = pd.DataFrame(turn_pass_hat_n(rows))
    return out if not out.empty else pd.DataFrame(columns=columns)


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
        baseline_table = config_table(bt, bs) if not bt.empty else None
        baseline_per_trial = trial_overall(bt, bs) if not bt.empty else None
    table = config_table(trials, scores, baseline_table, per_trial=per_trial)
    grid = task_config_grid(trials, scores, per_trial=per_trial)
    recs = recommend(table)
    frontier = pareto_frontier(table)
    by_tag = config_table_by_tag(trials, scores, per_trial=per_trial)
    comparison = compare_all(trials, scores, per_trial=per_trial)
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
        "recommendations_by_tag": recommendations_by_tag(by_tag),
        "paired_comparison": comparison,
        "regressions": regressions,
        "scenario_turns": scenario_turns(scores),
    }
    return tables, recs
