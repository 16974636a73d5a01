from __future__ import annotations

import pytest

from bench_pipeline.formats.errors import BenchInputError
from bench_pipeline.formats.model import Assertion, Turn
from bench_pipeline.scorers import make_scorer, turn_pass_hat_n, turn_rows
from bench_pipeline.scorers.asserts import (
    evaluate_assertion,
    find_links,
    find_urls,
    is_valid_http_url,
    validate_assertion,
)
from bench_pipeline.scorers.base import (
    SCORE_ERROR,
    SCORE_INCONCLUSIVE,
    SCORE_NOT_SCORED,
    SCORE_SCORED,
)
from bench_pipeline_tests.test_scorer_support import code_task, context, text_task, trial

ANSWER = (
    "To void an invoice open [the invoice list](https://app.example.com/invoices) and press Void.\n"
    'See <a href="https://docs.example.com/void">the docs</a> or https://status.example.com.'
)
TURN = {
    "user": "How do I void?",
    "response": ANSWER,
    "latency_ms": 1200,
    "completion_tokens": 80,
    "cost_usd": 0.002,
}

# (type, passing value, failing value)
CASES = [
    ("contains", ["Void", "docs"], "Delete"),
    ("not_contains", "I cannot help", "Void"),
    ("regex", r"press\s+Void", r"^Sorry"),
    ("min_links", 2, 3),
    ("min_urls", 3, 4),
    ("min_chars", 50, 5000),
    ("max_elapsed_ms", 1500, 1000),
    ("max_completion_tokens", 100, 50),
    ("max_cost_usd", 0.01, 0.001),
]


@pytest.mark.parametrize("kind,good,bad", CASES)
def test_assert_type_pass_and_fail(kind, good, bad):
    assert evaluate_assertion(Assertion(kind, good), TURN)["status"] == "passed"
    failing = evaluate_assertion(Assertion(kind, bad), TURN)
    assert failing["status"] == "failed" and failing["reason"]


def test_valid_urls_pass_and_fail():
    assert evaluate_assertion(Assertion("valid_urls", True), TURN)["status"] == "passed"
    bad = {
        **TURN,
        "response": "see [docs](htp:/docs) and https://exa mple.com and http://-bad-.com",
    }
    res = evaluate_assertion(Assertion("valid_urls", True), bad)
    assert res["status"] == "failed" and "htp:/docs" in res["actual"]


def test_url_and_link_helpers():
    assert find_links(ANSWER) == [
        "https://app.example.com/invoices",
        "https://docs.example.com/void",
    ]
    assert find_urls(ANSWER) == [
        "https://app.example.com/invoices",
        "https://docs.example.com/void",
        "https://status.example.com",
    ]
    assert find_urls("(see https://en.wikipedia.org/wiki/Foo_(bar)).") == [
        "https://en.wikipedia.org/wiki/Foo_(bar)"
    ]
    assert is_valid_http_url("http://localhost:8080/x")
    assert is_valid_http_url("https://10.0.0.1/")
    assert not is_valid_http_url("https://example.com:99999/")
    assert not is_valid_http_url("ftp://example.com/")
    assert not is_valid_http_url("https://nodot/")


def test_unknown_metric_is_unknown_not_zero():
    res = evaluate_assertion(Assertion("max_cost_usd", 1.0), {**TURN, "cost_usd": None})
    assert res["status"] == "unknown"


def test_validate_assertion_refuses_bad_input():
    with pytest.raises(BenchInputError, match="regular expression"):
        validate_assertion(Assertion("regex", "("), "tasks/faq.yaml")
    with pytest.raises(BenchInputError, match="did you mean 'contains'"):
        validate_assertion(Assertion("contain", "x"))
    with pytest.raises(BenchInputError):
        validate_assertion(Assertion("min_links", -1))
    validate_assertion(Assertion("max_cost_usd", 0.5))


def test_single_prompt_task(tmp_path):
    scorer = make_scorer("assert", context(tmp_path))
    task = text_task(asserts=(Assertion("contains", "Void"), Assertion("min_urls", 2)))
    (r,) = scorer.score(trial(task, tmp_path, answer=ANSWER, cost_usd=0.01))
    assert (r.status, r.value) == (SCORE_SCORED, 1.0)
    assert [a["status"] for a in r.details["turns"][0]["asserts"]] == ["passed", "passed"]

    (r,) = scorer.score(trial(task, tmp_path, answer="no idea"))
    assert (r.status, r.value) == (SCORE_SCORED, 0.0)
    assert "min_urls" in r.reason and "contains" in r.reason


