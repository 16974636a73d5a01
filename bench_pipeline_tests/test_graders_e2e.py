"""Graders beyond checks through `bench run`: a weighted LLM judge answered by a Messages-API
server on 127.0.0.1, a judge answer that does not parse, and user scorers (Python and command)
in the config table."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from bench_pipeline_tests.conftest import run_bench
from bench_pipeline_tests.http_fakes import Recorded, Reply, ScriptedServer, messages_reply

pytestmark = pytest.mark.slow
TASKS = "[amount-precision, pagination]"
JUDGE_USAGE = (1000, 100)  # tokens per judge call: $0.0045 at the factory's sonnet-4-6 prices
JUDGE_COST = (1000 * 3.0 + 100 * 15.0) / 1e6


class Judge:
    """Grades every task criterion met when the patch is not empty; efficiency 0.5, verbosity 1,
    tests 0. `broken` trials (by a word in their evidence) get an answer that is not JSON."""

    def __init__(self, broken: str | None = None):
        self.requests: list[dict] = []
        self.broken = broken

    def __call__(self, req: Recorded) -> Reply:
        self.requests.append(req.body)
        user = req.body["messages"][-1]["content"]
        text = user if isinstance(user, str) else " ".join(b.get("text", "") for b in user)
        if self.broken and self.broken in text:
            return messages_reply(
                [{"type": "text", "text": "I think it is good {not json"}],
                input_tokens=JUDGE_USAGE[0],
                output_tokens=JUDGE_USAGE[1],
            )
        block = re.search(r"<criteria>\n(.*?)\n</criteria>", text, re.S)
        n = len(block.group(1).splitlines()) if block else 0
        empty = "(no changes)" in text
        answer = {
            "task_criteria": [
                {"index": i, "verdict": "not_met" if empty else "met", "reason": "r"}
                for i in range(1, n + 1)
            ],
            "grades": [
                {
                    "id": "efficiency",
                    "abstain": False,
                    "score": 0.0 if empty else 0.5,
                    "reason": "r",
                },
                {"id": "verbosity", "abstain": False, "score": 1.0, "reason": "r"},
                {"id": "tests", "abstain": False, "score": 0.0, "reason": "r"},
            ],
        }
        tool = req.body["tools"][0]["name"]
        return messages_reply(
            [{"type": "tool_use", "id": "toolu_j", "name": tool, "input": answer}],
            stop_reason="tool_use",
            input_tokens=JUDGE_USAGE[0],
            output_tokens=JUDGE_USAGE[1],
        )


def _launch(factory: Path, url: str, scorers: str) -> Path:
    path = factory / "launches" / "judged.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            kind: BenchmarkLaunch
            suite: invoices
            configs:
              - {{id: reference, agent: reference}}
              - {{id: noop, agent: noop}}
            tasks: {TASKS}
            repetitions: 1
            scorers: {scorers}
            judge:
              model: claude-sonnet-4-6
              base_url: "{url}"
              criteria:
                - {{id: correctness, weight: 2}}
                - {{id: efficiency}}
                - {{id: verbosity, weight: 0}}
                - {{id: tests, prompt: "The change adds or updates a test that covers the fix."}}
            """
        )
    )
    return path


def _user_scorers(factory: Path) -> None:
    scorers = factory / "scorers"
    scorers.mkdir(exist_ok=True)
    (scorers / "lint.py").write_text(
        "def score(trial):\n"
        "    changed = bool((trial.get('diff') or '').strip())\n"
        "    return {'score': 1.0 if changed else 0.0, 'reason': 'changed' if changed else 'no change'}\n"
    )
    (scorers / "size_cmd.py").write_text(
        "import json\nprint(json.dumps({'score': 0.5, 'reason': 'half'}))\n"
    )
    (scorers / "size.yaml").write_text('command: [python, "{scorers}/size_cmd.py", "{evidence}"]\n')


@pytest.fixture()
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-judge-test-0000000000")


def test_weighted_judge_criteria_user_scorers_and_costs_in_the_config_table(
    factory: Path, bench_home: Path, api_key: None
) -> None:
    _user_scorers(factory)
    judge = Judge()
    with ScriptedServer(handler=judge) as server:
        launch = _launch(
            factory, server.url, "[checks, llm_judge, 'workflow:lint', 'workflow:size']"
        )
        code, out, err = run_bench("run", str(launch), "--json", home=bench_home)
        assert code == 0, err
    assert len(judge.requests) == 4  # one judge call per trial grades all four criteria
    table = {r["config_id"]: r for r in json.loads(out)["config_table"]}
    ref, noop = table["reference"], table["noop"]
    # Judge group: weighted mean of correctness (w2), efficiency (w1), tests (w1); verbosity w0.
    judge_ref = (2 * 1.0 + 1 * 0.5 + 1 * 0.0) / 4
    assert ref["score_llm_judge"] == pytest.approx(judge_ref)
    assert ref["score_llm_judge:verbosity"] == 1.0  # reported, not counted
    assert ref["score_workflow:lint"] == 1.0 and noop["score_workflow:lint"] == 0.0
    assert ref["score_workflow:size"] == noop["score_workflow:size"] == 0.5
    # Overall: mean of the scorer means, the judge criteria counting as one scorer.
    assert ref["overall"] == pytest.approx((1.0 + judge_ref + 1.0 + 0.5) / 4)
    assert noop["overall"] == pytest.approx((0.0 + 0.0 + 0.0 + 0.5) / 4)
    # Judge cost is scorer cost, never the configuration's.
    assert ref["avg_cost_usd"] == 0.0
    assert ref["scorer_cost_usd"] == pytest.approx(2 * JUDGE_COST)
    from bench_pipeline.warehouse.store import Warehouse

    scores = Warehouse(bench_home / "warehouse").read("scores")
    judged = scores[scores["scorer"].str.startswith("llm_judge:")]
    assert set(judged["scorer"]) == {
        f"llm_judge:{c}" for c in ("correctness", "efficiency", "verbosity", "tests")
    }
    per_trial = judged.groupby("trial_id")["cost_usd"].sum()
    assert per_trial.to_list() == pytest.approx([JUDGE_COST] * 4)


def test_an_unparseable_judge_answer_is_an_error_not_a_zero(
    factory: Path, bench_home: Path, api_key: None
) -> None:
    judge = Judge(broken="limit")  # the pagination task mentions "limit"; amount-precision does not
    with ScriptedServer(handler=judge) as server:
        launch = _launch(factory, server.url, "[checks, llm_judge]")
        code, out, err = run_bench("run", str(launch), "--json", home=bench_home)
        assert code == 0, err
    table = {r["config_id"]: r for r in json.loads(out)["config_table"]}
    ref = table["reference"]
    assert (ref["scored_llm_judge:correctness"], ref["of_llm_judge:correctness"]) == (1, 2)
    # The error is excluded from the mean (not averaged in as 0).
    assert ref["score_llm_judge:correctness"] == 1.0
    assert json.loads(out)["recommendations"]["comparable"] in (True, False)
    from bench_pipeline.warehouse.store import Warehouse

    scores = Warehouse(bench_home / "warehouse").read("scores")
    errors = scores[(scores["status"] == "error") & scores["scorer"].str.startswith("llm_judge")]
    assert (
        len(errors) == 2 * 4 and errors["value"].isna().all()
    )  # pagination x 2 configs x 4 criteria
    assert errors["reason"].str.len().min() > 10
