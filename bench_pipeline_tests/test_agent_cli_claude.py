"""`preset: claude-code` against the REAL Claude Code CLI (npm @anthropic-ai/claude-code, pinned
in the Makefile) pointed at a streaming Messages API on 127.0.0.1 that the test scripts."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from bench_pipeline.agents.base import BUDGET, COMPLETED, MAX_TURNS, TIMEOUT, make_agent
from bench_pipeline.formats.errors import BenchInputError
from bench_pipeline.formats.model import FrozenText, Prices
from bench_pipeline.workspace.process import scrubbed_env
from bench_pipeline_tests.conftest import run_bench
from bench_pipeline_tests.http_fakes import Recorded
from bench_pipeline_tests.llm_fakes import HANG, AnthropicServer, Turn, reported_usage, text, tool
from bench_pipeline_tests.test_agent_support import (
    PRICES,
    git_workspace,
    make_request,
    make_spec,
    make_task,
    transcript_events,
)
from bench_pipeline_tests.test_agents_e2e import TASK, _launch, _solved_files

pytestmark = pytest.mark.skipif(
    shutil.which("claude") is None, reason="Claude Code not installed: run `make cli-agents`"
)
MARKER = "sk-ant-MARKER-7d1f0c2b9e"
FINDINGS = "did not pass these acceptance checks"
FACTORY_PRICES = {"claude-sonnet-4-6": (3.0, 15.0, 0.30, 3.75)}


def workdir(body: dict) -> str:
    """The working directory Claude Code states in its first user message."""
    found = re.search(r"Primary working directory: (\S+)", json.dumps(body))
    assert found, "Claude Code did not state its working directory"
    return found.group(1).replace("\\n", "")


def tool_uses_after(messages: list[dict], start: int) -> int:
    return sum(
        1
        for m in messages[start:]
        if m["role"] == "assistant" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_use"
    )


def findings_index(messages: list[dict]) -> int | None:
    for i, m in enumerate(messages):
        if m["role"] == "user" and FINDINGS in json.dumps(m["content"]):
            return i
    return None


class Coder:
    """Attempt 1: prints the API key through Bash and changes nothing. Attempt 2 (once shown
    the failing checks): reads and rewrites each solved file with Read/Write, then stops."""

    def __init__(self, solved: dict[str, str]):
        self.solved = solved
        self.attempt2_first: dict | None = None

    def __call__(self, req: Recorded) -> Turn:
        body = req.body
        if not body.get("tools"):
            return text("ok", input_tokens=50, output_tokens=5)
        messages = body["messages"]
        at = findings_index(messages)
        if at is None:
            if tool_uses_after(messages, 0) == 0:
                return tool("Bash", {"command": "printenv ANTHROPIC_API_KEY", "description": "k"})
            return text("Looks fine as is.", input_tokens=1200, output_tokens=40, cache_read=300)
        if self.attempt2_first is None:
            self.attempt2_first = body
        steps = [(name, path) for path in self.solved for name in ("Read", "Write")]
        done = tool_uses_after(messages, at)
        if done >= len(steps):
            return text("Fixed.", input_tokens=900, output_tokens=30)
        name, rel = steps[done]
        path = os.path.join(workdir(body), rel)
        args = {"file_path": path}
        if name == "Write":
            args["content"] = self.solved[rel]
        return tool(name, args, input_tokens=1000, output_tokens=100, cache_write=200)


def expected_cost(server: AnthropicServer) -> float:
    total = 0.0
    for model, (i, o, cr, cw) in reported_usage(server).items():
        rin, rout, rcr, rcw = FACTORY_PRICES[model]
        total += (i * rin + o * rout + cr * rcr + cw * rcw) / 1e6
    return total


def files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]


def test_trial_solves_through_claude_tools_resumes_prices_and_keeps_no_secret(
    example: Path, factory: Path, bench_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", MARKER)
    coder = Coder(_solved_files(example))
    with AnthropicServer(coder) as server:
        launch = _launch(
            factory,
            "cc-local",
            f"  - {{id: cc, agent: claude-code, base_url: '{server.url}', max_iterations: 2}}",
        )
        code, out, err = run_bench("run", str(launch), "--json", home=bench_home)
        assert code == 0, err
    (row,) = json.loads(out)["config_table"]
    assert row["score_checks"] == 1.0 and row["avg_iterations"] == 2.0, row
    # Cost: exactly the usage the server reported, at the factory's prices.
    assert row["cost_coverage"] == 1.0
    assert row["avg_cost_usd"] == pytest.approx(expected_cost(server), rel=1e-9)
    # Attempt 2 resumed the session: the server saw attempt 1's messages, then the findings.
    first = coder.attempt2_first
    assert first is not None
    sent = json.dumps(first["messages"])
    assert "printenv ANTHROPIC_API_KEY" in sent and "Looks fine as is." in sent
    assert "amount" in json.dumps(first["messages"][0]).lower()  # the task statement
    assert "AC-1" in sent
    # The transcript: one event per model call, tool call and tool result.
    transcript = next((bench_home / "evidence").rglob("transcript.jsonl"))
    events = [json.loads(ln) for ln in transcript.read_text().splitlines()]
    main_calls = [s for s in server.served if s.request.body.get("tools")]
    responses = [e for e in events if e["event"] == "model_response"]
    assert len(responses) == len(main_calls)
    assert all(e["usage"]["cost_usd"] is not None for e in responses)
    n_tools = sum(1 for s in main_calls for b in s.turn.content if b["type"] == "tool_use")
    assert len([e for e in events if e["event"] == "tool_call"]) == n_tools
    assert len([e for e in events if e["event"] == "tool_result"]) == n_tools
    assert {e["name"] for e in events if e["event"] == "tool_call"} == {"Bash", "Read", "Write"}
    # The session log is evidence (redacted); the CLI's home is gone with the work area.
    logs = list((bench_home / "evidence").rglob("agent-session/*.jsonl"))
    assert logs and "[REDACTED]" in "".join(p.read_text() for p in logs)
    assert not list((bench_home / "work").rglob("agent-home"))
    # The key reached the server and was printed by the agent, yet nothing in the state has it.
    assert any(MARKER in json.dumps(s.request.body) for s in server.served)
    grep = subprocess.run(["grep", "-rl", MARKER, str(bench_home)], capture_output=True, text=True)
    assert grep.returncode == 1, grep.stdout


def _agent_request(tmp_path: Path, server: AnthropicServer, **spec_kw):
    spec = make_spec(
        "command", preset="claude-code", model="claude-test", base_url=server.url,
        env=("ANTHROPIC_API_KEY",), **spec_kw,
    )  # fmt: skip
    env = scrubbed_env(extra={"ANTHROPIC_API_KEY": MARKER})
    return spec, env


def test_option_looking_and_one_megabyte_prompts_arrive_intact(tmp_path: Path) -> None:
    seen: list[str] = []

    def brain(req: Recorded) -> Turn:
        if req.body.get("tools"):
            seen.append(json.dumps(req.body["messages"]))
        return text("done")

    big = "-" + "y" * 1_000_000
    with AnthropicServer(brain) as server:
        for i, prompt in enumerate(("--version -p is not an option here", big)):
            spec, env = _agent_request(tmp_path, server)
            sub = tmp_path / f"p{i}"
            sub.mkdir()
            ws = git_workspace(sub)
            req = make_request(sub, spec, workspace=ws, env=env, task=make_task(prompt=prompt))
            result = make_agent(spec).run(req)
            assert result.status == COMPLETED, result.error
    assert "--version -p is not an option here" in seen[0]
    assert "y" * 1_000_000 in seen[1]


def test_model_effort_max_turns_system_prompt_and_skills_reach_the_cli(tmp_path: Path) -> None:
    bodies: list[dict] = []

    def brain(req: Recorded) -> Turn:
        if req.body.get("tools"):
            bodies.append(req.body)
        return tool("Bash", {"command": "echo again", "description": "loop"})

    system = FrozenText("prompts/p.md", "ALWAYS-ANSWER-IN-HAIKU", "0")
    skill = FrozenText("skills/invoice-rules.md", "# Invoice rules\nRound half even.", "0")
    with AnthropicServer(brain) as server:
        spec, env = _agent_request(
            tmp_path, server, effort="high", max_turns=2, system_prompt=system, skills=(skill,)
        )
        ws = git_workspace(tmp_path)
        req = make_request(tmp_path, spec, workspace=ws, env=env)
        result = make_agent(spec).run(req)
    assert result.status == MAX_TURNS, result.error
    assert len(bodies) == 2  # --max-turns 2
    body = bodies[0]
    assert body["model"] == "claude-test"
    everything = json.dumps(body)
    assert "ALWAYS-ANSWER-IN-HAIKU" in json.dumps(body["system"])
    assert "invoice-rules" in everything  # the skill is offered to the model
    assert body.get("thinking") or body.get("output_config"), "effort sent no thinking setting"
    # Priced from prices.yaml (claude-test: $3/M in, $15/M out): 2 calls x (100 in, 20 out).
    assert result.usage.cost_usd == pytest.approx(2 * (100 * 3.0 + 20 * 15.0) / 1e6)
    assert PRICES.cost("claude-test", 100, 20) is not None


def _live_with(marker: str) -> list[int]:
    """Pids (not zombies) whose environment mentions `marker`."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if marker.encode() not in (proc / "environ").read_bytes():
                continue
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            pids.append(int(proc.name))
    return pids


