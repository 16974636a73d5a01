"""One row per trial of a (config, repetition) partition: what a trials or scores
materialization shows in the Dagster UI (task, outcome, score, cost, duration, evidence)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from bench_pipeline.warehouse import layout

if TYPE_CHECKING:  # pandas and the results are imported when a partition is shown, not at load
    import pandas as pd

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
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if not isinstance(v, str | bool | int | float):
        import pandas as pd  # NaT, pd.NA: only frames carry them

        if pd.isna(v):
            return None
    return v


def trial_rows(trials: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows of just-executed trials (not scored yet): no read, score and status empty."""
    from bench_pipeline.results.scores import latest_trials

    return _rows(latest_trials(trials), None, {}) if not trials.empty else []


def partition_trials(
    warehouse: Warehouse,
    run_id: str,
    config_id: str,
    rep: int,
    trials: pd.DataFrame | None = None,
) -> list[dict[str, Any]]:
    """The partition's trials (latest row each) with their scores, sorted by task; reads only
    the partition's own files (not its trials when the caller passes the rows it read)."""
    from bench_pipeline.results.scores import latest_scores, latest_trials, trial_overall

    under = layout.partition_dir(config_id, rep)
    mine = warehouse.read("trials", run_id, under=under) if trials is None else trials
    if mine.empty:
        return []
    mine = latest_trials(mine)
    scores = warehouse.read("scores", run_id, under=under)
    if len(scores):
        scores = latest_scores(scores)
    # Column lists and dicts, not pandas rows: iterating rows of Arrow-backed columns
    # (`itertuples`, `to_dict("index")`) cost ~1 ms a trial, per partition materialization.
    per = trial_overall(mine, scores)
    wanted = [c for c in ("overall", "primary_status", "primary_scorer") if c in per.columns]
    per_trial = {
        tid: dict(zip(wanted, values, strict=True))
        for tid, *values in zip(
            per["trial_id"].tolist(), *(per[c].tolist() for c in wanted), strict=True
        )
    }
    reasons: dict[str, str] = {}
    if len(scores):
        for tid, scorer, reason in zip(
            scores["trial_id"].tolist(),
            scores["scorer"].tolist(),
            scores["reason"].tolist(),
            strict=True,
        ):
            p = per_trial.get(tid)
            if p is not None and scorer == p.get("primary_scorer"):
                reasons[tid] = str(reason or "")[:200]
    return _rows(mine, per_trial, reasons)


def _rows(
    mine: pd.DataFrame, per: dict[str, dict[str, Any]] | None, reasons: dict[str, str]
) -> list[dict[str, Any]]:
    ordered = mine.sort_values("task_id")
    rows = []
    for trial_id, task_id, outcome, cost, duration, evidence in zip(
        *(
            ordered[c].tolist()
            for c in (
                "trial_id",
                "task_id",
                "outcome",
                "cost_usd",
                "duration_seconds",
                "evidence_dir",
            )
        ),
        strict=True,
    ):
        p = per.get(trial_id, {}) if per is not None else {}
        overall = _value(p.get("overall")) if p else None
        rows.append(
            {
                "task": task_id,
                "outcome": outcome,
                "score": None if overall is None else round(float(overall), 4),
                "status": _value(p.get("primary_status")) if p else None,
                "reason": reasons.get(trial_id),
                "cost_usd": _value(cost),
                "duration_s": None if _value(duration) is None else round(float(duration), 3),
                "evidence": _value(evidence),
            }
        )
    return rows
