from __future__ import annotations

import pytest

from bench_pipeline.scorers import make_scorer
from bench_pipeline.scorers.base import (
    SCORE_INCONCLUSIVE,
    SCORE_MISSING,
    SCORE_NOT_SCORED,
    SCORE_SCORED,
)
from bench_pipeline.scorers.outcome import outcome_gate
from bench_pipeline_tests.test_scorer_support import code_task, context, text_task, trial


def check(cid: str, status: str, code: int | None) -> dict:
    return {
        "id": cid,
        "description": f"check {cid}",
        "status": status,
        "exit_code": code,
        "output": "",
    }


@pytest.fixture
def scorer(tmp_path):
    return make_scorer("checks", context(tmp_path))


def test_all_checks_pass(scorer, tmp_path):
    t = trial(
        code_task(), tmp_path, checks=[check("AC-1", "passed", 0), check("AC-2", "passed", 0)]
    )
    (r,) = scorer.score(t)
    assert (r.scorer, r.status, r.value, r.raw_value) == ("checks", SCORE_SCORED, 1.0, 1.0)
    assert "2 checks passed" in r.reason
    assert [c["status"] for c in r.details["checks"]] == ["passed", "passed"]


def test_one_failed_check_scores_zero(scorer, tmp_path):
    t = trial(
        code_task(), tmp_path, checks=[check("AC-1", "failed", 1), check("AC-2", "passed", 0)]
    )
    (r,) = scorer.score(t)
    assert (r.status, r.value) == (SCORE_SCORED, 0.0)
    assert "AC-1" in r.reason and r.details["failed_ids"] == ["AC-1"]


def test_inconclusive_check_is_not_scored_and_named(scorer, tmp_path):
    t = trial(
        code_task(),
        tmp_path,
        checks=[check("AC-1", "passed", 0), check("AC-2", "inconclusive", None)],
    )
    (r,) = scorer.score(t)
    assert r.status == SCORE_INCONCLUSIVE and r.value is None
    assert "AC-2" in r.reason


def test_failed_wins_over_inconclusive(scorer, tmp_path):
    t = trial(
        code_task(), tmp_path, checks=[check("AC-1", "failed", 1), check("AC-2", "inconclusive", 3)]
    )
    (r,) = scorer.score(t)
    assert (r.status, r.value) == (SCORE_SCORED, 0.0)
    assert "AC-2" in r.reason and r.details["inconclusive_ids"] == ["AC-2"]


def test_check_without_result_is_inconclusive(scorer, tmp_path):
    (r,) = scorer.score(trial(code_task(), tmp_path, checks=[check("AC-1", "passed", 0)]))
    assert r.status == SCORE_INCONCLUSIVE and "AC-2" in r.reason


def test_no_results_recorded_is_missing(scorer, tmp_path):
    (r,) = scorer.score(trial(code_task(), tmp_path, checks=[]))
    assert r.status == SCORE_MISSING


def test_text_task_not_scored(scorer, tmp_path):
    (r,) = scorer.score(trial(text_task(), tmp_path, answer="hi"))
    assert r.status == SCORE_NOT_SCORED and "text task" in r.reason


@pytest.mark.parametrize("outcome", ["agent_error", "budget_exceeded"])
def test_failed_trial_scores_zero(scorer, tmp_path, outcome):
    t = trial(
        code_task(), tmp_path, outcome=outcome, error="boom", checks=[check("AC-1", "passed", 0)]
    )
    (r,) = scorer.score(t)
    assert (r.status, r.value) == (SCORE_SCORED, 0.0)
    assert r.reason == f"trial failed: {outcome}: boom"


@pytest.mark.parametrize(
    "outcome", ["invalidated", "workspace_error", "cancelled", "not_applicable", "weird"]
)
def test_infrastructure_outcome_not_scored(scorer, tmp_path, outcome):
    t = trial(code_task(), tmp_path, outcome=outcome, checks=[check("AC-1", "passed", 0)])
    (r,) = scorer.score(t)
    assert r.status == SCORE_NOT_SCORED and r.value is None and outcome in r.reason


def test_outcome_gate_helper(tmp_path):
    assert outcome_gate(trial(code_task(), tmp_path)) is None
    failed = outcome_gate(trial(code_task(), tmp_path, outcome="agent_error", error="crash"))
    assert failed.failed and failed.result("x", weight=2.0).value == 0.0
    assert failed.result("x", weight=2.0).weight == 2.0
    infra = outcome_gate(trial(code_task(), tmp_path, outcome="invalidated"))
    res = infra.result("llm_judge:efficiency", group="llm_judge", scale_max=5.0)
    assert (res.status, res.value, res.group) == (SCORE_NOT_SCORED, None, "llm_judge")
    assert res.details["outcome"] == "invalidated"
