"""The command agent: real subprocesses through run_command (own group, scrubbed env, timeout)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bench_pipeline.agents.base import BUDGET, COMPLETED, ERROR, TIMEOUT, make_agent
from bench_pipeline.agents.command import CommandAgent, substitute
from bench_pipeline.formats.errors import BenchInputError
from bench_pipeline_tests.processes import wait_until_dead
from bench_pipeline_tests.test_agent_support import (
    git_workspace,
    make_request,
    make_spec,
    transcript_events,
)


def script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(body)
    return path


def test_usage_file_cost_and_substitution(tmp_path):
    ws = git_workspace(tmp_path, {"a.txt": "old\n"})
    agent_py = script(
        tmp_path,
        "agent.py",
        "import json, sys, pathlib\n"
        "prompt, prompt_file, workspace, usage = sys.argv[1:5]\n"
        "assert pathlib.Path(prompt_file).read_text() == prompt\n"
        "assert pathlib.Path.cwd() == pathlib.Path(workspace)\n"
        "pathlib.Path('a.txt').write_text('new\\n')\n"
        "json.dump({'input_tokens': 1000, 'output_tokens': 200, 'model': 'claude-test'},"
        " open(usage, 'w'))\n"
        "print('done')\n",
    )
    spec = make_spec(
        "command",
        command=(
            "python",
            str(agent_py),
            "{prompt}",
            "{prompt_file}",
            "{workspace}",
            "{usage_file}",
        ),
    )
    req = make_request(tmp_path, spec, workspace=ws, prompt="fix {workspace} literally")
    result = make_agent(spec).run(req)
    assert result.status == COMPLETED, result.error
    assert (ws / "a.txt").read_text() == "new\n"
    # 1000 * $3/M + 200 * $15/M
    assert result.usage.cost_usd == pytest.approx(0.003 + 0.003)
    assert result.usage.input_tokens == 1000 and result.usage.output_tokens == 200
    assert (req.evidence_dir / "agent-attempt1.log").read_text().strip() == "done"
    assert any(e["event"] == "agent_command_result" for e in transcript_events(req))


def test_usage_file_cost_usd_wins(tmp_path):
    agent_py = script(
        tmp_path,
        "agent.py",
        "import json, sys\njson.dump({'cost_usd': 0.42, 'input_tokens': 5}, open(sys.argv[1], 'w'))\n",
    )
    spec = make_spec("command", command=("python", str(agent_py), "{usage_file}"))
    result = make_agent(spec).run(make_request(tmp_path, spec, workspace=tmp_path))
    assert result.usage.cost_usd == 0.42 and result.usage.cost_unknown_reason is None


def test_no_usage_file_is_unknown_not_zero(tmp_path):
    agent_py = script(tmp_path, "agent.py", "print('the answer is 42')\n")
    spec = make_spec("command", command=("python", str(agent_py)))
    req = make_request(tmp_path, spec)  # text task: cwd = evidence dir, answer = stdout
    result = make_agent(spec).run(req)
    assert result.status == COMPLETED
    assert result.usage.cost_usd is None
    assert result.usage.cost_unknown_reason == "agent reported no usage"
    assert result.answer == "the answer is 42"


def test_unpriced_model_is_unknown_with_reason(tmp_path):
    agent_py = script(
        tmp_path,
        "agent.py",
        "import json, sys\njson.dump({'input_tokens': 5, 'model': 'mystery'}, open(sys.argv[1], 'w'))\n",
    )
    spec = make_spec("command", command=("python", str(agent_py), "{usage_file}"))
    result = make_agent(spec).run(make_request(tmp_path, spec))
    assert result.usage.cost_usd is None and "mystery" in result.usage.cost_unknown_reason
    assert result.usage.input_tokens == 5


def test_nonzero_exit_is_error_with_output_tail(tmp_path):
    agent_py = script(tmp_path, "agent.py", "import sys\nprint('boom: broken')\nsys.exit(3)\n")
    spec = make_spec("command", command=("python", str(agent_py)))
    result = make_agent(spec).run(make_request(tmp_path, spec))
    assert result.status == ERROR
    assert "exit code 3" in result.error and "boom: broken" in result.error


def test_budget_exceeded_by_reported_cost(tmp_path):
    agent_py = script(
        tmp_path,
        "agent.py",
        "import json, sys\njson.dump({'cost_usd': 2.5}, open(sys.argv[1], 'w'))\n",
    )
    spec = make_spec("command", command=("python", str(agent_py), "{usage_file}"), budget_usd=1.0)
    req = make_request(tmp_path, spec)
    result = make_agent(spec).run(req)
    assert result.status == BUDGET and req.spent_usd == 2.5


def test_timeout_kills_agent_and_its_child(tmp_path):
    pidfile = tmp_path / "child.pid"
    agent_py = script(
        tmp_path,
        "agent.py",
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(120)\n",
    )
    spec = make_spec("command", command=("python", str(agent_py)))
    start = time.monotonic()
    result = make_agent(spec).run(make_request(tmp_path, spec, seconds=1.5))
    assert time.monotonic() - start < 10
    assert result.status == TIMEOUT
    child = int(pidfile.read_text())
    assert wait_until_dead(child), f"the agent's child {child} survived the timeout"


def test_preflight_missing_executable_names_file_key_and_fix(tmp_path):
    spec = make_spec("command", command=("no-such-agent-binary-xyz", "{prompt}"))
    with pytest.raises(BenchInputError) as err:
        CommandAgent(spec).preflight({"PATH": str(tmp_path)})
    msg = str(err.value)
    assert "agents/a1.yaml" in msg and "command" in msg and "no-such-agent-binary-xyz" in msg
    with pytest.raises(BenchInputError, match="preset"):
        CommandAgent(make_spec("command", preset="claude-code")).preflight({"PATH": str(tmp_path)})


def test_substitution_is_one_pass_without_a_shell():
    # one pass: a prompt mentioning {workspace} is passed through verbatim; no shell expansion
    assert substitute(
        ["--p={prompt}", "{workspace}", "$HOME {x}"],
        {
            "prompt": "use {workspace}; $(rm -rf /)",
            "workspace": "/w",
            "prompt_file": "",
            "usage_file": "",
        },
    ) == ["--p=use {workspace}; $(rm -rf /)", "/w", "$HOME {x}"]


def _readme_example() -> tuple[str, str]:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme.split("### The command-agent contract", 1)[1].split("## Scorers", 1)[0]
    yaml_block = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    py_block = section.split("```python\n", 1)[1].split("```", 1)[0]
    return yaml_block, py_block


def test_readme_worked_example_follows_the_contract(tmp_path):
    """The README's own-CLI example: prompt on stdin, home kept across attempts, a session
    continued on attempt 2 with the findings only, usage priced, events in the transcript."""
    import yaml

    yaml_text, script_text = _readme_example()
    agent_py = script(tmp_path, "my_agent.py", script_text)
    data = yaml.safe_load(yaml_text)
    assert data["kind"] == "command" and data["command"][1] == "/opt/my-agent/my_agent.py"
    spec = make_spec(
        "command",
        command=(data["command"][0], str(agent_py)),
        model="claude-test",
        max_iterations=data["max_iterations"],
    )
    ws = git_workspace(tmp_path)
    state: dict = {}
    agent = make_agent(spec)
    first = make_request(tmp_path, spec, workspace=ws, prompt="-v fix the bug", state=state)
    r1 = agent.run(first)
    assert r1.status == COMPLETED, r1.error
    findings = "The change did not pass these acceptance checks: AC-1"
    second = make_request(tmp_path, spec, workspace=ws, prompt=findings, state=state, attempt=2)
    r2 = agent.run(second)
    assert r2.status == COMPLETED, r2.error
    notes = (ws / "NOTES.md").read_text().splitlines()
    assert notes == ["turn 1: -v fix the bug", f"turn 2: {findings[:60]}"]
    # 20 input + 5 output tokens on attempt 2 at $3/M and $15/M
    assert r2.usage.cost_usd == pytest.approx((20 * 3.0 + 5 * 15.0) / 1e6)
    events = transcript_events(second)
    assert [e["attempt"] for e in events if e["event"] == "tool_call"] == [1, 2]
    started = [e for e in events if e["event"] == "agent_command"]
    assert started[1]["resumed_session"] and not started[0]["resumed_session"]
    # The home is outside the evidence and persisted between the attempts.
    home = Path(state["cli_agent"]["home"])
    assert list(home.glob("*.json")) and home.is_relative_to(tmp_path / "work")


def test_without_a_session_a_later_attempt_gets_the_task_again(tmp_path):
    agent_py = script(
        tmp_path,
        "agent.py",
        "import sys, pathlib\npathlib.Path('seen.txt').write_text(sys.stdin.read())\n",
    )
    spec = make_spec("command", command=("python", str(agent_py)))
    ws = git_workspace(tmp_path)
    state: dict = {}
    make_agent(spec).run(make_request(tmp_path, spec, workspace=ws, state=state))
    req = make_request(tmp_path, spec, workspace=ws, prompt="FINDINGS", state=state, attempt=2)
    assert make_agent(spec).run(req).status == COMPLETED
    assert (ws / "seen.txt").read_text() == "Do the thing.\n\nFINDINGS"
