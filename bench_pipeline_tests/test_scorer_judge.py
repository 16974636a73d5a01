from __future__ import annotations

import pytest

from bench_pipeline.formats.errors import BenchInputError
from bench_pipeline.formats.model import Judge, JudgeCriterion
from bench_pipeline.scorers import make_scorer
from bench_pipeline.scorers.base import (
    SCORE_ERROR,
    SCORE_INCONCLUSIVE,
    SCORE_NOT_SCORED,
    SCORE_SCORED,
)
from bench_pipeline.scorers.judge import (
    JudgeAnswerError,
    judge_messages,
    parse_grades,
    parse_task_criteria,
)
from bench_pipeline_tests.http_fakes import ScriptedServer, messages_reply
from bench_pipeline_tests.test_scorer_support import (
    JUDGE_MODEL,
    code_task,
    context,
    text_task,
    trial,
)

PATCH = """diff --git a/invoices/access.py b/invoices/access.py
--- a/invoices/access.py
+++ b/invoices/access.py
@@ -27,7 +27,7 @@
 def can_read(user, invoice):
-    if user.role in ("admin", "support"):
+    if user.role == "support":
         return True
"""
REFERENCE = PATCH


def tool_reply(name: str, data: dict, input_tokens: int = 1000, output_tokens: int = 200):
    block = {"type": "tool_use", "id": "toolu_01", "name": name, "input": data}
    return messages_reply(
        [block],
        stop_reason="tool_use",
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        model=JUDGE_MODEL,
    )


def make_judge(url: str, criteria=(), scale_max: float = 1.0) -> Judge:
    return Judge(
        model=JUDGE_MODEL,
        criteria=tuple(criteria),
        scale_max=scale_max,
        base_url=url,
        api_key_env="JUDGE_KEY",
    )


FOUR = (
    JudgeCriterion("correctness", weight=2),
    JudgeCriterion("efficiency"),
    JudgeCriterion("verbosity", weight=0),
    JudgeCriterion("tests", prompt="The change adds or updates tests for the new behaviour."),
)
VERDICTS = [
    {"index": 1, "verdict": "met", "reason": "admin branch removed"},
    {"index": 2, "verdict": "met", "reason": "support kept"},
    {"index": 3, "verdict": "not_met", "reason": "owners untested"},
]


def code_trial(tmp_path, **kw):
    (tmp_path / "inputs" / "references").mkdir(parents=True, exist_ok=True)
    (tmp_path / "inputs" / "references" / "ti.patch").write_text(REFERENCE)
    task = code_task(reference_patch="references/ti.patch")
    return trial(task, tmp_path, patch=PATCH, iterations=2, **kw)


def test_one_call_grades_four_criteria_with_weights_and_split_cost(tmp_path):
    answer = {
        "task_criteria": VERDICTS,
        "grades": [
            {
                "id": "efficiency",
                "abstain": False,
                "score": 0.75,
                "reason": "as small as reference",
            },
            {"id": "verbosity", "abstain": False, "score": 1, "reason": "clean"},
            {"id": "tests", "abstain": False, "score": 0, "reason": "no tests"},
        ],
    }
    with ScriptedServer(replies=[tool_reply("record_grades", answer)]) as server:
        ctx = context(tmp_path, make_judge(server.url, FOUR), config_models=(JUDGE_MODEL,))
        scorer = make_scorer("llm_judge", ctx)
        scorer.preflight()
        results = scorer.score(code_trial(tmp_path))

    assert len(server.requests) == 1
    body = server.requests[0].body
    assert server.requests[0].path == "/v1/messages"
    headers = {k.lower(): v for k, v in server.requests[0].headers.items()}
    assert "sk-test" in (headers.get("x-api-key") or headers.get("authorization", ""))
    assert body["model"] == JUDGE_MODEL
    assert body["tool_choice"] == {"type": "tool", "name": "record_grades"}
    schema = body["tools"][0]["input_schema"]
    assert schema["properties"]["grades"]["items"]["properties"]["id"]["enum"] == [
        "efficiency",
        "verbosity",
        "tests",
    ]
    prompt = body["messages"][0]["content"]
    assert "<reference_patch>" in prompt and "2 iteration(s) of 3 allowed" in prompt
    assert "adds or updates tests" in prompt

    by = {r.scorer: r for r in results}
    assert list(by) == [
        "llm_judge:correctness",
        "llm_judge:efficiency",
        "llm_judge:verbosity",
        "llm_judge:tests",
    ]
    assert all(r.status == SCORE_SCORED and r.group == "llm_judge" for r in results)
    assert by["llm_judge:correctness"].value == pytest.approx(2 / 3)
    assert (by["llm_judge:correctness"].raw_value, by["llm_judge:correctness"].scale_max) == (2, 3)
    assert by["llm_judge:efficiency"].value == 0.75
    assert by["llm_judge:verbosity"].value == 1.0
    assert by["llm_judge:tests"].value == 0.0
    assert [r.weight for r in results] == [2, 1, 0, 1]
    # hand-priced: 1000 input tokens at $3/M + 200 output tokens at $15/M
    call_cost = (1000 * 3.0 + 200 * 15.0) / 1_000_000
    assert call_cost == pytest.approx(0.006)
    assert all(r.cost_usd == pytest.approx(call_cost / 4) for r in results)
    assert sum(r.cost_usd for r in results) == pytest.approx(call_cost)
    assert all(r.details["judge_grades_itself"] is True for r in results)
    assert by["llm_judge:correctness"].details["task_criteria"][2]["verdict"] == "not_met"


