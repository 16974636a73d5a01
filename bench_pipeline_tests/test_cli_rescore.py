"""`bench rescore` end to end: real runs, real warehouse, real Dagster instance, a scripted
Messages-API judge on 127.0.0.1."""

from __future__ import annotations

import json
import re
import sys
import threading
from pathlib import Path

import pytest

from bench_pipeline_tests.conftest import run_bench
from bench_pipeline_tests.http_fakes import Recorded, Reply, ScriptedServer, messages_reply

pytestmark = pytest.mark.slow


class Judge:
    """Answers llm_judge calls: every task criterion met, every named criterion graded 0.8.
    Trials whose task prompt contains a string of `broken` get an answer that is not JSON."""

    def __init__(self) -> None:
        self.broken: set[str] = set()
        self.lock = threading.Lock()

    def __call__(self, rec: Recorded) -> Reply:
        user = rec.body["messages"][0]["content"]
        with self.lock:
            if any(b in user for b in self.broken):
                return messages_reply([{"type": "text", "text": "I think it is fine."}])
        props = rec.body["tools"][0]["input_schema"]["properties"]
        answer: dict = {}
        if "task_criteria" in props:
            block = re.search(r"<criteria>\n(.*?)\n</criteria>", user, re.S).group(1)
            n = len(re.findall(r"^\d+\. ", block, re.M))
            answer["task_criteria"] = [
                {"index": i, "verdict": "met", "reason": "shown"} for i in range(1, n + 1)
            ]
        if "grades" in props:
            ids = props["grades"]["items"]["properties"]["id"]["enum"]
            answer["grades"] = [
                {"id": cid, "abstain": False, "score": 0.8, "reason": "fine"} for cid in ids
            ]
        block = {
            "type": "tool_use",
            "id": "t1",
            "name": rec.body["tools"][0]["name"],
            "input": answer,
        }
        return messages_reply([block], stop_reason="tool_use")


def write_launch(factory: Path, name: str, body: str) -> Path:
    path = factory / "launches" / f"{name}.yaml"
    path.write_text(body)
    return path


def scores(home: Path, run_id: str):
    from bench_pipeline.warehouse.store import Warehouse

    return Warehouse(home / "warehouse").read("scores", run_id)


def latest(frame):
    return frame.sort_values("scored_at").drop_duplicates(["trial_id", "scorer"], keep="last")


def start(home: Path, launch: Path) -> str:
    code, out, err = run_bench("run", str(launch), "--quiet", "--json", home=home)
    assert code == 0, err
    return json.loads(out)["run"]["run_id"]