def test_bad_assertion_is_error_not_zero(tmp_path):
    scorer = make_scorer("assert", context(tmp_path))
    (r,) = scorer.score(trial(text_task(asserts=(Assertion("regex", "("),)), tmp_path, answer="x"))
    assert r.status == SCORE_ERROR and r.value is None


def test_unknown_metric_makes_trial_inconclusive(tmp_path):
    scorer = make_scorer("assert", context(tmp_path))
    task = text_task(asserts=(Assertion("max_completion_tokens", 10),))
    (r,) = scorer.score(trial(task, tmp_path, answer="short"))
    assert r.status == SCORE_INCONCLUSIVE


def test_no_assertions_not_scored_and_failed_trial_zero(tmp_path):
    scorer = make_scorer("assert", context(tmp_path))
    (r,) = scorer.score(trial(code_task(), tmp_path, patch=""))
    assert r.status == SCORE_NOT_SCORED
    task = text_task(asserts=(Assertion("contains", "x"),))
    (r,) = scorer.score(trial(task, tmp_path, outcome="budget_exceeded", error="over budget"))
    assert (r.status, r.value) == (SCORE_SCORED, 0.0) and r.reason.startswith("trial failed")


SCENARIO = text_task(
    id="void-scenario",
    turns=(
        Turn("I want to void invoice 7", (Assertion("contains", "void"),)),
        Turn(
            "It's already paid",
            (Assertion("contains", "credit note"), Assertion("max_elapsed_ms", 2000)),
        ),
        Turn("Thanks", (Assertion("min_chars", 5),)),
    ),
)


def scenario_turns(turn2_ok: bool) -> list[dict]:
    return [
        {
            "user": "I want to void invoice 7",
            "response": "You can void it from the list.",
            "latency_ms": 900,
            "completion_tokens": 20,
            "cost_usd": 0.001,
        },
        {
            "user": "It's already paid",
            "response": "Paid invoices need a credit note instead."
            if turn2_ok
            else "Just void it anyway.",
            "latency_ms": 1500,
            "completion_tokens": 30,
            "cost_usd": 0.002,
        },
        {
            "user": "Thanks",
            "response": "You're welcome!",
            "latency_ms": 300,
            "completion_tokens": 10,
            "cost_usd": 0.0005,
        },
    ]


def test_scenario_pass_hat_n_over_three_repetitions(tmp_path):
    scorer = make_scorer("assert", context(tmp_path))
    rows = []
    values = []
    for rep in (1, 2, 3):
        t = trial(SCENARIO, tmp_path, repetition=rep, turns=scenario_turns(turn2_ok=rep != 2))
        (r,) = scorer.score(t)
        values.append(r.value)
        rows += turn_rows(t, r)
    assert values == [1.0, 0.0, 1.0]

    summary = {row["turn"]: row for row in turn_pass_hat_n(rows)}
    assert [summary[i]["passed"] for i in (1, 2, 3)] == [True, False, True]
    assert summary[2]["passes"] == 2 and summary[2]["failed_repetitions"] == [2]
    assert summary[2]["pass_rate"] == pytest.approx(2 / 3)
    assert summary[2]["cost_usd"] == pytest.approx(0.002)
    assert summary[1]["latency_ms"] == pytest.approx(900)
    assert summary[1]["judge_score"] is None  # no judge rows: unknown, not 0


def test_pass_hat_n_averages_judge_scores_and_handles_missing():
    rows = [
        {
            "task_id": "t",
            "config_id": "c",
            "repetition": 1,
            "turn": 1,
            "passed": True,
            "completion_tokens": 10,
            "cost_usd": None,
            "latency_ms": 100,
            "judge_score": 0.5,
        },
        {
            "task_id": "t",
            "config_id": "c",
            "repetition": 2,
            "turn": 1,
            "passed": True,
            "completion_tokens": 30,
            "cost_usd": 0.2,
            "latency_ms": 300,
            "judge_score": 1.0,
        },
        {"task_id": "t", "config_id": "d", "repetition": 1, "turn": 1, "passed": None},
    ]
    out = {(r["config_id"], r["turn"]): r for r in turn_pass_hat_n(rows)}
    c = out[("c", 1)]
    assert c["passed"] and c["completion_tokens"] == 20 and c["cost_usd"] == 0.2
    assert c["judge_score"] == 0.75 and c["latency_ms"] == 200
    assert out[("d", 1)]["passed"] is False


def test_missing_turn_fails(tmp_path):
    scorer = make_scorer("assert", context(tmp_path))
    (r,) = scorer.score(trial(SCENARIO, tmp_path, turns=scenario_turns(True)[:2]))
    assert r.value == 0.0 and "turn 3" in r.reason
