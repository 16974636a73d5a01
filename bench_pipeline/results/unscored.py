"""What fills the gap between a config table's `scored_<name>` and `of_<name>`: the cells a run
left unscored, and why.

`unscored_cells(scores) -> DataFrame`: of the latest score row per (trial, scorer), those whose
status is not `scored` (a grader fault, a judge that abstained, a scorer that cannot apply, a
trial that did not run), grouped by `config_id`, `scorer`, `status` and `reason`, with
`trials` (how many) and `example_trial_id` (the first by trial id). Ordered by config and
scorer, then most trials first. None of them is counted against the agent; the config table
only counts them, and this says what they are.

`with_missing(cells, config_table)`: the same, plus per config and scorer the trials with no
score row at all (status `missing`: a run interrupted or still going, a trial cancelled before
it was graded), so that the trials listed are exactly `of_<name> - scored_<name>`.
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


MISSING_REASON = (
    "no score recorded for the trial (the run was interrupted or is still going, or the trial "
    "was cancelled before it was graded)"
)


def with_missing(cells: pd.DataFrame, config_table: pd.DataFrame) -> pd.DataFrame:
    """`cells` plus a `missing` row per (config, scorer) for the trials the config table
    counts in `of_<name>` but neither scored nor listed. A group of criteria (a name that other
    names extend as `name:criterion`) is left to its criteria's own rows."""
    names = [c[len("of_") :] for c in config_table.columns if c.startswith("of_")]
    groups = {n for n in names if any(m.startswith(f"{n}:") for m in names)}
    listed = cells.groupby(["config_id", "scorer"])["trials"].sum().to_dict() if len(cells) else {}
    extra = []
    for _, row in config_table.iterrows():
        config = str(row["config_id"])
        for name in names:
            if name in groups or f"scored_{name}" not in config_table:
                continue
            of, scored = row[f"of_{name}"], row[f"scored_{name}"]
            if pd.isna(of) or pd.isna(scored):
                continue
            gap = int(of) - int(scored) - int(listed.get((config, name), 0))
            if gap > 0:
                extra.append([config, name, "missing", MISSING_REASON, gap, None])
    if not extra:
        return cells
    out = pd.concat([cells, pd.DataFrame(extra, columns=COLUMNS)], ignore_index=True)
    out["trials"] = out["trials"].astype(int)
    order = out.assign(_by=-out["trials"]).sort_values(
        ["config_id", "scorer", "_by", "status"], kind="stable"
    )
    return order.drop(columns="_by").reset_index(drop=True)
