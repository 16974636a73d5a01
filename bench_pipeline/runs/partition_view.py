"""One row per trial of a (config, repetition) partition: what a trials or scores
materialization shows in the Dagster UI (task, outcome, score, cost, duration, evidence)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from bench_pipeline.results.scores import trial_overall
from bench_pipeline.runs.derived import run_rows
from bench_pipeline.warehouse.store import Warehouse

# column -> (type, description); the order is the table's.
PARTITION_COLUMNS: dict[str, tuple[str, str]] = {
    "task": ("string", "task id"),
    "outcome": ("string", "how the trial ended (succeeded, agent_error, budget_exceeded, ...)"),
    "score": ("float", "overall score in [0, 1]; empty until scored or when not scored"),
    "status": ("string", "primary scorer's status (scored, not_scored, inconclusive, ...)"),
    "reason": ("string", "why the primary scorer said so (first 200 characters)"),
    "cost_usd": ("float", "agent cost in USD; empty = unknown, never 0"),
    "duration_s": ("float", "wall time of the trial, seconds"),
    "evidence": ("string", "the trial's evidence folder (diff, transcript, checks)"),
}


def _value(v: Any) -> Any:
    if v is None or (not isinstance(v, str) and pd.isna(v)):
        return None
    return v


def partition_trials(
    warehouse: Warehouse, run_id: str, config_id: str, rep: int
) -> list[dict[str, Any]]:
    """The partition's trials (latest row each), sorted by task."""
    trials, scores = run_rows(warehouse, run_id)
    if trials.empty:
        return []
    mine = trials[(trials["config_id"] == config_id) & (trials["repetition"] == rep)]
    if mine.empty:
        return []
    per = trial_overall(
        mine, scores[scores["trial_id"].isin(mine["trial_id"])] if len(scores) else scores
    )
    per = per.set_index("trial_id")
    reasons: dict[str, str] = {}
    if len(scores):
        for s in scores[scores["trial_id"].isin(mine["trial_id"])].itertuples():
            if s.trial_id in per.index and s.scorer == per.loc[s.trial_id].get("primary_scorer"):
                reasons[s.trial_id] = str(s.reason or "")[:200]
    rows = []
    for t in mine.sort_values("task_id").itertuples():
        p = per.loc[t.trial_id] if t.trial_id in per.index else {}
        overall = _value(p.get("overall")) if len(p) else None
        rows.append(
            {
                "task": t.task_id,
                "outcome": t.outcome,
                "score": None if overall is None else round(float(overall), 4),
                "status": _value(p.get("primary_status")) if len(p) else None,
                "reason": reasons.get(t.trial_id),
                "cost_usd": _value(t.cost_usd),
                "duration_s": None
                if _value(t.duration_seconds) is None
                else round(float(t.duration_seconds), 3),
                "evidence": _value(t.evidence_dir),
            }
        )
    return rows
