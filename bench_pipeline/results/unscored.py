"""What fills the gap between a config table's `scored_<name>` and `of_<name>`: the cells a run
left unscored, and why.

`unscored_cells(scores) -> DataFrame`: of the latest score row per (trial, scorer), those whose
status is not `scored` (a grader fault, a judge that abstained, a scorer that cannot apply, a
trial that did not run), grouped by `config_id`, `scorer`, `status` and `reason`, with
`trials` (how many) and `example_trial_id` (the first by trial id). Ordered by config and
scorer, then most trials first. None of them is counted against the agent; the config table
only counts them, and this says what they are.
"""

from __future__ import annotations

import pandas as pd

from bench_pipeline.formats.vocabulary import SCORE_SCORED

from .scores import latest_scores

COLUMNS = ["config_id", "scorer", "status", "reason", "trials", "example_trial_id"]


def unscored_cells(scores: pd.DataFrame) -> pd.DataFrame:
    """`scores`: score rows with `run_id`, `trial_id`, `config_id`, `scorer`, `status`,
    `reason` and `scored_at` (more rows than the latest are fine: a cell counts by its latest
    row, so a rescore that scored it takes it out)."""
    if scores.empty:
        return pd.DataFrame(columns=COLUMNS)
    latest = latest_scores(scores)
    gap = latest[latest["status"].astype(object) != SCORE_SCORED]
    if gap.empty:
        return pd.DataFrame(columns=COLUMNS)
    keyed = pd.DataFrame(
        {
            "config_id": gap["config_id"].astype(str).to_numpy(),
            "scorer": gap["scorer"].astype(str).to_numpy(),
            "status": gap["status"].astype(object).fillna("(none)").astype(str).to_numpy(),
            # (a row without a reason still counts, under an empty one)
            "reason": gap["reason"].astype(object).fillna("").astype(str).to_numpy(),
            "trial_id": gap["trial_id"].astype(str).to_numpy(),
        }
    )
    grouped = (
        keyed.groupby(["config_id", "scorer", "status", "reason"], sort=False)["trial_id"]
        .agg(trials="size", example_trial_id="min")
        .reset_index()
    )
    grouped = grouped.sort_values(
        ["config_id", "scorer", "trials", "status", "reason"],
        ascending=[True, True, False, True, True],
        kind="stable",
    ).reset_index(drop=True)
    grouped["trials"] = grouped["trials"].astype(int)
    return grouped[COLUMNS]
