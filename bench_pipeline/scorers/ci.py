"""`ci`: 1 when every CI check suite of the trial's pushed commit passed.

The trial's final state was committed and pushed to `bench/<run>/<trial>` of the launch's
`ci.remote` (`bench_pipeline.runs.ci_push`); CI runs there and a Dagster sensor polls the GitHub
checks API (`bench_pipeline.ops.ci_poll`), appending the score when it is known. At scoring time:

- text task                        -> not_scored (no commit to run CI on)
- failed trial                     -> 0 (the outcome gate, like every scorer)
- infrastructure outcome           -> not_scored (the outcome gate)
- no push (push failed, no `ci:`)  -> not_scored, with the push error when there was one
- result already known (`ci.json`) -> 1 / 0
- otherwise                        -> missing "CI pending" (past `ci.timeout_seconds`: says so)

`missing` is regraded by rescoring, so a rescore after the sensor saw the result records it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench_pipeline.formats.vocabulary import SCORE_MISSING, SCORE_NOT_SCORED
from bench_pipeline.scorers.base import Scorer, ScoreResult, TrialEvidence, register_scorer
from bench_pipeline.scorers.outcome import outcome_gate

# The verdicts of a commit's CI (the GitHub client in `ops.github` maps check suites onto them).
SUCCESS, FAILURE, PENDING = "success", "failure", "pending"
CI_SCORER = "ci"
CI_RESULT_FILE = "ci.json"  # in the trial's evidence folder, written when a result is final


def push_info(metadata: dict[str, Any]) -> dict[str, Any] | None:
    """The trial's CI push (branch, sha, pushed_at...) from its metadata, or None."""
    info = (metadata.get("finalize") or {}).get("ci")
    return info if isinstance(info, dict) and info.get("sha") else None


def read_result(evidence_dir: Path) -> dict[str, Any] | None:
    path = Path(evidence_dir) / CI_RESULT_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def final_result(push: dict[str, Any], record: dict[str, Any]) -> ScoreResult:
    """The `ci` score of a commit whose check suites concluded."""
    passed = record["verdict"] == SUCCESS
    suites = record.get("suites") or []
    if passed:
        reason = f"every CI check suite passed ({len(suites)}) for {push['sha'][:10]}"
    else:
        bad = [
            f"{s.get('app') or s.get('id')}: {s.get('conclusion')}"
            for s in suites
            if s.get("status") == "completed" and s.get("conclusion") not in (None, "success")
        ]
        reason = f"CI failed for {push['sha'][:10]}: {', '.join(bad) or 'a check suite failed'}"
    return ScoreResult.scored(
        CI_SCORER, 1.0 if passed else 0.0, reason=reason, details=_details(push, record)
    )


def pending_result(push: dict[str, Any], now: datetime | None = None) -> ScoreResult:
    """`missing`: "CI pending", or pending past the timeout."""
    now = now or datetime.now(UTC)
    timeout = float(push.get("timeout_seconds") or 3600.0)
    waited = (now - when(push["pushed_at"])).total_seconds() if push.get("pushed_at") else 0.0
    if waited > timeout:
        reason = (
            f"CI pending past ci.timeout_seconds ({timeout:g}s) for {push['sha'][:10]}; "
            "a late result will still update the score"
        )
    else:
        reason = "CI pending"
    return ScoreResult(
        CI_SCORER, SCORE_MISSING, reason=reason, details=_details(push, None) | {"waited": waited}
    )


def _details(push: dict[str, Any], record: dict[str, Any] | None) -> dict[str, Any]:
    out = {k: push.get(k) for k in ("sha", "branch", "remote", "repo")}
    if record:
        out |= {
            "verdict": record.get("verdict"),
            "suites": record.get("suites"),
            "checked_at": record.get("checked_at"),
        }
    return out


def when(value: str | datetime) -> datetime:
    when = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return when if when.tzinfo else when.replace(tzinfo=UTC)


@register_scorer
class CIScorer(Scorer):
    name = CI_SCORER

    def score(self, trial: TrialEvidence) -> list[ScoreResult]:
        if trial.task.is_text:
            return [
                ScoreResult(CI_SCORER, SCORE_NOT_SCORED, reason="text task: no commit to run CI on")
            ]
        gate = outcome_gate(trial)
        if gate is not None:
            return [gate.result(CI_SCORER)]
        push = push_info(trial.metadata)
        if push is None:
            error = (trial.metadata.get("finalize") or {}).get("error")
            reason = f"not pushed for CI: {error}" if error else "trial was not pushed for CI"
            return [ScoreResult(CI_SCORER, SCORE_NOT_SCORED, reason=reason)]
        record = read_result(trial.evidence_dir)
        if (
            record
            and record.get("sha") == push["sha"]
            and record.get("verdict")
            in (
                SUCCESS,
                FAILURE,
            )
        ):
            return [final_result(push, record)]
        return [pending_result(push)]
