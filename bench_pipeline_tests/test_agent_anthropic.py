"""The built-in anthropic agent through the real SDK against a scripted server on 127.0.0.1."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bench_pipeline.agents.anthropic_agent import AnthropicAgent
from bench_pipeline.agents.base import BUDGET, COMPLETED, ERROR, MAX_TURNS, TIMEOUT, make_agent
from bench_pipeline.formats.errors import BenchInputError
from bench_pipeline.formats.model import FrozenText
from bench_pipeline.workspace.process import scrubbed_env
from bench_pipeline_tests.http_fakes import Reply, ScriptedServer, messages_reply
from bench_pipeline_tests.test_agent_support import (
    git_workspace,
    make_request,
    make_spec,
    transcript_events,
)

KEY = "sk-ant-test-SECRET-0123456789"
CHECK = "import sys\nsys.path.insert(0, sys.argv[1])\nfrom calc import add\nsys.exit(0 if add(2, 3) == 5 else 1)\n"


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch):
    monkeypatch.setattr(AnthropicAgent, "RETRY_BASE_DELAY", 0.01)


def tool_use(id_: str, name: str, **inp):
    return {"type": "tool_use", "id": id_, "name": name, "input": inp}


def text(t: str):
    return {"type": "text", "text": t}


def spec_for(server: ScriptedServer, **kw):
    kw.setdefault("model", "claude-test")
    return make_spec("anthropic", base_url=server.url, env=("ANTHROPIC_API_KEY",), **kw)


def agent_env() -> dict[str, str]:
    return scrubbed_env(extra={"ANTHROPIC_API_KEY": KEY})


def check_passes(ws, checker) -> bool:
    return subprocess.run([sys.executable, str(checker), str(ws)]).returncode == 0


def test_tool_loop_edits_workspace_and_prices_usage_exactly(tmp_path):
    ws = git_workspace(tmp_path, {"calc.py": "def add(a, b):\n    return a - b\n"})
    checker = tmp_path / "check_add.py"
    checker.write_text(CHECK)
    assert not check_passes(ws, checker)
    replies = [
        messages_reply(
            [text("Looking."), tool_use("t1", "read_file", path="calc.py")],
            "tool_use", 100, 20, 0, 1000,
        ),
        messages_reply(
            [tool_use("t2", "edit_file", path="calc.py", old_string="a - b", new_string="a + b")],
            "tool_use", 50, 30, 1000, 200,
        ),
        messages_reply(
            [tool_use("t3", "write_file", path="docs/NOTES.md", content="add fixed\n")],
            "tool_use", 10, 40, 1200, 0,
        ),
        messages_reply(
            [tool_use("t4", "run_command", command=["python", str(checker), "."])],
            "tool_use", 5, 10, 1200, 100,
        ),
        messages_reply([text("Fixed add().")], "end_turn", 0, 0, 0, 0),
    ]  # fmt: skip
    with ScriptedServer(replies=replies) as server:
        spec = spec_for(server, system_prompt=FrozenText("p.md", "Be terse.", "x"),
                        skills=(FrozenText("s.md", "Skill: run tests.", "y"),))  # fmt: skip
        req = make_request(tmp_path, spec, workspace=ws, env=agent_env(), secrets=(KEY,))
        result = make_agent(spec).run(req)

    assert result.status == COMPLETED, result.error
    assert check_passes(ws, checker)
    assert (ws / "docs/NOTES.md").read_text() == "add fixed\n"
    assert result.retries == 0
    u = result.usage
    assert (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens) == (
        165, 100, 3400, 1300,
    )  # fmt: skip
    # By hand: 165*$3 + 100*$15 + 3400*$0.30 + 1300*$3.75 per million tokens
    #        = 495 + 1500 + 1020 + 4875 = 7890 micro-dollars.
    assert u.cost_usd == pytest.approx(0.007890, abs=1e-12)
    assert req.spent_usd == pytest.approx(0.007890, abs=1e-12)

    first = server.requests[0]
    assert first.path == "/v1/messages"
    headers = {k.lower(): v for k, v in first.headers.items()}
    # SDK 2.14 sends the key as a bearer token (older SDKs used x-api-key)
    assert KEY in (
        headers.get("x-api-key"),
        headers.get("authorization", "").removeprefix("Bearer "),
    )
    body = first.body
    assert body["model"] == "claude-test"
    assert [b["text"] for b in body["system"]] == ["Be terse.", "Skill: run tests."]
    assert "cache_control" not in body["system"][0]
    assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert [t["name"] for t in body["tools"]] == [
        "list_files", "read_file", "write_file", "edit_file", "run_command",
    ]  # fmt: skip
    assert "thinking" not in body
    # the model saw the file and the check's exit code
    second = server.requests[1].body["messages"]
    assert "return a - b" in second[-1]["content"][0]["content"]
    last = server.requests[4].body["messages"][-1]["content"][0]
    assert last["content"].startswith("[exit code 0]")

    events = [e["event"] for e in transcript_events(req)]
    assert events.count("model_request") == 5 and events.count("model_response") == 5
    assert events.count("tool_call") == 4 and events.count("tool_result") == 4


def test_budget_stops_after_the_call_that_exceeds_it(tmp_path):
    ws = git_workspace(tmp_path, {"a.txt": "x\n"})
    replies = [
        # 1000 input tokens at $3/M = $0.003 > budget $0.002
        messages_reply(
            [tool_use("t1", "write_file", path="a.txt", content="y\n")], "tool_use", 1000, 0
        ),  # fmt: skip
        messages_reply([text("never asked")]),
    ]
    with ScriptedServer(replies=replies) as server:
        spec = spec_for(server, budget_usd=0.002)
        req = make_request(tmp_path, spec, workspace=ws, env=agent_env())
        result = make_agent(spec).run(req)
        assert len(server.requests) == 1
    assert result.status == BUDGET
    assert result.usage.cost_usd == pytest.approx(0.003)
    assert (ws / "a.txt").read_text() == "x\n"  # the pending tool call was not run
    # history stays valid for the record: the tool call is answered as not run
    assert req.state["anthropic_messages"][-1]["content"][0]["is_error"] is True


def test_unpriced_model_says_budget_cannot_be_enforced(tmp_path):
    with ScriptedServer(replies=[messages_reply([text("hi")], model="mystery")]) as server:
        spec = spec_for(server, model="mystery-model", budget_usd=0.0001)
        req = make_request(tmp_path, spec, env=agent_env())
        result = make_agent(spec).run(req)
    assert result.status == COMPLETED and result.answer == "hi"
    assert result.usage.cost_usd is None and "mystery-model" in result.usage.cost_unknown_reason
    assert result.usage.input_tokens == 100
    notes = [e for e in transcript_events(req) if e["event"] == "cost_unknown"]
    assert notes and "cannot be enforced" in notes[0]["note"]


def test_rate_limited_twice_then_success(tmp_path):
    limited = Reply(
        429, {"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}}
    )
    with ScriptedServer(replies=[limited, limited, messages_reply([text("ok")])]) as server:
        spec = spec_for(server)
        result = make_agent(spec).run(make_request(tmp_path, spec, env=agent_env()))
        assert len(server.requests) == 3
    assert result.status == COMPLETED and result.retries == 2 and result.answer == "ok"


def test_overloaded_and_5xx_retried_but_400_is_not(tmp_path):
    overloaded = Reply(
        529, {"type": "error", "error": {"type": "overloaded_error", "message": "o"}}
    )
    with ScriptedServer(replies=[overloaded, Reply(502, "bad gateway"), messages_reply([text("ok")])]) as s:  # fmt: skip
        spec = spec_for(s)
        result = make_agent(spec).run(make_request(tmp_path, spec, env=agent_env()))
    assert result.status == COMPLETED and result.retries == 2

    bad = Reply(400, {"type": "error", "error": {"type": "invalid_request_error", "message": "no"}})
    with ScriptedServer(replies=[bad, messages_reply([text("never")])]) as s:
        spec = spec_for(s)
        result = make_agent(spec).run(make_request(tmp_path / "x", spec, env=agent_env()))
        assert len(s.requests) == 1
    assert result.status == ERROR and "invalid_request_error" in result.error


def test_retries_exhausted_is_error(tmp_path, monkeypatch):
    monkeypatch.setattr(AnthropicAgent, "MAX_RETRIES", 2)
    with ScriptedServer(handler=lambda r: Reply(503, {"error": "down"})) as s:
        spec = spec_for(s)
        result = make_agent(spec).run(make_request(tmp_path, spec, env=agent_env()))
        assert len(s.requests) == 3
    assert result.status == ERROR and result.retries == 2 and "HTTP 503" in result.error


def test_paths_outside_workspace_are_refused(tmp_path):
    ws = git_workspace(tmp_path, {"inside.txt": "in\n"})
    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n")
    (ws / "link").symlink_to(tmp_path)
    replies = [
        messages_reply(
            [
                tool_use("a", "write_file", path="../outside.txt", content="pwned"),
                tool_use("b", "write_file", path=str(outside), content="pwned"),
                tool_use(
                    "c",
                    "edit_file",
                    path="link/outside.txt",
                    old_string="precious",
                    new_string="pwned",
                ),
                tool_use("d", "read_file", path="../outside.txt"),
                tool_use("e", "list_files", path="/"),
                tool_use("f", "read_file", path="inside.txt"),
            ],
            "tool_use",
        ),  # fmt: skip
        messages_reply([text("gave up")]),
    ]
    with ScriptedServer(replies=replies) as server:
        spec = spec_for(server)
        result = make_agent(spec).run(make_request(tmp_path, spec, workspace=ws, env=agent_env()))
    assert result.status == COMPLETED
    assert outside.read_text() == "precious\n"
    results = server.requests[1].body["messages"][-1]["content"]
    assert [r["tool_use_id"] for r in results] == list("abcdef")
    for r in results[:5]:
        assert r["is_error"] is True and "outside the workspace" in r["content"]
    assert results[5]["content"] == "in\n" and "is_error" not in results[5]


def test_second_attempt_continues_the_conversation_with_findings(tmp_path):
    ws = git_workspace(tmp_path, {"calc.py": "def add(a, b):\n    return a - b\n"})
    replies = [
        messages_reply([tool_use("t1", "read_file", path="calc.py")], "tool_use"),
        messages_reply([text("I think it is fine.")]),
        messages_reply([text("Fixed now.")]),
    ]
    state: dict = {}
    with ScriptedServer(replies=replies) as server:
        spec = spec_for(server, max_iterations=2)
        agent = make_agent(spec)
        first = agent.run(make_request(tmp_path, spec, workspace=ws, env=agent_env(), state=state))
        findings = "Fix add.\n\nThe checks failed:\n- AC-1: add(2, 3) returned -1, expected 5"
        second = agent.run(
            make_request(tmp_path, spec, workspace=ws, env=agent_env(), state=state,
                         prompt=findings, attempt=2)
        )  # fmt: skip
    assert first.status == second.status == COMPLETED
    assert len(server.requests) == 3
    sent = server.requests[2].body["messages"]
    earlier = server.requests[1].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user", "assistant", "user"]
    strip = _strip_cache_control
    assert strip(sent[:3]) == strip(earlier)
    assert sent[3]["content"] == [{"type": "text", "text": "I think it is fine."}]
    assert sent[4]["content"][-1]["text"] == findings
    assert sent[0]["content"][0]["text"] == "Do the thing."


def _strip_cache_control(messages):
    out = []
    for m in messages:
        content = [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]]
        out.append({"role": m["role"], "content": content})
    return out


def test_max_turns_stops_tool_loop(tmp_path):
    ws = git_workspace(tmp_path)
    replies = [
        messages_reply([tool_use("t1", "list_files")], "tool_use"),
        messages_reply([tool_use("t2", "list_files")], "tool_use"),
        messages_reply([text("unreached")]),
    ]
    with ScriptedServer(replies=replies) as server:
        spec = spec_for(server, max_turns=1)
        result = make_agent(spec).run(make_request(tmp_path, spec, workspace=ws, env=agent_env()))
        assert len(server.requests) == 2
    assert result.status == MAX_TURNS


def test_text_task_has_no_tools_and_effort_sets_thinking(tmp_path):
    with ScriptedServer(replies=[messages_reply([text("Paris")])]) as server:
        spec = spec_for(server, effort="high", tools=("read_file",))
        result = make_agent(spec).run(make_request(tmp_path, spec, env=agent_env()))
    assert result.status == COMPLETED and result.answer == "Paris"
    body = server.requests[0].body
    assert "tools" not in body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 16384}
    assert body["max_tokens"] > 16384


def test_only_configured_tools_are_offered(tmp_path):
    ws = git_workspace(tmp_path)
    with ScriptedServer(replies=[messages_reply([text("ok")])]) as server:
        spec = spec_for(server, tools=("read_file", "edit_file"), effort="medium")
        make_agent(spec).run(make_request(tmp_path, spec, workspace=ws, env=agent_env()))
    body = server.requests[0].body
    assert [t["name"] for t in body["tools"]] == ["read_file", "edit_file"]
    assert body["thinking"]["budget_tokens"] == 4096


def test_deadline_already_passed_is_timeout(tmp_path):
    with ScriptedServer(replies=[messages_reply([text("late")])]) as server:
        spec = spec_for(server)
        result = make_agent(spec).run(make_request(tmp_path, spec, env=agent_env(), seconds=-1))
        assert server.requests == []
    assert result.status == TIMEOUT and result.usage.cost_usd is None


def test_api_key_never_in_transcript_or_evidence(tmp_path):
    bad = Reply(401, {"type": "error", "error": {"type": "authentication_error",
                                                  "message": f"invalid x-api-key {KEY}"}})  # fmt: skip
    ws = git_workspace(tmp_path)
    replies = [
        messages_reply([tool_use("t1", "run_command", command=["python", "-c",
                        "import os; print(os.environ['ANTHROPIC_API_KEY'])"])], "tool_use"),
        messages_reply([text(f"the key is {KEY}")]),
        bad,
    ]  # fmt: skip
    with ScriptedServer(replies=replies) as server:
        spec = spec_for(server)
        req = make_request(tmp_path, spec, workspace=ws, env=agent_env(), secrets=(KEY,))
        agent = make_agent(spec)
        agent.run(req)
        req2 = make_request(tmp_path, spec, workspace=ws, env=agent_env(), secrets=(KEY,),
                            prompt="again", attempt=2)  # fmt: skip
        result = agent.run(req2)
    assert result.status == ERROR and KEY not in result.error
    written = (req.evidence_dir / "transcript.jsonl").read_text()
    assert "[REDACTED]" in written and KEY not in written


def test_preflight_names_the_variable():
    spec = make_spec("anthropic", env=("ANTHROPIC_API_KEY",))
    with pytest.raises(BenchInputError, match="ANTHROPIC_API_KEY") as err:
        AnthropicAgent(spec).preflight({})
    assert "agents/a1.yaml" in str(err.value)
    with pytest.raises(BenchInputError, match="add ANTHROPIC_API_KEY to `env`"):
        AnthropicAgent(make_spec("anthropic")).preflight({"ANTHROPIC_API_KEY": KEY})
    AnthropicAgent(spec).preflight({"ANTHROPIC_API_KEY": KEY})


def test_text_scenario_turns_carry_history(tmp_path):
    from bench_pipeline.formats.model import Turn
    from bench_pipeline_tests.test_agent_support import make_task

    replies = [messages_reply([text("4")], input_tokens=10), messages_reply([text("40")])]
    with ScriptedServer(replies=replies) as server:
        spec = spec_for(server)
        task = make_task(text=True, turns=(Turn("2+2?"), Turn("times ten?")))
        result = make_agent(spec).run(make_request(tmp_path, spec, task=task, env=agent_env()))
    assert result.status == COMPLETED and result.answer == "40"
    assert [t["response"] for t in result.turns] == ["4", "40"]
    assert result.turns[0]["cost_usd"] == pytest.approx((10 * 3 + 20 * 15) / 1e6)
    sent = _strip_cache_control(server.requests[1].body["messages"])
    assert sent == [
        {"role": "user", "content": [{"type": "text", "text": "2+2?"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "4"}]},
        {"role": "user", "content": [{"type": "text", "text": "times ten?"}]},
    ]
