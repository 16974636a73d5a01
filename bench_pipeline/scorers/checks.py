"""`checks`: 1 when every deterministic check of the final attempt passed.

Precedence when the checks disagree - **a failed check wins over an inconclusive one**:

- all passed                      -> scored 1
- any failed (exit 1)             -> scored 0, even if another check was inconclusive
- none failed, any inconclusive   -> inconclusive (not scored), reason names the checks

Why failed wins: the score is a conjunction ("every check passed"). A check that exited 1 is
its own grader's verdict that the behaviour is absent; whatever the broken grader next to it
would have said, the conjunction is already false. Letting an inconclusive check hide that 0
would also bias results upward: a configuration whose changes break a grader would have its
failures dropped from the mean. The inconclusive checks are still listed in `details` and in
the reason, so an operator sees the grader fault.

A check of the task with no recorded result, or with an unknown status, counts as
inconclusive. A task with no checks (text tasks included) is `not_scored`; a succeeded trial of a
task with checks but no recorded results at all is `missing`.
"""

from __future__ import annotations

from typing import Any

from bench_pipeline.formats.vocabulary import SCORE_INCONCLUSIVE, SCORE_MISSING, SCORE_NOT_SCORED
from bench_pipeline.scorers.base import Scorer, ScoreResult, TrialEvidence, register_scorer
from bench_pipeline.scorers.outcome import outcome_gate

PASSED, FAILED, INCONCLUSIVE = "passed", "failed", "inconclusive"


def summarize_checks(
    results: list[dict[str, Any]], expected_ids: list[str] | tuple[str, ...] = ()
) -> dict[str, list[str]]:
    """Group check ids by status; expected checks without a result count as inconclusive."""
    groups: dict[str, list[str]] = {PASSED: [], FAILED: [], INCONCLUSIVE: []}
    seen: set[str] = set()
    for i, check in enumerate(results):
        cid = str(check.get("id") or f"#{i + 1}")
        seen.add(cid)
        status = check.get("status")
        groups[status if status in (PASSED, FAILED) else INCONCLUSIVE].append(cid)
    groups[INCONCLUSIVE].extend(cid for cid in expected_ids if cid not in seen)
    return groups


def _describe(check_ids: list[str], results: list[dict[str, Any]]) -> str:
    by_id = {str(c.get("id")): c for c in results}
    parts = []
    for cid in check_ids:
        check = by_id.get(cid)
        if check is None:
            parts.append(f"{cid} (no result recorded)")
            continue
        desc = check.get("description")
        code = check.get("exit_code")
        # the runner records why (timeout, cannot start, undeclared code); older evidence may not
        extra = check.get("reason") or (
            f"exit {code}" if code is not None else "no exit code (timed out or not started)"
        )
        if check.get("status") not in (PASSED, FAILED, INCONCLUSIVE):
            extra = f"unknown status {check.get('status')!r}"
        parts.append(f"{cid}{f' - {desc}' if desc else ''} ({extra})")
    return "; ".join(parts)


@register_scorer
class ChecksScorer(Scorer):
    name = "checks"

    def score(self, trial: TrialEvidence) -> list[ScoreResult]:
        expected = [c.id for c in trial.task.checks]
        if not expected and not trial.checks:
            why = "text task: no checks to run" if trial.task.is_text else "task defines no checks"
            return [ScoreResult(self.name, SCORE_NOT_SCORED, reason=why)]
        gate = outcome_gate(trial)
        if gate is not None:
            return [gate.result(self.name)]
        if not trial.checks:
            return [
                ScoreResult(
                    self.name, SCORE_MISSING, reason="no check results recorded for the trial"
                )
            ]
        groups = summarize_checks(trial.checks, expected)
        details = {
            "checks": [
                {k: c.get(k) for k in ("id", "description", "status", "exit_code", "reason")}
                for c in trial.checks
            ],
            **{f"{status}_ids": ids for status, ids in groups.items()},
        }
        total = sum(len(ids) for ids in groups.values())
        if groups[FAILED]:
            reason = f"{len(groups[FAILED])}/{total} checks failed: " + _describe(
                groups[FAILED], trial.checks
            )
            if groups[INCONCLUSIVE]:
                reason += "; also inconclusive: " + _describe(groups[INCONCLUSIVE], trial.checks)
            return [ScoreResult.scored(self.name, 0.0, reason=reason, details=details)]
        if groups[INCONCLUSIVE]:
            reason = "inconclusive (grader fault, not the agent's): " + _describe(
                groups[INCONCLUSIVE], trial.checks
            )
            return [ScoreResult(self.name, SCORE_INCONCLUSIVE, reason=reason, details=details)]
        return [
            ScoreResult.scored(self.name, 1.0, reason=f"all {total} checks passed", details=details)
        ]
