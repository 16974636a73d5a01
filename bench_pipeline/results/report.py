"""The results explorer: one self-contained, offline HTML page of one run.

`render_report_html(run_meta, tables, recommendations, trials, scores, evidence=None, *, tasks=None,
baseline_config=None, caps=None) -> str` takes the run's derived tables (as `compute_derived`
names them), its latest trials and scores, and bounded evidence snippets per trial (see
`runs/evidence.py`), and returns ONE HTML document: inline CSS, inline plain JS
(`static/explorer.js`), the data embedded as JSON. It holds no URL: no link, CDN, font or
image source, and every "://" inside the data is written as ":\\/\\/" (the same string to
JavaScript), so opening it never makes a request.

What it shows: recommendations with their notes; the Pareto chart with x/y pickers (overall,
each scorer, average cost, average time) whose frontier is computed here for
every axis pair (`frontier_records`: `pareto_frontier`'s rows, without a frame per pair); the config table with curated columns and deltas against
the baseline configuration; regressions; the task x config grid with one state per cell
(passed, failed, mixed, not scored + why, infrastructure), filters (failures only, tag,
config, holdouts) and per-tag tabs; a cell opens its trials, a trial its diff, transcript,
checks, scores and turns; paired comparisons; per-turn results of text tasks.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from itertools import product
from pathlib import Path
from typing import Any

import pandas as pd

from bench_pipeline.formats.vocabulary import (
    INFRA_OUTCOMES,
    OUTCOME_CANCELLED,
    OUTCOME_NOT_APPLICABLE,
    SCORE_ERROR,
    SCORE_INCONCLUSIVE,
)

from .pareto import axis_label, frontier_records
from .scores import latest_scores, latest_trials, trial_overall

STATIC = Path(__file__).with_name("static")
# Trial states of the grid; a cell's state summarises its repetitions.
PASSED, FAILED, UNSCORED, INFRA = "passed", "failed", "unscored", "infra"
TRIAL_FIELDS = [
    "trial_id",
    "task_id",
    "config_id",
    "repetition",
    "outcome",
    "error",
    "iterations",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost_usd",
    "cost_unknown_reason",
    "duration_seconds",
    "agent_seconds",
    "grading_seconds",
    "model",
    "evidence_dir",
]
DETAILS_CAP = 20_000  # characters of one score's details


def _records(frame: pd.DataFrame | None) -> list[dict[str, Any]]:
    """JSON-ready rows (NaN -> null, numpy -> plain, timestamps -> ISO text)."""
    if frame is None or frame.empty:
        return []
    return json.loads(frame.to_json(orient="records", date_format="iso", default_handler=str))


def _float(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def trial_state(outcome: str | None, passed: Any, primary_status: str | None) -> str:
    """passed | failed | unscored | infra for one trial (the grid's colours)."""
    if outcome in INFRA_OUTCOMES or outcome == OUTCOME_CANCELLED:
        return INFRA
    if primary_status in (SCORE_INCONCLUSIVE, SCORE_ERROR):
        return INFRA  # a grader fault is never the agent's failure
    if outcome == OUTCOME_NOT_APPLICABLE or passed is None or pd.isna(passed):
        return UNSCORED
    return PASSED if bool(passed) else FAILED


def _column(frame: pd.DataFrame, name: str) -> list[Any]:
    """A column's values as a plain list (None-filled when the frame lacks it)."""
    return frame[name].tolist() if name in frame.columns else [None] * len(frame)


def _missing(value: Any) -> bool:
    return value is None or bool(pd.isna(value))


def _trials(trials: pd.DataFrame, scores: pd.DataFrame) -> dict[str, dict[str, Any]]:
    # Column lists and dicts, not a pandas lookup per trial: a `.loc` per row cost ~0.5 ms a
    # trial, the page's largest per-case cost on a text suite.
    per_trial = trial_overall(trials, scores)
    overall_of = {
        tid: (passed, status, overall)
        for tid, passed, status, overall in zip(
            per_trial["trial_id"].tolist(),
            _column(per_trial, "passed"),
            _column(per_trial, "primary_status"),
            _column(per_trial, "overall"),
            strict=True,
        )
    }
    latest = latest_trials(trials)
    by_trial: dict[str, list[dict[str, Any]]] = {}
    if not scores.empty:
        latest_rows = latest_scores(scores)
        # details_json, reason and cost_usd are optional in hand-built tables
        for tid, scorer, status, value, reason, cost, text in zip(
            latest_rows["trial_id"].tolist(),
            latest_rows["scorer"].tolist(),
            latest_rows["status"].tolist(),
            latest_rows["value"].tolist(),
            _column(latest_rows, "reason"),
            _column(latest_rows, "cost_usd"),
            _column(latest_rows, "details_json"),
            strict=True,
        ):
            details: Any = None
            if isinstance(text, str):
                details = (
                    json.loads(text)
                    if len(text) <= DETAILS_CAP
                    else {"cut": f"{len(text)} chars", "text": text[:DETAILS_CAP]}
                )
            by_trial.setdefault(tid, []).append(
                {
                    "scorer": scorer,
                    "status": status,
                    "value": _float(value),
                    "reason": reason if isinstance(reason, str) else None,
                    "cost_usd": _float(cost),
                    "details": details,
                }
            )
    out: dict[str, dict[str, Any]] = {}
    fields = [c for c in TRIAL_FIELDS if c in latest.columns]
    for row in _records(latest[fields]):
        tid = row["trial_id"]
        passed, status, overall = overall_of.get(tid, (None, None, None))
        row["overall"] = None if _missing(overall) else float(overall)
        row["primary_status"] = None if _missing(status) else str(status)
        row["state"] = trial_state(row.get("outcome"), passed, row["primary_status"])
        row["scores"] = by_trial.get(tid, [])
        out[tid] = row
    return out


def _axes(config_table: pd.DataFrame) -> list[dict[str, str]]:
    names = ["overall"]
    names += [c for c in config_table.columns if c.startswith("score_")]
    names += ["pass_rate", "avg_cost_usd", "avg_duration_seconds"]
    return [{"column": n, "label": axis_label(n)} for n in names if n in config_table.columns]


def _frontiers(config_table: pd.DataFrame, axes: list[dict[str, str]]) -> dict[str, list]:
    """`x|y` -> the frontier rows for that axis pair, by the same function as everywhere."""
    out: dict[str, list] = {}
    cols = [a["column"] for a in axes]
    for x, y in product(cols, cols):
        if x == y or config_table.empty:
            continue
        out[f"{x}|{y}"] = frontier_records(config_table, x=x, y=y)
    return out


def _embed(data: Any) -> str:
    """JSON inside <script>: no "</" can close the element and no "://" forms a URL; NaN and
    infinities (which JSON cannot hold) become null."""
    try:  # the usual case: the tables came through `_records`, which already wrote null
        text = json.dumps(data, default=str, allow_nan=False)
    except ValueError:  # a NaN somewhere else: walk the whole page's data only then
        text = json.dumps(_sanitize(data), default=str, allow_nan=False)
    return text.replace("</", "<\\/").replace("://", ":\\/\\/").replace("<!--", "<\\!--")


def _sanitize(value: Any) -> Any:
    """NaN/inf (which JSON cannot hold) -> null, recursively."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, dict):
        return {k: _sanitize(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_sanitize(v) for v in value]
    return value


def render_report_html(
    run_meta: Mapping[str, Any],
    tables: Mapping[str, pd.DataFrame],
    recommendations: Mapping[str, Any],
    trials: pd.DataFrame,
    scores: pd.DataFrame,
    evidence: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    tasks: Mapping[str, Mapping[str, Any]] | None = None,
    baseline_config: str | None = None,
    caps: Mapping[str, int] | None = None,
) -> str:
    """The explorer page (see module doc)."""
    config_table = tables["config_table"]
    axes = _axes(config_table)
    data = {
        "meta": dict(run_meta),
        "baseline_config": baseline_config,
        "recommendations": dict(recommendations),
        "config_table": _records(config_table),
        "by_tag": _records(tables.get("config_table_by_tag")),
        "recommendations_by_tag": _records(tables.get("recommendations_by_tag")),
        "grid": _records(tables.get("task_grid")),
        "paired": _records(tables.get("paired_comparison")),
        "regressions": _records(tables.get("regressions")),
        "scenario_turns": _records(tables.get("scenario_turns")),
        "axes": axes,
        "frontiers": _frontiers(config_table, axes),
        "tasks": {k: dict(v) for k, v in (tasks or {}).items()},
        "trials": _trials(trials, scores) if not trials.empty else {},
        "evidence": {k: dict(v) for k, v in (evidence or {}).items()},
        "caps": dict(caps or {}),
    }
    title = f"bench_pipeline — {run_meta.get('suite', '')} {run_meta.get('run_id', '')}".strip()
    css = (STATIC / "explorer.css").read_text(encoding="utf-8")
    js = (STATIC / "explorer.js").read_text(encoding="utf-8")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        # No request of any kind, even if a value ever slipped through as markup.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n"
        f"<title>{html.escape(title)}</title>\n<style>{css}</style></head>\n"
        f'<body><div id="app"><h1>{html.escape(title)}</h1><p>Loading…</p></div>\n'
        f'<script type="application/json" id="bench-data">{_embed(data)}</script>\n'
        f"<script>{js}</script>\n</body></html>\n"
    )