def test_without_criteria_one_share_score(tmp_path):
    with ScriptedServer(
        replies=[tool_reply("record_grades", {"task_criteria": VERDICTS})]
    ) as server:
        scorer = make_scorer("llm_judge", context(tmp_path, make_judge(server.url)))
        (r,) = scorer.score(code_trial(tmp_path))
    assert (r.scorer, r.status, r.group) == ("llm_judge", SCORE_SCORED, "llm_judge")
    assert r.value == pytest.approx(2 / 3) and "2/3 criteria met" in r.reason
    assert "judge_grades_itself" not in r.details
    assert set(server.requests[0].body["tools"][0]["input_schema"]["properties"]) == {
        "task_criteria"
    }


@pytest.mark.parametrize(
    "reply",
    [
        messages_reply([{"type": "text", "text": "I think it mostly passes."}], model=JUDGE_MODEL),
        tool_reply(
            "record_grades",
            {"grades": [{"id": "efficiency", "abstain": False, "score": "high", "reason": "?"}]},
        ),
        tool_reply(
            "record_grades",
            {
                "grades": [
                    {"id": "efficiency", "abstain": False, "score": 7, "reason": "out of range"}
                ]
            },
        ),
        tool_reply("record_grades", {"grades": []}),
        messages_reply([], stop_reason="refusal", model=JUDGE_MODEL),
    ],
    ids=["not-json", "wrong-type", "out-of-range", "missing-grade", "refusal"],
)
def test_unusable_answer_is_error_never_zero(tmp_path, reply):
    with ScriptedServer(replies=[reply]) as server:
        judge = make_judge(server.url, [JudgeCriterion("efficiency")], scale_max=5)
        (r,) = make_scorer("llm_judge", context(tmp_path, judge)).score(code_trial(tmp_path))
    assert r.status == SCORE_ERROR and r.value is None and r.reason
    assert r.cost_usd is not None  # the call was still paid for


def test_api_failure_is_error(tmp_path):
    from bench_pipeline_tests.http_fakes import Reply

    err = Reply(
        400, {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}
    )
    with ScriptedServer(replies=[err]) as server:
        (r,) = make_scorer("llm_judge", context(tmp_path, make_judge(server.url))).score(
            code_trial(tmp_path)
        )
    assert r.status == SCORE_ERROR and "judge call failed" in r.reason and r.cost_usd is None


def test_scale_normalized_raw_kept_and_abstain_inconclusive(tmp_path):
    answer = {
        "grades": [
            {"id": "efficiency", "abstain": False, "score": 4, "reason": "slightly larger"},
            {"id": "verbosity", "abstain": True, "score": None, "reason": "diff truncated"},
        ]
    }
    with ScriptedServer(replies=[tool_reply("record_grades", answer)]) as server:
        judge = make_judge(
            server.url, [JudgeCriterion("efficiency"), JudgeCriterion("verbosity")], scale_max=5
        )
        eff, verb = make_scorer("llm_judge", context(tmp_path, judge)).score(code_trial(tmp_path))
    assert (eff.status, eff.value, eff.raw_value, eff.scale_max) == (SCORE_SCORED, 0.8, 4, 5)
    assert verb.status == SCORE_INCONCLUSIVE and verb.value is None
    assert "diff truncated" in verb.reason


def test_correctness_abstain_inconclusive(tmp_path):
    verdicts = [dict(v) for v in VERDICTS]
    verdicts[1]["verdict"] = "abstain"
    with ScriptedServer(replies=[tool_reply("record_grades", {"task_criteria": verdicts})]) as s:
        (r,) = make_scorer("llm_judge", context(tmp_path, make_judge(s.url))).score(
            code_trial(tmp_path)
        )
    assert r.status == SCORE_INCONCLUSIVE and "[2]" in r.reason