def test_a_hanging_cli_is_killed_at_the_trial_timeout_with_its_children(
    factory: Path, bench_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", MARKER)
    with AnthropicServer(lambda req: HANG) as server:
        launch = _launch(
            factory,
            "cc-hang",
            f"  - {{id: cc, agent: claude-code, base_url: '{server.url}', max_iterations: 1,"
            " timeout_seconds: 15}",
        )
        code, out, err = run_bench("run", str(launch), "--json", home=bench_home)
        assert code == 0, err
        assert server.requests, "Claude Code never called the server"
    row = json.loads(out)["config_table"][0]
    assert row["avg_cost_usd"] is None and row["cost_coverage"] == 0.0
    trial = next((bench_home / "evidence").rglob("metadata.json"))
    meta = json.loads(trial.read_text())
    assert meta.get("outcome") == "budget_exceeded" and "timeout" in json.dumps(meta), meta
    import time

    deadline = time.monotonic() + 60
    while _live_with(str(bench_home)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _live_with(str(bench_home))


def test_preflight_names_the_fix(tmp_path: Path) -> None:
    spec = make_spec("command", preset="claude-code", env=("ANTHROPIC_API_KEY",))
    with pytest.raises(BenchInputError, match="npm install -g @anthropic-ai/claude-code"):
        make_agent(spec).preflight({"PATH": str(tmp_path), "ANTHROPIC_API_KEY": "x"})
    with pytest.raises(BenchInputError, match="ANTHROPIC_API_KEY"):
        make_agent(make_spec("command", preset="claude-code")).preflight(dict(os.environ))
    make_agent(spec).preflight({**os.environ, "ANTHROPIC_API_KEY": "x"})


def nobody_can_spawn(exe: str) -> bool:
    probe = "import subprocess, sys; subprocess.run([sys.argv[1], '-c', '0'], check=True)"
    argv = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--",
            exe, "-c", probe, exe]  # fmt: skip
    return subprocess.run(argv, capture_output=True, cwd="/").returncode == 0


def test_works_as_an_unprivileged_user(example: Path, tmp_path: Path) -> None:
    """The whole harness as `nobody` (the usual CI/container case is root, tested above)."""
    if os.geteuid() != 0:
        pytest.skip("already unprivileged: the other tests cover it")
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) missing")
    shared = Path(tempfile.mkdtemp(prefix="bench-nobody-"))
    try:
        shutil.copytree(example, shared / "example", symlinks=True)
        home = shared / "home"
        home.mkdir()
        subprocess.run(["chown", "-R", "nobody:", str(shared)], check=True)
        shared.chmod(0o755)
        coder = Coder(_solved_files(example))
        with AnthropicServer(coder) as server:
            launch = _launch(
                shared / "example" / "factory",
                "cc-nobody",
                f"  - {{id: cc, agent: claude-code, base_url: '{server.url}', max_iterations: 2}}",
            )
            subprocess.run(["chown", "nobody:", str(launch)], check=True)
            env = {
                "PATH": os.environ["PATH"], "LANG": "C.UTF-8", "HOME": str(home),
                "ANTHROPIC_API_KEY": MARKER, "PYTHONPATH": str(Path(__file__).parents[1]),
                "DAGSTER_HOME": str(home / "dagster_home"), "DAGSTER_DISABLE_TELEMETRY": "1",
            }  # fmt: skip
            argv = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--",
                    sys.executable, "-m", "bench_pipeline.cli.main", "--home", str(home),
                    "run", str(launch), "--json"]  # fmt: skip
            proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        (row,) = json.loads(proc.stdout)["config_table"]
        errors = [
            str(e) for t in (home / "warehouse" / "trials").rglob("*.parquet")
            for e in __import__("pandas").read_parquet(t)["error"] if e
        ]  # fmt: skip
        assert row["avg_iterations"] == 2.0, (errors, proc.stderr[-3000:])
        assert coder.attempt2_first is not None  # attempt 2 resumed with the findings
        if nobody_can_spawn(sys.executable):
            assert row["score_checks"] == 1.0, proc.stderr[-3000:]
        else:
            # This interpreter lives under a directory only root may enter (e.g. pyenv in
            # /root), so the graders cannot start as nobody; the agent's work still shows.
            patch = next((home / "evidence").rglob("changes.patch")).read_text()
            ref = example / f"factory/benchmarks/invoices/references/{TASK}.patch"
            added = [
                ln for ln in ref.read_text().splitlines() if ln.startswith("+") and ln[1:4] != "++"
            ]
            assert added and all(ln in patch for ln in added)
        assert row["avg_cost_usd"] == pytest.approx(expected_cost(server), rel=1e-9)
        grep = subprocess.run(["grep", "-rl", MARKER, str(home)], capture_output=True, text=True)
        assert grep.returncode == 1, grep.stdout
    finally:
        if os.environ.get("KEEP_SHARED") is None:
            shutil.rmtree(shared, ignore_errors=True)


