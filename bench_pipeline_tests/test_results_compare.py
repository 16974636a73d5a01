"""Paired comparison and sign test on a hand-worked example (primary scorer: checks).

Two configs of one run, 2 repetitions per task:
- tasks t01..t09: candidate passes both reps, baseline fails both   -> 9 task wins
- task t10: candidate fails both (rep 1 an agent error), baseline passes both -> 1 loss
- task t11: rep 1 candidate outcome invalidated (infrastructure), rep 2 both pass -> tie
- task t12 (holdout): both pass both reps                            -> reported apart
- task t13: rep 1 baseline checks inconclusive (infrastructure), rep 2 neither -> tie
cost: candidate 0.50, baseline 0.20 per trial; duration candidate 30 s, baseline 10 s.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest
from scipy import stats

from bench_pipeline.results import compare_all, paired_comparison, paired_trials, sign_test_p


def make_pairs_run() -> tuple[pd.DataFrame, pd.DataFrame]:
    plan = {}  # (task, rep) -> (cand pass, base pass, cand outcome, base status)
    for i in range(1, 10):
        for rep in (1, 2):
            plan[(f"t{i:02d}", rep)] = (1, 0, "succeeded", "scored")
    plan[("t10", 1)] = (0, 1, "agent_error", "scored")
    plan[("t10", 2)] = (0, 1, "succeeded", "scored")
    plan[("t11", 1)] = (1, 1, "invalidated", "scored")
    plan[("t11", 2)] = (1, 1, "succeeded", "scored")
    plan[("t12", 1)] = (1, 1, "succeeded", "scored")
    plan[("t12", 2)] = (1, 1, "succeeded", "scored")
    plan[("t13", 1)] = (0, 0, "succeeded", "inconclusive")
    plan[("t13", 2)] = (0, 0, "succeeded", "scored")
    trials, scores = [], []
    for (task, rep), (cp, bp, c_out, b_status) in plan.items():
        for cfg, passed, outcome, status, cost, dur in (
            ("cand", cp, c_out, "scored", 0.50, 30.0),
            ("base", bp, "succeeded", b_status, 0.20, 10.0),
        ):
            tid = f"{task}/{cfg}/{rep}"
            trials.append(
                {
                    "run_id": "r1",
                    "trial_id": tid,
                    "task_id": task,
                    "config_id": cfg,
                    "repetition": rep,
                    "tags": [],
                    "holdout": task == "t12",
                    "is_baseline": cfg == "base",
                    "outcome": outcome,
                    "cost_usd": cost,
                    "duration_seconds": dur,
                }
            )
            scores.append(
                {
                    "run_id": "r1",
                    "trial_id": tid,
                    "task_id": task,
                    "config_id": cfg,
                    "repetition": rep,
                    "scorer": "checks",
                    "scorer_group": "checks",
                    "weight": 1.0,
                    "status": status,
                    "value": float(passed) if status == "scored" else None,
                    "cost_usd": None,
                    "scored_at": pd.Timestamp("2025-01-01", tz="UTC"),
                }
            )
    return pd.DataFrame(trials), pd.DataFrame(scores)


def test_sign_test_by_hand():
    # 9 wins, 1 loss: P(X <= 1) = (C(10,0) + C(10,1)) / 2^10 = 11/1024; two-sided x2
    assert sign_test_p(9, 1) == pytest.approx(2 * 11 / 1024)
    assert round(sign_test_p(9, 1), 4) == 0.0215
    assert sign_test_p(1, 9) == sign_test_p(9, 1)
    assert sign_test_p(0, 0) == 1.0
    assert sign_test_p(3, 3) == 1.0  # capped at 1
    assert sign_test_p(5, 0) == pytest.approx(2 / 32)


@pytest.mark.parametrize(
    ("wins", "losses"),
    [(9, 1), (0, 40), (600, 650), (1000, 1000), (1211, 1289), (11_900, 12_300), (3, 24_997)],
)
def test_sign_test_over_many_tasks_matches_the_exact_sum(wins: int, losses: int) -> None:
    # A run of tens of thousands of tasks: the exact tail (big-integer binomial sums, as
    # the definition reads) and SciPy's binomtest agree with it.
    n = wins + losses
    if n <= 2500:  # (beyond that the exact sum takes seconds: SciPy alone)
        exact = min(1.0, 2 * sum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / 2**n)
        assert sign_test_p(wins, losses) == pytest.approx(exact, rel=1e-9, abs=1e-300)
    assert sign_test_p(wins, losses) == pytest.approx(
        stats.binomtest(wins, n, 0.5).pvalue, rel=1e-9, abs=1e-300
    )


def test_paired_comparison_counts():
    trials, scores = make_pairs_run()
    r = paired_comparison(trials, scores, "cand", "base")
    assert r["pairs_matched"] == 26
    assert r["infra_excluded"] == 2  # t11 rep 1 (invalidated), t13 rep 1 (inconclusive)
    assert r["holdout_pairs"] == 2 and r["holdout_both_pass"] == 2
    assert r["pairs"] == 22
    assert (r["both_pass"], r["candidate_only"], r["baseline_only"], r["neither"]) == (1, 18, 2, 1)
    # repetitions of a task count once: 9 wins (t01..t09), 1 loss (t10), ties t11, t13
    assert (r["sign_wins"], r["sign_losses"], r["sign_ties"]) == (9, 1, 2)
    assert round(r["sign_test_p"], 4) == 0.0215
    assert r["tasks"] == 12
    assert r["candidate_tasks_all_pass"] == 10  # t01..t09, t11 (its one counted rep)
    assert r["baseline_tasks_all_pass"] == 2  # t10, t11
    # deltas over counted pairs where both succeeded and both costs known: t10 rep 1 is out
    assert r["cost_pairs"] == 21
    assert r["cost_delta_mean_usd"] == pytest.approx(0.30)
    assert r["duration_delta_mean_seconds"] == pytest.approx(20.0)
    # cost per accepted result counts failed trials' spend: 22 trials per side
    assert r["candidate_spend_usd"] == pytest.approx(22 * 0.50)
    assert r["candidate_cost_per_accepted_usd"] == pytest.approx(22 * 0.50 / 19)
    assert r["baseline_cost_per_accepted_usd"] == pytest.approx(22 * 0.20 / 3)


def test_unknown_spend_gives_null_cost_per_accepted():
    trials, scores = make_pairs_run()
    trials.loc[trials["trial_id"] == "t10/cand/1", "cost_usd"] = None
    r = paired_comparison(trials, scores, "cand", "base")
    assert r["candidate_cost_per_accepted_usd"] is None
    assert r["baseline_cost_per_accepted_usd"] == pytest.approx(22 * 0.20 / 3)


def test_paired_trials_rows_and_compare_all():
    trials, scores = make_pairs_run()
    pairs = paired_trials(trials, scores, "cand", "base")
    assert len(pairs) == 26
    row = pairs[(pairs["task_id"] == "t11") & (pairs["repetition"] == 1)].iloc[0]
    assert row["excluded"] == "infrastructure"
    assert row["candidate_trial_id"] == "t11/cand/1"
    all_rows = compare_all(trials, scores)  # baseline = the is_baseline config
    assert list(all_rows["candidate_config"]) == ["cand"]
    assert all_rows.loc[0, "baseline_config"] == "base"


def test_cross_run_baseline():
    trials, scores = make_pairs_run()
    old_t, old_s = trials.copy(), scores.copy()
    old_t["run_id"], old_s["run_id"] = "r0", "r0"
    both_t = pd.concat([trials, old_t], ignore_index=True)
    both_s = pd.concat([scores, old_s], ignore_index=True)
    r = paired_comparison(
        both_t, both_s, "cand", "cand", candidate_run_id="r1", baseline_run_id="r0"
    )
    assert r["pairs_matched"] == 26 and r["sign_wins"] == 0 and r["sign_test_p"] == 1.0
    assert r["infra_excluded"] == 1  # t11 rep 1 invalidated on both sides: one pair
    with pytest.raises(ValueError):
        paired_comparison(both_t, both_s, "cand", "base")  # ambiguous run
    assert not math.isnan(r["cost_delta_mean_usd"]) and r["cost_delta_mean_usd"] == 0.0
