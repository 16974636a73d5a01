"""`ci`: 1 when every CI check suite of the trial's pushed commit passed.

The trial's final state was committed and pushed to `bench/<run>/<trial>` of the launch's
`ci.remote` (`bench_pipeline.ci.push`); CI runs there and a Dagster sensor polls the GitHub
checks API (`bench_pipeline.ci.status`), appending the score when it is known. At scoring time:

- text task                        -> not_scored (no commit to run CI on)
- failed trial                     -> 0 (the outcome gate, like every scorer)
- infrastructure outcome           -> not_scored (the outcome gate)
- no push (push failed, no `ci:`)  -> not_scored, with the push error when there was one
- result already known (`ci.json`) -> 1 / 0
- otherwise                        -> missing "CI pending" (past `ci.timeout_seconds`: says so)

`missing` is regraded by rescoring, so a rescore after the sensor saw the result records it.
"""

from __future__ import annotations

from bench_pipeline.ci.github import FAILURE, SUCCESS
from bench_pipeline.ci.status import (
    CI_SCORER,
    final_result,
    pending_result,
    push_info,
    read_result,
)
from bench_pipeline.scorers.base import (
    SCORE_NOT_SCORED,
    Scorer,
    ScoreResult,
    TrialEvidence,
    register_scorer,
)
from bench_pipeline.scorers.outcome import outcome_gate


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
