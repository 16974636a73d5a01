"""The round loop of adaptive repetitions (`repetitions: {min, max, stop, ci_width}`).

A run with a repetition plan executes `min` rounds (every config once per task per round),
then after each round asks `results.adaptive.decide_round` whether to stop, and otherwise grows
the frozen run by one round (the manifest's `rounds`, so status, resume and the results count
only the rounds decided). It never goes past `max` rounds, nor starts a round whose worst case
(the sum of the configs' budgets over the tasks; offline agents spend nothing) would take the
known spend over `max_cost_usd`. Every decision is kept in `adaptive/<run_id>.json`; the last
one says why the run stopped and after how many rounds.

The execution of partitions is passed in (`execute`), so the Dagster launcher keeps its runs
and this loop stays free of Dagster.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pandas as pd

from bench_pipeline import results as R
from bench_pipeline.formats.registry import AGENT_KINDS
from bench_pipeline.results.adaptive import COST_CAP, RoundDecision, decide_round
from bench_pipeline.runs.benchmark_run import BenchmarkRun, save_run
from bench_pipeline.warehouse import layout
from bench_pipeline.warehouse.store import Warehouse

Partitions = list[tuple[str, int]]


def round_partitions(run: BenchmarkRun, rep: int) -> Partitions:
    """The partitions of one round, in the run's execution order."""
    return [(c, r) for c, r in run.partitions() if r == rep]


def round_cost_cap(run: BenchmarkRun) -> float | None:
    """Worst-case spend of one more round: budgets x tasks; None when a budget is missing."""
    total = 0.0
    for c in run.launch.configs:
        if AGENT_KINDS.trait(c.agent.kind, "offline"):
            continue
        if c.agent.budget_usd is None:
            return None
        total += c.agent.budget_usd * len(run.taskset.tasks)
    return total


def known_spend(trials: pd.DataFrame) -> float | None:
    """Agent spend so far; None when any trial's cost is unknown (never counted as $0)."""
    if trials.empty:
        return 0.0
    cost = trials["cost_usd"]
    return None if cost.isna().any() else float(cost.sum())


def decide(warehouse: Warehouse, run: BenchmarkRun) -> RoundDecision:
    """The decision after the run's current rounds, the cost cap included."""
    from bench_pipeline.runs.derived import run_rows

    plan = run.launch.adaptive
    assert plan is not None, "decide() is for runs with a repetition plan"
    trials, scores = run_rows(warehouse, run.run_id)
    if trials.empty:
        empty = pd.DataFrame(columns=["config_id", "task_id", "repetition", "overall"])
        return decide_round(empty, run.repetitions, plan)
    per_trial = R.trial_overall(trials, scores)
    decision = decide_round(per_trial, run.repetitions, plan)
    if not decision.stop and plan.max_cost_usd is not None:
        spent, next_round = known_spend(trials), round_cost_cap(run)
        if spent is None or next_round is None or spent + next_round > plan.max_cost_usd:
            decision = replace(decision, stop=True, reason=COST_CAP)
    return decision


def record(warehouse: Warehouse, run: BenchmarkRun, decision: RoundDecision) -> dict[str, Any]:
    rel = layout.adaptive_rounds(run.run_id)
    data = warehouse.read_json(rel) if warehouse.exists(rel) else {"run_id": run.run_id}
    plan = run.launch.adaptive
    history = [d for d in data.get("decisions", []) if d.get("rounds") != decision.rounds]
    data |= {
        "plan": None if plan is None else plan.__dict__,
        "decisions": [*history, decision.to_dict()],
        "final": decision.to_dict() if decision.stop else None,
    }
    warehouse.write_json(rel, data)
    return data


def adaptive_record(warehouse: Warehouse, run_id: str) -> dict[str, Any] | None:
    """The stored decisions of an adaptive run, or None for a fixed-count run."""
    rel = layout.adaptive_rounds(run_id)
    return warehouse.read_json(rel) if warehouse.exists(rel) else None


def run_adaptive(
    run: BenchmarkRun,
    warehouse: Warehouse,
    execute: Callable[[Partitions], None],
    cancelled: Callable[[], bool] = lambda: False,
) -> RoundDecision:
    """Execute rounds until the stop rule, `max` or the cost cap (see module doc)."""
    plan = run.launch.adaptive
    assert plan is not None, "run_adaptive() is for runs with a repetition plan"
    if run.rounds is None:
        run = replace(run, rounds=plan.min)
        save_run(run, warehouse)
    # A resumed run first finishes the rounds it already decided on.
    execute(run.partitions())
    while True:
        decision = decide(warehouse, run)
        record(warehouse, run, decision)
        if decision.stop or cancelled():
            return decision
        run = replace(run, rounds=run.repetitions + 1)
        save_run(run, warehouse)
        execute(round_partitions(run, run.repetitions))
