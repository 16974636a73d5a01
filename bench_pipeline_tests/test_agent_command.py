"""The command agent: real subprocesses through run_command (own group, scrubbed env, timeout)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from bench_pipeline.agents.base import BUDGET, COMPLETED, ERROR, TIMEOUT, make_agent
from bench_pipeline.agents.command import CommandAgent, preset_command, substitute
from bench_pipeline.formats.errors import BenchInputError
from bench_pipeline.workspace.process import scrubbed_env
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


def fake_bin(tmp_path: Path, name: str, body: str) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    exe = bindir / name
    exe.write_text(f"#!{sys.executable}\n{body}")
    exe.chmod(0o755)
    return bindir


def test_claude_code_preset_json_parsed(tmp_path, monkeypatch):
    bindir = fake_bin(
        tmp_path,
        "claude",
        "import json, sys, pathlib\n"
        "assert sys.argv[1] == '-p' and '--dangerously-skip-permissions' in sys.argv\n"
        "assert sys.argv[sys.argv.index('--model') + 1] == 'claude-test'\n"
        "pathlib.Path('out.txt').write_text(sys.argv[2])\n"
        "print('some warning on stderr', file=sys.stderr)\n"
        "print(json.dumps({'type': 'result', 'subtype': 'success', 'is_error': False,\n"
        "  'result': 'All done.', 'total_cost_usd': 0.0731, 'num_turns': 4,\n"
        "  'usage': {'input_tokens': 12, 'output_tokens': 340,\n"
        "            'cache_read_input_tokens': 5000, 'cache_creation_input_tokens': 800}}))\n",
    )
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    ws = git_workspace(tmp_path)
    spec = make_spec("command", preset="claude-code", model="claude-test")
    agent = make_agent(spec)
    agent.preflight(dict(os.environ))
    result = agent.run(make_request(tmp_path, spec, workspace=ws, env=scrubbed_env()))
    assert result.status == COMPLETED, result.error
    assert (ws / "out.txt").read_text() == "Do the thing."
    u = result.usage
    assert (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens) == (
        12,
        340,
        5000,
        800,
    )
    assert u.cost_usd == 0.0731


def test_claude_code_is_error_is_error(tmp_path, monkeypatch):
    bindir = fake_bin(
        tmp_path,
        "claude",
        "import json\nprint(json.dumps({'type': 'result', 'is_error': True,"
        " 'result': 'Credit balance too low', 'total_cost_usd': 0}))\n",
    )
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    spec = make_spec("command", preset="claude-code")
    result = make_agent(spec).run(make_request(tmp_path, spec, env=scrubbed_env()))
    assert result.status == ERROR and "Credit balance too low" in result.error


def test_codex_preset_jsonl_priced(tmp_path, monkeypatch):
    events = [
        {"type": "thread.started", "thread_id": "x"},
        {"type": "turn.started"},
        {"type": "item.completed", "item": {"id": "i0", "type": "agent_message", "text": "ok"}},
        {
            "type": "turn.completed",
            "usage": {"input_tokens": 10000, "cached_input_tokens": 8000, "output_tokens": 500},
        },
    ]
    lines = "\n".join(json.dumps(e) for e in events)
    bindir = fake_bin(tmp_path, "codex", f"print({lines!r})\n")
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    spec = make_spec("command", preset="codex", model="gpt-test")
    result = make_agent(spec).run(make_request(tmp_path, spec, env=scrubbed_env()))
    assert result.status == COMPLETED and result.answer == "ok"
    u = result.usage
    assert (u.input_tokens, u.cache_read_tokens, u.output_tokens) == (2000, 8000, 500)
    # 2000 * 1.25 + 8000 * 0.125 + 500 * 10 per million
    assert u.cost_usd == pytest.approx((2500 + 1000 + 5000) / 1e6)


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


def test_preset_command_and_substitution():
    assert preset_command("claude-code", "m") == [
        "claude",
        "-p",
        "{prompt}",
        "--output-format",
        "json",
        "--dangerously-skip-permissions",
        "--model",
        "m",
    ]
    assert preset_command("codex", None) == [
        "codex",
        "exec",
        "--json",
        "--skip-git-repo-check",
        "{prompt}",
    ]
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
