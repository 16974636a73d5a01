"""Grade finished trials with a launch's scorers, from their evidence (never rerunning agents).

Used by the Dagster score partitions, by `bench run` and by `bench rescore`. Rescoring is the
same function with `only_unscored=True` (the default): cells whose latest score is missing or
an error are graded again, everything else is left as it is, and every new row records which
rescore produced it.
"""

from __future__ import annotations

import json
import math
import os
import traceback
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench_pipeline import scorers as _registered  # noqa: F401  (registers every scorer kind)
from bench_pipeline.formats.model import Judge
from bench_pipeline.formats.vocabulary import SCORE_ERROR, SCORE_MISSING
from bench_pipeline.runs.benchmark_run import BenchmarkRun
from bench_pipeline.runs.paths import BenchPaths
from bench_pipeline.scorers.base import (
    Scorer,
    ScorerContext,
    ScoreResult,
    TrialEvidence,
    make_scorer,
)
from bench_pipeline.warehouse import layout

if TYPE_CHECKING:  # pandas and the results load when a partition is graded, not at import
    import pandas as pd

INITIAL = "initial"
REGRADE_STATUSES = frozenset({SCORE_ERROR, SCORE_MISSING})


def scorer_context(
    run: BenchmarkRun, judge: Judge | None = None, environ: dict[str, str] | None = None
) -> ScorerContext:
    return ScorerContext(
        judge=judge if judge is not None else run.launch.judge,
        prices=run.prices,
        factory_root=run.launch.factory_root,
        config_models=tuple(c.agent.model for c in run.launch.configs if c.agent.model),
        environ=dict(environ if environ is not None else os.environ),
    )


def load_evidence(run: BenchmarkRun, trial: dict[str, Any]) -> TrialEvidence:
    """A trial's evidence as scorers see it: its row, and its evidence folder's files read
    as a scorer asks for them."""
    cost = trial.get("cost_usd")
    return TrialEvidence(
        run_id=trial["run_id"],
        trial_id=trial["trial_id"],
        task=run.taskset.task(trial["task_id"]),
        config=run.config(trial["config_id"]),
        repetition=int(trial["repetition"]),
        outcome=trial["outcome"],
        error=trial.get("error"),
        evidence_dir=Path(trial["evidence_dir"]),
        iterations=int(trial.get("iterations") or 0),
        cost_usd=_known(cost),
        duration_seconds=trial.get("duration_seconds"),
        from_files=True,
    )


def _known(value: Any) -> float | None:
    """A float cell of a frame row: None when missing (NaN, None, pd.NA)."""
    if value is None:
        return None
    try:
        number = float(value)
    except TypeError:  # pd.NA refuses float()
        return None
    return None if math.isnan(number) else number


def expected_scorer_names(spec: str, judge: Judge | None) -> list[str]:
    """The score rows one scorer entry produces: llm_judge with criteria gives one per criterion."""
    if spec == "llm_judge" and judge is not None and judge.criteria:
        return [f"llm_judge:{c.id}" for c in judge.criteria]
    return [spec]


