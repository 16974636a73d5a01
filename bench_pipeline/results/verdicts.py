"""The guards of a run's results as plain verdicts: Dagster shows them as asset checks, and
`bench results --json` carries the same verdicts, computed by these functions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # types only: the asset checks' names load with the definitions
    import pandas as pd

from bench_pipeline.formats.vocabulary import OUTCOME_INVALIDATED


@dataclass(frozen=True)
class Verdict:
    name: str
    passed: bool
    blocking: bool  # False: a warning (the results stand, with a caveat)
    description: str
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "check": self.name,
            "passed": self.passed,
            "severity": "error" if self.blocking else "warning",
            "description": self.description,
            **self.details,
        }


GRADER_INTEGRITY = "grader_integrity"
COST_COVERAGE = "cost_coverage"
REGRESSION_TOLERANCE = "regression_tolerance"
DESCRIPTIONS = {
    GRADER_INTEGRITY: "No trial was invalidated by a changed grader file.",
    COST_COVERAGE: "Every trial's cost is known.",
    REGRESSION_TOLERANCE: "No configuration regressed beyond the suite's tolerance.",
}


def grader_integrity(trials: pd.DataFrame) -> Verdict:
    invalid = trials[trials["outcome"] == OUTCOME_INVALIDATED] if not trials.empty else trials
    ids = list(invalid["trial_id"].head(20)) if not invalid.empty else []
    return Verdict(
        GRADER_INTEGRITY,
        invalid.empty,
        True,
        DESCRIPTIONS[GRADER_INTEGRITY],
        {"invalidated_trials": len(invalid), "trials": ", ".join(map(str, ids))},
    )


def cost_coverage(config_table: pd.DataFrame) -> Verdict:
    if "cost_coverage" in config_table:
        partial = config_table[config_table["cost_coverage"] < 1]
    else:
        partial = config_table.iloc[:0]
    return Verdict(
        COST_COVERAGE,
        partial.empty,
        False,
        DESCRIPTIONS[COST_COVERAGE],
        {"configs_with_unknown_cost": ", ".join(map(str, partial["config_id"])) or "none"},
    )


def regressed_rows(regressions: pd.DataFrame) -> pd.DataFrame:
    if regressions.empty:
        return regressions
    return regressions[regressions["regressed"].fillna(False).astype(bool)]


def regression_tolerance(regressions: pd.DataFrame, baseline_run_id: str | None) -> Verdict:
    regressed = regressed_rows(regressions)
    return Verdict(
        REGRESSION_TOLERANCE,
        regressed.empty,
        True,
        DESCRIPTIONS[REGRESSION_TOLERANCE],
        {"baseline_run_id": baseline_run_id or "none", "regressions": len(regressed)},
    )
