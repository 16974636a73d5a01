"""Real agents through `bench run`: the anthropic coding loop with attempts, cost and secrets,
command agents' cost accounting, factory_ref configurations, and http-chat scenarios. Every
model is a real HTTP server on 127.0.0.1 driven through the real client library."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest

from bench_pipeline_tests.conftest import run_bench
from bench_pipeline_tests.http_fakes import Recorded, Reply, ScriptedServer, messages_reply

SECRET = "sk-ant-test-SECRET-0123456789"
TASK = "amount-precision"


def _solved_files(example: Path) -> dict[str, str]:
    """The files the reference patch changes, as they are once it is applied."""
    repo = example / "service-repo"
    patch = example / f"factory/benchmarks/invoices/references/{TASK}.patch"
    work = example / "solved"
    subprocess.run(["git", "clone", "-q", str(repo), str(work)], check=True)
    subprocess.run(["git", "checkout", "-q", "v1.0"], cwd=work, check=True)
    subprocess.run(["git", "apply", str(patch)], cwd=work, check=True)
    names = [ln[6:] for ln in patch.read_text().splitlines() if ln.startswith("+++ b/")]
    return {name: (work / name).read_text() for name in names}


def _launch(
    factory: Path, name: str, configs: str, scorers: str = "[checks]", tasks: str = f"[{TASK}]"
) -> Path:
    path = factory / "launches" / f"{name}.yaml"
    path.write_text(
        f"kind: BenchmarkLaunch\nsuite: invoices\nconfigs:\n{configs}\ntasks: {tasks}\n"
        f"repetitions: 1\nscorers: {scorers}\nmax_parallel: 1\n"
    )
    return path


class CodingModel:
    """A Messages API that answers attempt 1 with no change and, once it is shown the failing
    checks, writes the solved files with tool calls."""

    def __init__(self, solved: dict[str, str]):
        self.solved = solved
        self.attempt2_request: dict | None = None

    def __call__(self, req: Recorded) -> Reply:
        body = req.body
        text = json.dumps(body["messages"])
        last = body["messages"][-1]
        if "did not pass these acceptance checks" not in text:
            return messages_reply(
                [{"type": "text", "text": "Looks fine as is."}],
                input_tokens=1000,
                output_tokens=100,
            )
        last_content = last["content"] if isinstance(last["content"], list) else []
        if any(b.get("type") == "tool_result" for b in last_content):
            return messages_reply(
                [{"type": "text", "text": "Fixed."}], input_tokens=1000, output_tokens=100
            )
        self.attempt2_request = body
        calls = [
            {
                "type": "tool_use",
                "id": f"toolu_{i}",
                "name": "write_file",
                "input": {"path": path, "content": content},
            }
            for i, (path, content) in enumerate(self.solved.items())
        ]
        return messages_reply(calls, stop_reason="tool_use", input_tokens=1000, output_tokens=100)


@pytest.fixture()
def key_env(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    return SECRET


def test_anthropic_agent_second_attempt_with_findings_passes_priced_and_no_secret_stored(
    example: Path, factory: Path, bench_home: Path, key_env: str
) -> None:
    model = CodingModel(_solved_files(example))
    with ScriptedServer(handler=model) as server:
        launch = _launch(
            factory,
            "coder-local",
            f"  - {{id: sonnet, agent: coder, base_url: '{server.url}', max_iterations: 2}}",
        )
        code, out, err = run_bench("run", str(launch), "--json", home=bench_home)
        assert code == 0, err
    result = json.loads(out)
    (row,) = result["config_table"]
    assert row["score_checks"] == 1.0 and row["avg_iterations"] == 2.0
    # Three calls of 1000 input + 100 output tokens at the factory's sonnet prices ($3 / $15).
    assert row["avg_cost_usd"] == pytest.approx(3 * (1000 * 3.0 + 100 * 15.0) / 1e6)
    assert row["cost_coverage"] == 1.0
    # The second attempt's request carries the first attempt's failing check output.
    findings = json.dumps(model.attempt2_request["messages"])
    assert "AC-1" in findings and "did not pass these acceptance checks" in findings
    evidence = next((bench_home / "evidence").rglob("metadata.json"))
    attempts = json.loads(evidence.read_text())["attempts"]
    assert [a["attempt"] for a in attempts] == [1, 2]
    # The key reached the model server but is nowhere in the evidence or the warehouse.
    for folder in (bench_home / "evidence", bench_home / "warehouse"):
        for path in folder.rglob("*"):
            if path.is_file():
                assert SECRET.encode() not in path.read_bytes(), path
    assert (next((bench_home / "evidence").rglob("transcript.jsonl"))).stat().st_size > 0


def test_a_missing_api_key_is_refused_before_anything_runs(
    factory: Path, bench_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    launch = _launch(factory, "coder-nokey", "  - {id: sonnet, agent: coder}")
    for command in ("estimate", "run"):
        code, _, err = run_bench(command, str(launch), home=bench_home)
        assert code == 2 and "ANTHROPIC_API_KEY" in err, err
    assert not (bench_home / "warehouse").exists() or not list(
        (bench_home / "warehouse").rglob("*.parquet")
    )


USAGE_AGENT = """
import json, sys
if len(sys.argv) > 1:
    json.dump({"input_tokens": 2000, "output_tokens": 500, "model": "claude-haiku-4-5"}, open(sys.argv[1], "w"))
