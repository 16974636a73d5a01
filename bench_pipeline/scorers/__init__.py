"""Scorers: importing this package registers every built-in kind with `make_scorer`."""

from bench_pipeline.scorers import (  # noqa: F401  (register)
    asserts,
    checks,
    ci,  # noqa: F401  (register)
    judge,
    tests,
    workflow,
)
from bench_pipeline.scorers.asserts import turn_pass_hat_n, turn_rows
from bench_pipeline.scorers.base import (
    SCORER_KINDS,
    Scorer,
    ScorerContext,
    ScoreResult,
    TrialEvidence,
    make_scorer,
    register_scorer,
)
from bench_pipeline.scorers.outcome import OutcomeGate, outcome_gate

__all__ = [
    "SCORER_KINDS",
    "OutcomeGate",
    "ScoreResult",
    "Scorer",
    "ScorerContext",
    "TrialEvidence",
    "make_scorer",
    "outcome_gate",
    "register_scorer",
    "turn_pass_hat_n",
    "turn_rows",
]