def score_trials(
    run: BenchmarkRun,
    trials: pd.DataFrame,
    scorer_specs: Sequence[str] | None = None,
    *,
    existing: pd.DataFrame | None = None,
    only_unscored: bool = True,
    rescore_id: str = INITIAL,
    judge: Judge | None = None,
    environ: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """SCORES rows for `trials`. With `existing` scores and `only_unscored`, cells whose latest
    row is already final are skipped."""
    specs = list(scorer_specs or run.launch.scorers)
    context = scorer_context(run, judge, environ)
    scorers = [(spec, make_scorer(spec, context)) for spec in specs]
    latest = _latest_status(existing) if existing is not None and only_unscored else {}
    rows: list[dict[str, Any]] = []
    for trial in trials.to_dict("records"):
        evidence: TrialEvidence | None = None
        for spec, scorer in scorers:
            names = expected_scorer_names(spec, context.judge)
            if latest and all(
                latest.get((trial["trial_id"], n)) not in (None, *REGRADE_STATUSES) for n in names
            ):
                continue
            evidence = evidence or load_evidence(run, trial)
            for result in _safe_score(scorer, spec, evidence):
                rows.append(score_row(trial, result, rescore_id))
    return rows


def _safe_score(scorer: Scorer, spec: str, evidence: TrialEvidence) -> list[ScoreResult]:
    """A scorer that crashes records an error with its reason; the run goes on."""
    try:
        return scorer.score(evidence)
    except Exception as exc:
        reason = f"scorer crashed: {type(exc).__name__}: {exc}"
        (evidence.evidence_dir / f"scorer-{spec.replace(':', '_')}-error.txt").write_text(
            traceback.format_exc()
        )
        return [ScoreResult(spec, SCORE_ERROR, reason=reason)]


def score_row(trial: dict[str, Any], result: ScoreResult, rescore_id: str) -> dict[str, Any]:
    group = result.group or (
        "llm_judge" if result.scorer.startswith("llm_judge:") else result.scorer
    )
    return {
        "run_id": trial["run_id"],
        "trial_id": trial["trial_id"],
        "task_id": trial["task_id"],
        "config_id": trial["config_id"],
        "repetition": int(trial["repetition"]),
        "scorer": result.scorer,
        "scorer_group": group,
        "weight": result.weight,
        "status": result.status,
        "value": result.value,
        "raw_value": result.raw_value,
        "scale_max": result.scale_max,
        "reason": result.reason,
        "cost_usd": result.cost_usd,
        "details_json": json.dumps(result.details, default=str) if result.details else None,
        "rescore_id": rescore_id,
        "scored_at": datetime.now(UTC),
    }


def _latest_status(scores: pd.DataFrame) -> dict[tuple[str, str], str]:
    if scores.empty:
        return {}
    ordered = scores.sort_values("scored_at")
    last = ordered.drop_duplicates(["trial_id", "scorer"], keep="last")
    return {(r.trial_id, r.scorer): r.status for r in last.itertuples()}


def preflight_scorers(run: BenchmarkRun, specs: Iterable[str], environ: dict[str, str]) -> None:
    context = scorer_context(run, environ=environ)
    for spec in specs:
        make_scorer(spec, context).preflight()


def score_partition(
    run: BenchmarkRun,
    config_id: str,
    rep: int,
    paths: BenchPaths,
    *,
    scorer_specs: list[str] | None = None,
    rescore_id: str = INITIAL,
    only_unscored: bool = True,
    judge: Judge | None = None,
    environ: dict[str, str] | None = None,
    trials: pd.DataFrame | None = None,
) -> list[dict[str, Any]]:
    """Grade the partition's trials; rows are added to the `<rescore_id>` file, never replaced.
    `judge` replaces the run's judge (criteria merged by a rescore). `trials`: the partition's
    trial rows when the caller has just read them (each read opens a file per trial)."""
    import pandas as pd

    from bench_pipeline.results.scores import latest_trials

    warehouse = paths.warehouse
    if trials is None:
        trials = warehouse.read("trials", run.run_id, under=layout.partition_dir(config_id, rep))
    if trials.empty:
        return []
    trials = latest_trials(trials)
    existing = warehouse.read("scores", run.run_id, under=layout.partition_dir(config_id, rep))
    rows = score_trials(
        run,
        trials,
        scorer_specs,
        existing=existing,
        only_unscored=only_unscored,
        rescore_id=rescore_id,
        judge=judge if judge is not None else run.launch.judge,
        environ=environ,
    )
    if rows:
        part = layout.score_part(config_id, rep, rescore_id)
        same_file = (
            existing[existing["rescore_id"] == rescore_id] if not existing.empty else existing
        )
        merged = (
            pd.concat([same_file, pd.DataFrame(rows)], ignore_index=True)
            if not same_file.empty
            else rows
        )
        warehouse.write("scores", merged, run.run_id, part)
    return rows