"""


def test_command_agent_cost_from_usage_file_and_unknown_without(
    factory: Path, bench_home: Path
) -> None:
    script = factory / "agents" / "usage_agent.py"
    script.write_text(textwrap.dedent(USAGE_AGENT))
    (factory / "agents" / "reports.yaml").write_text(
        f"kind: command\ncommand: [python, '{script}', '{{usage_file}}']\n"
    )
    (factory / "agents" / "silent.yaml").write_text(
        f"kind: command\ncommand: [python, '{script}']\n"
    )
    launch = _launch(
        factory,
        "usage",
        "  - {id: reports, agent: reports, max_iterations: 1}\n  - {id: silent, agent: silent, max_iterations: 1}",
    )
    code, out, err = run_bench("run", str(launch), "--json", home=bench_home)
    assert code == 0, err
    table = {r["config_id"]: r for r in json.loads(out)["config_table"]}
    assert table["reports"]["avg_cost_usd"] == pytest.approx((2000 * 1.0 + 500 * 5.0) / 1e6)
    assert table["silent"]["avg_cost_usd"] is None and table["silent"]["cost_coverage"] == 0.0
    code, text, _ = run_bench("results", home=bench_home)
    silent_line = next(ln for ln in text.splitlines() if ln.startswith("silent"))
    assert "unknown" in silent_line and "$0.0000" not in silent_line


def _commit(factory: Path, message: str) -> str:
    subprocess.run(["git", "add", "-A"], cwd=factory, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-qm", message],
        cwd=factory,
        check=True,
    )
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=factory, capture_output=True, text=True
    ).stdout.strip()


def test_factory_ref_runs_the_skill_text_of_the_ref(
    factory: Path, bench_home: Path, key_env: str
) -> None:
    old_sha = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=factory, capture_output=True, text=True
    ).stdout.strip()
    skill = factory / "skills" / "python-service.md"
    old_text = skill.read_text()
    skill.write_text("NEW LIVE SKILL TEXT\n")
    _commit(factory, "rewrite the skill")
    seen: list[str] = []

    def handler(req: Recorded) -> Reply:
        seen.append(json.dumps(req.body.get("system")))
        return messages_reply([{"type": "text", "text": "done"}])

    with ScriptedServer(handler=handler) as server:
        configs = (
            f"  - {{id: live, agent: coder, base_url: '{server.url}', max_iterations: 1}}\n"
            f"  - {{id: old, agent: coder, factory_ref: {old_sha}, base_url: '{server.url}', max_iterations: 1}}"
        )
        launch = _launch(factory, "refs", configs)
        code, out, err = run_bench("run", str(launch), "--json", home=bench_home)
        assert code == 0, err
    assert any("NEW LIVE SKILL TEXT" in s for s in seen)
    assert any(old_text.splitlines()[0] in s and "NEW LIVE SKILL TEXT" not in s for s in seen)
    table = {r["config_id"]: r for r in json.loads(out)["config_table"]}
    assert table["old"]["factory_ref"] == old_sha


def test_a_factory_ref_that_widens_tools_is_refused(
    factory: Path, bench_home: Path, key_env: str
) -> None:
    wide = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=factory, capture_output=True, text=True
    ).stdout.strip()
    agent = factory / "agents" / "coder.yaml"
    agent.write_text(
        agent.read_text().replace(
            "tools: [list_files, read_file, write_file, edit_file, run_command]",
            "tools: [list_files, read_file]",
        )
    )
    _commit(factory, "narrow the coder's tools")
    launch = _launch(factory, "wide", f"  - {{id: wide, agent: coder, factory_ref: {wide}}}")
    code, _, err = run_bench("run", str(launch), home=bench_home)
    assert code == 2
    (line,) = err.strip().splitlines()
    assert "factory_ref" in line and "may not widen tools" in line and "launches/wide.yaml" in line


def test_http_chat_scenario_keeps_context_and_latency(
    factory: Path, bench_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUPPORT_BOT_KEY", "support-key-123456")
    received: list[int] = []

    def chat(req: Recorded) -> Reply:
        messages = req.body["messages"]
        users = [m for m in messages if m["role"] == "user"]
        received.append(len(users))
        # Each turn must carry every earlier turn and the assistant's answers.
        assert len([m for m in messages if m["role"] == "assistant"]) == len(users) - 1
        text = (
            "You can change the billing email in Settings > Billing. See https://docs.example.com/billing "
            "for details; past invoices will not be resent and you will get a confirmation email."
        )
        return Reply(
            200,
            {
                "choices": [{"message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": 50, "completion_tokens": 40},
            },
        )

    with ScriptedServer(handler=chat) as server:
        bot = factory / "agents" / "support-bot.yaml"
        bot.write_text(bot.read_text().replace("http://127.0.0.1:8765/v1", server.url + "/v1"))
        launch = factory / "launches" / "support.yaml"
        code, out, err = run_bench(
            "run",
            str(launch),
            "--name",
            "change-billing-email",
            "--repeats",
            "1",
            "--json",
            home=bench_home,
        )
        assert code == 0, err
    assert received[:3] == [1, 2, 3]
    turns = json.loads(next((bench_home / "evidence").rglob("turns.json")).read_text())
    assert len(turns) == 3 and all(t["latency_ms"] >= 0 for t in turns)
    (row,) = json.loads(out)["config_table"]
    assert row["scored_assert"] == 1