@pytest.fixture()
def judge_env(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-real")


def test_rescore_regrades_only_the_trial_the_judge_failed(factory, bench_home, judge_env):
    handler = Judge()
    currency_line = (
        (factory / "benchmarks/invoices/tasks/currency-code.yaml").read_text().split("\n")[4]
    )
    handler.broken.add(currency_line.strip())
    with ScriptedServer(handler=handler) as server:
        launch = write_launch(
            factory,
            "judged",
            f"""kind: BenchmarkLaunch
suite: invoices
tasks: [amount-precision, currency-code]
configs:
  - {{id: reference, agent: reference}}
repetitions: 1
scorers: [checks, llm_judge]
judge: {{model: claude-sonnet-4-6, base_url: "{server.url}"}}
""",
        )
        run_id = start(bench_home, launch)
        assert len(server.requests) == 2
        first = latest(scores(bench_home, run_id))
        judged = first[first["scorer"] == "llm_judge"].set_index("task_id")
        assert judged.loc["currency-code", "status"] == "error"
        assert judged.loc["amount-precision", "status"] == "scored"
        # the unscored cell is listed, by its reason, and nothing else is
        gaps = json.loads(run_bench("results", run_id, "--json", home=bench_home)[1])["unscored"]
        assert gaps and {(g["status"], g["trials"]) for g in gaps} == {("error", 1)}
        assert {g["scorer"].split(":")[0] for g in gaps} == {"llm_judge"}
        assert {g["example_trial_id"].split("/")[0] for g in gaps} == {"currency-code"}

        handler.broken.clear()
        before = len(server.requests)
        code, out, err = run_bench("rescore", run_id, home=bench_home)
        assert code == 0, err
        assert len(server.requests) - before == 1  # only the failed trial was graded again
        assert currency_line.strip() in server.requests[-1].body["messages"][0]["content"]

    rows = scores(bench_home, run_id)
    new = rows[rows["rescore_id"] != "initial"]
    assert list(new["task_id"]) == ["currency-code"] and list(new["scorer"]) == ["llm_judge"]
    (rescore_id,) = set(new["rescore_id"])
    assert re.match(r"^rescore-\d{8}T\d{6}Z-[0-9a-f]{6}$", rescore_id)
    now = latest(rows)
    assert set(now.loc[now["scorer"] == "llm_judge", "status"]) == {"scored"}
    # the settings are stored with the run, the derived tables were rebuilt
    record = json.loads(
        (bench_home / "warehouse" / "rescores" / run_id / f"{rescore_id}.json").read_text()
    )
    assert record["only_unscored"] is True and record["rows"] == 1
    code, out, _ = run_bench("results", run_id, "--json", home=bench_home)
    (row,) = json.loads(out)["config_table"]
    assert row["scored_llm_judge"] == 2 and row["of_llm_judge"] == 2
    # the rescore scored the cell: its older error row no longer lists it
    assert json.loads(out)["unscored"] == []


COUNTER_AGENT = """import sys
with open(sys.argv[1], "a") as fh:
    fh.write("x\\n")
"""


def test_rescore_adds_a_scorer_without_rerunning_agents(factory, bench_home, judge_env, tmp_path):
    script = tmp_path / "agent.py"
    script.write_text(COUNTER_AGENT)
    counter = tmp_path / "calls.txt"
    counter.touch()  # mounted into the sandbox: the one file outside the workspace it writes
    (factory / "agents" / "counter.yaml").write_text(
        f"kind: command\ncommand: [python, {json.dumps(str(script))}, {json.dumps(str(counter))}]\n"
        f"timeout_seconds: 60\nmax_iterations: 1\nmounts: ['{counter}:rw']\n"
    )
    handler = Judge()
    with ScriptedServer(handler=handler) as server:
        launch = write_launch(
            factory,
            "checks-only",
            f"""kind: BenchmarkLaunch
suite: invoices
tasks: [amount-precision]
configs:
  - {{id: counter, agent: counter}}
repetitions: 2
scorers: [checks]
judge: {{model: claude-sonnet-4-6, base_url: "{server.url}"}}
""",
        )
        run_id = start(bench_home, launch)
        assert counter.read_text().count("x") == 2
        assert len(server.requests) == 0
        assert set(scores(bench_home, run_id)["scorer"]) == {"checks"}

        code, out, err = run_bench("rescore", run_id, "--scorers", "llm_judge", home=bench_home)
        assert code == 0, err
        assert len(server.requests) == 2  # one judge call per trial
        assert counter.read_text().count("x") == 2  # no agent ran again

        # --criteria merges a new named criterion into the judge: only llm_judge is graded
        crit = tmp_path / "criteria.yaml"
        crit.write_text("criteria:\n  - {id: readable, weight: 2, prompt: the change reads well}\n")
        code, out, err = run_bench("rescore", run_id, "--criteria", str(crit), home=bench_home)
        assert code == 0, err
        assert len(server.requests) == 4
        assert counter.read_text().count("x") == 2
        # A criteria file that is not UTF-8 is one line naming it (it was a traceback)
        crit.write_bytes(b"criteria:\n  - {id: caf\xe9, prompt: p}\n")
        code, out, err = run_bench("rescore", run_id, "--criteria", str(crit), home=bench_home)
        assert code == 2
        assert err == f"error: {crit}: not UTF-8 (byte 0xe9 at offset 22); save it as UTF-8\n"
        assert len(server.requests) == 4

    rows = scores(bench_home, run_id)
    judge_rows = rows[rows["scorer"] == "llm_judge"]
    assert len(judge_rows) == 2 and set(judge_rows["status"]) == {"scored"}
    assert all(r.startswith("rescore-") for r in judge_rows["rescore_id"])
    readable = rows[rows["scorer"] == "llm_judge:readable"]
    assert len(readable) == 2 and set(readable["value"]) == {0.8}
    assert set(readable["weight"]) == {2.0}
    from bench_pipeline.runs.benchmark_run import load_run
    from bench_pipeline.runs.rescore import effective_judge
    from bench_pipeline.warehouse.store import Warehouse

    wh = Warehouse(bench_home / "warehouse")
    judge = effective_judge(wh, load_run(run_id, wh))
    assert [c.id for c in judge.criteria] == ["readable"] and judge.base_url == server.url


def test_rescore_refuses_unknown_scorer(factory, bench_home):
    code, _, err = run_bench("rescore", "nope", home=bench_home)
    assert code == 2 and "no benchmark run 'nope'" in err
    from bench_pipeline.formats.errors import BenchInputError
    from bench_pipeline.runs.rescore import parse_scorers

    with pytest.raises(BenchInputError, match="did you mean 'llm_judge'"):
        parse_scorers("llm_judg")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