def test_failed_and_infra_trials_make_no_call(tmp_path):
    with ScriptedServer(replies=[]) as server:
        scorer = make_scorer("llm_judge", context(tmp_path, make_judge(server.url, FOUR)))
        failed = scorer.score(code_trial(tmp_path, outcome="agent_error", error="crashed"))
        infra = scorer.score(code_trial(tmp_path, outcome="invalidated"))
    assert server.requests == []
    assert [(r.status, r.value, r.weight) for r in failed] == [
        (SCORE_SCORED, 0.0, 2),
        (SCORE_SCORED, 0.0, 1),
        (SCORE_SCORED, 0.0, 0),
        (SCORE_SCORED, 0.0, 1),
    ]
    assert all(r.reason == "trial failed: agent_error: crashed" for r in failed)
    assert all(r.status == SCORE_NOT_SCORED and r.value is None for r in infra)


def test_task_without_criteria_correctness_not_scored_others_graded(tmp_path):
    answer = {"grades": [{"id": "verbosity", "abstain": False, "score": 1, "reason": "ok"}]}
    with ScriptedServer(replies=[tool_reply("record_grades", answer)]) as server:
        judge = make_judge(server.url, [JudgeCriterion("correctness"), JudgeCriterion("verbosity")])
        t = trial(text_task(), tmp_path, answer="Open the invoice and press Void.")
        corr, verb = make_scorer("llm_judge", context(tmp_path, judge)).score(t)
    assert corr.status == SCORE_NOT_SCORED and corr.cost_usd is None
    assert verb.value == 1.0 and verb.cost_usd == pytest.approx(0.006)
    assert '<evidence kind="answer">' in server.requests[0].body["messages"][0]["content"]


def test_preflight_refuses_custom_criterion_without_prompt_and_missing_key(tmp_path):
    judge = Judge(
        model=JUDGE_MODEL, criteria=(JudgeCriterion("security"),), api_key_env="JUDGE_KEY"
    )
    with pytest.raises(BenchInputError, match="security.prompt"):
        make_scorer("llm_judge", context(tmp_path, judge)).preflight()
    with pytest.raises(BenchInputError, match="JUDGE_KEY"):
        make_scorer(
            "rubric", context(tmp_path, Judge(api_key_env="JUDGE_KEY"), environ={"OTHER": "x"})
        ).preflight()


@pytest.mark.parametrize("verdict,value", [("pass", 1.0), ("fail", 0.0)])
def test_rubric_pass_fail(tmp_path, verdict, value):
    reply = tool_reply("record_verdict", {"verdict": verdict, "reason": "criterion 3 decides"})
    with ScriptedServer(replies=[reply]) as server:
        (r,) = make_scorer("rubric", context(tmp_path, make_judge(server.url))).score(
            code_trial(tmp_path)
        )
    assert (r.scorer, r.status, r.value) == ("rubric", SCORE_SCORED, value)
    assert r.reason == "criterion 3 decides" and r.cost_usd == pytest.approx(0.006)
    content = server.requests[0].body["messages"][0]["content"]
    assert "<criteria>\n1. an admin cannot read" in content and PATCH.strip() in content


def test_rubric_abstain_and_bad_answer(tmp_path):
    replies = [
        tool_reply("record_verdict", {"verdict": "abstain", "reason": "truncated"}),
        tool_reply("record_verdict", {"verdict": "maybe", "reason": "?"}),
    ]
    with ScriptedServer(replies=replies) as server:
        scorer = make_scorer("rubric", context(tmp_path, make_judge(server.url)))
        (a,) = scorer.score(code_trial(tmp_path))
        (b,) = scorer.score(code_trial(tmp_path))
    assert a.status == SCORE_INCONCLUSIVE
    assert b.status == SCORE_ERROR and b.value is None and "maybe" in b.reason


def test_pure_parsers():
    assert [v["verdict"] for v in parse_task_criteria({"task_criteria": VERDICTS}, 3)] == [
        "met",
        "met",
        "not_met",
    ]
    with pytest.raises(JudgeAnswerError, match="no verdict"):
        parse_task_criteria({"task_criteria": VERDICTS[:2]}, 3)
    with pytest.raises(JudgeAnswerError, match="unexpected keys"):
        parse_grades(
            {"grades": [{"id": "a", "abstain": False, "score": 1, "reason": "", "extra": 1}]},
            ["a"],
            1,
        )
    system, user = judge_messages(
        "p", ("c1",), "patch", "diff", [JudgeCriterion("verbosity")], 5, grade_task_criteria=False
    )
    assert (
        "record_grades" in system and "0 (worst) to 5 (best)" in user and "<criteria>" not in user
    )