def test_transcript_has_per_call_usage(tmp_path: Path) -> None:
    def brain(req: Recorded) -> Turn:
        if req.body.get("tools") and "tool_result" not in json.dumps(req.body["messages"]):
            return tool("Bash", {"command": "echo hi", "description": "d"}, output_tokens=77)
        return text("done", output_tokens=33)

    with AnthropicServer(brain) as server:
        spec, env = _agent_request(tmp_path, server)
        ws = git_workspace(tmp_path)
        req = make_request(tmp_path, spec, workspace=ws, env=env, secrets=(MARKER,))
        result = make_agent(spec).run(req)
    assert result.status == COMPLETED, result.error
    events = transcript_events(req)
    outs = [e["usage"]["output_tokens"] for e in events if e["event"] == "model_response"]
    assert outs == [77, 33]
    results = [e for e in events if e["event"] == "tool_result"]
    assert len(results) == 1 and "hi" in json.dumps(results[0]["content"])


def test_preflight_names_the_fix_when_the_cli_cannot_run(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    broken = bindir / "claude"
    broken.write_text("#!/nonexistent/interpreter\n")  # installed, but cannot start
    broken.chmod(0o755)
    spec = make_spec("command", preset="claude-code", env=("ANTHROPIC_API_KEY",))
    with pytest.raises(BenchInputError, match=r"fails as uid \d+.*make cli-agents"):
        make_agent(spec).preflight({"PATH": str(bindir), "ANTHROPIC_API_KEY": "x"})


def test_restricted_tools_and_a_cost_disagreement_is_flagged(tmp_path: Path) -> None:
    offered: list[set[str]] = []

    def brain(req: Recorded) -> Turn:
        if req.body.get("tools"):
            offered.append({t["name"] for t in req.body["tools"]})
        return text("done", input_tokens=1000, output_tokens=100)

    with AnthropicServer(brain) as server:
        spec, env = _agent_request(tmp_path, server, tools=("read_file", "write_file"))
        spec = spec.with_overrides(model="claude-sonnet-4-6")
        ws = git_workspace(tmp_path)
        req = make_request(tmp_path, spec, workspace=ws, env=env)
        # Our price list says $1/M for everything; Claude Code knows the list price.
        req.prices = Prices({"claude-sonnet-4-6": {"input": 1.0, "output": 1.0}})
        result = make_agent(spec).run(req)
    assert result.status == COMPLETED, result.error
    assert offered == [{"Read", "Write"}]
    assert result.usage.cost_usd == pytest.approx(1100 / 1e6)  # prices.yaml wins
    (flag,) = [e for e in transcript_events(req) if e["event"] == "cost_disagreement"]
    assert flag["priced_cost_usd"] == pytest.approx(1100 / 1e6)
    assert flag["cli_cost_usd"] > flag["priced_cost_usd"]


def test_killed_after_some_calls_reports_the_usage_so_far(tmp_path: Path) -> None:
    def brain(req: Recorded) -> Turn:
        if "tool_result" in json.dumps(req.body.get("messages")):
            return HANG
        return tool("Bash", {"command": "echo one", "description": "d"}, output_tokens=50)

    with AnthropicServer(brain) as server:
        spec, env = _agent_request(tmp_path, server)
        ws = git_workspace(tmp_path)
        req = make_request(tmp_path, spec, workspace=ws, env=env, seconds=20)
        req.work_dir = tmp_path / "work"
        result = make_agent(spec).run(req)
    assert result.status == TIMEOUT
    # The one call that completed: 100 input + 50 output tokens at $3/M and $15/M.
    assert result.usage.cost_usd == pytest.approx((100 * 3.0 + 50 * 15.0) / 1e6)
    assert _wait_gone(str(tmp_path / "work"))


def _wait_gone(marker: str, seconds: float = 60) -> bool:
    import time

    deadline = time.monotonic() + seconds
    while _live_with(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def test_budget_is_passed_down_and_its_stop_is_a_budget_failure(tmp_path: Path) -> None:
    def brain(req: Recorded) -> Turn:
        return tool("Bash", {"command": "echo x", "description": "d"}, input_tokens=100_000)

    with AnthropicServer(brain) as server:
        spec, env = _agent_request(tmp_path, server, budget_usd=0.5, max_turns=20)
        spec = spec.with_overrides(model="claude-sonnet-4-6")
        ws = git_workspace(tmp_path)
        req = make_request(tmp_path, spec, workspace=ws, env=env)
        req.prices = Prices({"claude-sonnet-4-6": {"input": 3.0, "output": 15.0}})
        result = make_agent(spec).run(req)
    assert result.status == BUDGET, result.error
    # Each call costs $0.3003 (100k in, 20 out): Claude Code stops after the second.
    assert len(server.served) == 2
    assert result.usage.cost_usd == pytest.approx(2 * (100_000 * 3.0 + 20 * 15.0) / 1e6)


def test_text_task_answer_is_the_result_text(tmp_path: Path) -> None:
    with AnthropicServer(lambda req: text("The answer is 42.")) as server:
        spec, env = _agent_request(tmp_path, server)
        req = make_request(tmp_path, spec, env=env)  # no workspace: a text task
        result = make_agent(spec).run(req)
    assert result.status == COMPLETED, result.error
    assert result.answer == "The answer is 42."
