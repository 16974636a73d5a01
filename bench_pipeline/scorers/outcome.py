"""The one rule every scorer applies to a trial's outcome before grading its evidence.

- ``succeeded``: the agent finished within its limits; the scorer grades the evidence.
- failed outcomes (``agent_error``, ``budget_exceeded`` - which covers timeouts and max_turns):
  the trial counts as a failure for every scorer, so the gate scores it 0 with the reason
  ``trial failed: <outcome>: <error>`` (SPEC §3: "A failed trial scores 0"). No judge is called.
- infrastructure and other outcomes (``invalidated``, ``workspace_error``, ``cancelled``,
  ``not_applicable``, or anything unknown): not the agent's doing, so never a 0 - the gate records
  ``not_scored`` with the reason, and results exclude the trial from means.

Scorers call :func:`outcome_gate` first; when it returns a gate they emit ``gate.result(name)``
for each result row they would have produced (one per judge criterion for ``llm_judge``).
Applicability (a text task for a diff scorer, a task without checks) is decided *before* the
gate by each scorer: a scorer that could never apply records ``not_scored`` even for a failed
trial, so a failed text-task trial does not drag down a ``checks`` mean it never belonged to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench_pipeline.formats.vocabulary import FAILED_OUTCOMES, OUTCOME_SUCCEEDED
from bench_pipeline.scorers.base import SCORE_NOT_SCORED, SCORE_SCORED, ScoreResult, TrialEvidence

__all__ = ["OutcomeGate", "outcome_gate"]


@dataclass(frozen=True)
class OutcomeGate:
    """What a scorer records instead of grading, for a trial that did not succeed."""

    outcome: str
    status: str  # scored (value 0) or not_scored
    reason: str

    @property
    def failed(self) -> bool:
        return self.status == SCORE_SCORED

    def result(self, scorer: str, **kw: Any) -> ScoreResult:
        details = {"outcome": self.outcome, **kw.pop("details", {})}
        if self.failed:
            return ScoreResult.scored(scorer, 0.0, reason=self.reason, details=details, **kw)
        kw.pop("scale_max", None)
        return ScoreResult(scorer, self.status, None, reason=self.reason, details=details, **kw)


def outcome_gate(trial: TrialEvidence) -> OutcomeGate | None:
    """None when the trial succeeded (grade it); else the gate to record for every row."""
    outcome = trial.outcome
    if outcome == OUTCOME_SUCCEEDED:
        return None
    error = f": {trial.error}" if trial.error else ""
    if outcome in FAILED_OUTCOMES:
        return OutcomeGate(outcome, SCORE_SCORED, f"trial failed: {outcome}{error}")
    return OutcomeGate(
        outcome,
        SCORE_NOT_SCORED,
        f"trial not scored: outcome {outcome}{error} (infrastructure, not the agent's result)",
    )
