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
"""

from __future__ import annotations

import pandas as pd

from bench_pipeline.results.by_tag import config_table_by_tag, recommendations_by_tag
from bench_pipeline.results.compare import compare_all
from bench_pipeline.results.config_table import config_table
from bench_pipeline.results.grid import task_config_grid
from bench_pipeline.results.pareto import pareto_frontier
from bench_pipeline.results.recommend import recommend, recommendations_frame
from bench_pipeline.results.regressions import COLUMNS as REGRESSION_COLUMNS
from bench_pipeline.results.regressions import detect_regressions
from bench_pipeline.results.scores import latest_scores, latest_trials, trial_overall
from bench_pipeline.runs.derived import scenario_turns
from bench_pipeline.warehouse.store import Warehouse


def run_rows(warehouse: Warehouse, run_id: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    trials = warehouse.read("trials", run_id)
    scores = warehouse.read("scores", run_id)
    if not trials.empty:
        trials = latest_trials(trials)
    if not scores.empty:
        scores = latest_scores(scores)
    return trials, scores


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
