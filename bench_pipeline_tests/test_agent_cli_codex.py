"""`preset: codex` against the REAL Codex CLI (npm @openai/codex, pinned in the Makefile) pointed
through a custom provider (`config.toml` model_providers) at a Responses API on 127.0.0.1."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from bench_pipeline.agents.base import COMPLETED, TIMEOUT, make_agent
from bench_pipeline.formats.errors import BenchInputError
from bench_pipeline.formats.model import FrozenText
from bench_pipeline.workspace.process import scrubbed_env
from bench_pipeline_tests.conftest import run_bench
from bench_pipeline_tests.http_fakes import Recorded
from bench_pipeline_tests.llm_fakes import HANG, ResponsesServer, Turn, text, tool
from bench_pipeline_tests.test_agent_cli_claude import _live_with, _wait_gone, nobody_can_spawn
from bench_pipeline_tests.test_agent_support import (
    git_workspace,
    make_request,
    make_spec,
    make_task,
    transcript_events,
)
from bench_pipeline_tests.test_agents_e2e import _launch, _solved_files

pytestmark = pytest.mark.skipif(
    shutil.which("codex") is None, reason="Codex CLI not installed: run `make cli-agents`"
)
MARKER = "sk-openai-MARKER-4c2e8a1f"
FINDINGS = "did not pass these acceptance checks"
MODEL = "gpt-5-codex"
RATES = (1.25, 10.0, 0.125)  # input, output, cache read: USD per million tokens


def add_codex_agent(factory: Path, **extra: str) -> None:
    with open(factory / "prices.yaml", "a") as fh:
        fh.write(f"{MODEL}: {{input: {RATES[0]}, output: {RATES[1]}, cache_read: {RATES[2]}}}\n")
    lines = ["kind: command", "preset: codex", f"model: {MODEL}", "env: [OPENAI_API_KEY]"]
    lines += [f"{k}: {v}" for k, v in extra.items()]
    (factory / "agents" / "codex.yaml").write_text("\n".join(lines) + "\n")


def calls_after(items: list[dict], start: int) -> int:
    return sum(1 for it in items[start:] if it.get("type") == "function_call")


def findings_index(items: list[dict]) -> int | None:
    for i, it in enumerate(items):
        if it.get("type") == "message" and it.get("role") == "user" and FINDINGS in json.dumps(it):
            return i
    return None


class Coder:
    """Attempt 1: prints the key through exec_command, changes nothing. Attempt 2 (shown the
    failing checks): writes each solved file with exec_command, then stops."""

    def __init__(self, solved: dict[str, str]):
        self.solved = solved
        self.attempt2_first: dict | None = None

    def __call__(self, req: Recorded) -> Turn:
        items = req.body.get("input") or []
        at = findings_index(items)
        if at is None:
            if calls_after(items, 0) == 0:
                return tool("exec_command", {"cmd": "printenv OPENAI_API_KEY"})
            return text("Looks fine as is.", input_tokens=1200, output_tokens=40, cache_read=300)
        if self.attempt2_first is None:
            self.attempt2_first = req.body
        done = calls_after(items, at)
        files = list(self.solved.items())
        if done >= len(files):
            return text("Fixed.", input_tokens=900, output_tokens=30)
        rel, content = files[done]
        cmd = f"printf %s {shlex.quote(content)} > {shlex.quote(rel)}"
        return tool("exec_command", {"cmd": cmd}, input_tokens=1000, output_tokens=100)


def expected_cost(server: ResponsesServer) -> float:
    return sum(
        (s.turn.input_tokens * RATES[0] + s.turn.output_tokens * RATES[1]
         + s.turn.cache_read * RATES[2]) / 1e6
        for s in server.served
    )  # fmt: skip


def test_trial_solves_through_codex_tools_resumes_prices_and_keeps_no_secret(
    example: Path, factory: Path, bench_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", MARKER)
    add_codex_agent(factory)
    coder = Coder(_solved_files(example))
    with ResponsesServer(coder) as server:
        launch = _launch(
            factory,
            "codex-local",
            f"  - {{id: cx, agent: codex, base_url: '{server.url}', max_iterations: 2}}",
        )
        code, out, err = run_bench("run", str(launch), "--json", home=bench_home)
        assert code == 0, err
    (row,) = json.loads(out)["config_table"]
    assert row["score_checks"] == 1.0 and row["avg_iterations"] == 2.0, row
    assert row["cost_coverage"] == 1.0
    assert row["avg_cost_usd"] == pytest.approx(expected_cost(server), rel=1e-9)
    # Attempt 2 resumed the thread: attempt 1's items, then the findings.
    first = coder.attempt2_first
    assert first is not None
    sent = json.dumps(first["input"])
    assert "printenv OPENAI_API_KEY" in sent and "Looks fine as is." in sent and "AC-1" in sent
    assert "amount" in sent.lower()
    transcript = next((bench_home / "evidence").rglob("transcript.jsonl"))
    events = [json.loads(ln) for ln in transcript.read_text().splitlines()]
    assert len([e for e in events if e["event"] == "model_response"]) == len(server.served)
    n_tools = sum(1 for s in server.served for b in s.turn.content if b["type"] == "tool_use")
    assert len([e for e in events if e["event"] == "tool_call"]) == n_tools
    assert len([e for e in events if e["event"] == "tool_result"]) == n_tools
    assert list((bench_home / "evidence").rglob("agent-session/rollout-*.jsonl"))
    assert any(MARKER in json.dumps(r.headers) for r in server.requests)
    grep = subprocess.run(["grep", "-rl", MARKER, str(bench_home)], capture_output=True, text=True)
    assert grep.returncode == 1, grep.stdout


def _spec_env(server: ResponsesServer, **kw):
    spec = make_spec(
        "command", preset="codex", model="gpt-test", base_url=server.url,
        env=("OPENAI_API_KEY",), **kw,
    )  # fmt: skip
    return spec, scrubbed_env(extra={"OPENAI_API_KEY": MARKER})


def test_option_looking_and_one_megabyte_prompts_arrive_intact(tmp_path: Path) -> None:
    seen: list[str] = []

    def brain(req: Recorded) -> Turn:
        seen.append(json.dumps(req.body.get("input")))
        return text("done")

    big = "-" + "z" * 1_000_000
    with ResponsesServer(brain) as server:
        for i, prompt in enumerate(("--help -m not-an-option", big)):
            spec, env = _spec_env(server)
            sub = tmp_path / f"p{i}"
            sub.mkdir()
            ws = git_workspace(sub)
            req = make_request(sub, spec, workspace=ws, env=env, task=make_task(prompt=prompt))
            result = make_agent(spec).run(req)
            assert result.status == COMPLETED, result.error
    assert any("--help -m not-an-option" in s for s in seen)
    assert any("z" * 1_000_000 in s for s in seen)


def test_model_effort_system_prompt_skills_and_per_call_transcript(tmp_path: Path) -> None:
    bodies: list[dict] = []

    def brain(req: Recorded) -> Turn:
        bodies.append(req.body)
        if "function_call_output" not in json.dumps(req.body.get("input")):
            return tool("exec_command", {"cmd": "echo hi"}, output_tokens=77)
        return text("done", output_tokens=33)

    system = FrozenText("prompts/p.md", "ALWAYS-ANSWER-IN-HAIKU", "0")
    skill = FrozenText("skills/invoice-rules.md", "# Invoice rules\nRound half even.", "0")
    with ResponsesServer(brain) as server:
        spec, env = _spec_env(server, effort="high", system_prompt=system, skills=(skill,))
        ws = git_workspace(tmp_path)
        req = make_request(tmp_path, spec, workspace=ws, env=env, secrets=(MARKER,))
        result = make_agent(spec).run(req)
    assert result.status == COMPLETED, result.error
    body = bodies[0]
    assert body["model"] == "gpt-test" and body["reasoning"]["effort"] == "high"
    everything = json.dumps(body)
    assert "ALWAYS-ANSWER-IN-HAIKU" in everything and "invoice-rules" in everything
    events = transcript_events(req)
    outs = [e["usage"]["output_tokens"] for e in events if e["event"] == "model_response"]
    assert outs == [77, 33]
    results = [e for e in events if e["event"] == "tool_result"]
    assert len(results) == 1 and "hi" in json.dumps(results[0]["content"])
    # gpt-test: $1.25/M input, $10/M output; 2 calls x (100 in, output 77 and 33).
    assert result.usage.cost_usd == pytest.approx((200 * 1.25 + 110 * 10.0) / 1e6)


def test_a_hanging_cli_is_killed_at_the_trial_timeout_with_its_children(
    factory: Path, bench_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", MARKER)
    add_codex_agent(factory)
    with ResponsesServer(lambda req: HANG) as server:
        launch = _launch(
            factory,
            "codex-hang",
            f"  - {{id: cx, agent: codex, base_url: '{server.url}', max_iterations: 1,"
            " timeout_seconds: 15}",
        )
        code, out, err = run_bench("run", str(launch), "--json", home=bench_home)
        assert code == 0, err
        assert server.requests, "Codex never called the server"
    row = json.loads(out)["config_table"][0]
    assert row["avg_cost_usd"] is None and row["cost_coverage"] == 0.0
    meta = json.loads(next((bench_home / "evidence").rglob("metadata.json")).read_text())
    assert meta["outcome"] == "budget_exceeded" and "timeout" in json.dumps(meta), meta
    deadline = time.monotonic() + 60
    while _live_with(str(bench_home)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _live_with(str(bench_home))


def test_preflight_names_the_fix(tmp_path: Path) -> None:
    spec = make_spec("command", preset="codex", env=("OPENAI_API_KEY",))
    with pytest.raises(BenchInputError, match="npm install -g @openai/codex"):
        make_agent(spec).preflight({"PATH": str(tmp_path), "OPENAI_API_KEY": "x"})
    with pytest.raises(BenchInputError, match="OPENAI_API_KEY"):
        make_agent(make_spec("command", preset="codex")).preflight(dict(os.environ))
    make_agent(spec).preflight({**os.environ, "OPENAI_API_KEY": "x"})


def test_killed_after_some_calls_reports_the_usage_so_far(tmp_path: Path) -> None:
    def brain(req: Recorded) -> Turn:
        if "function_call_output" in json.dumps(req.body.get("input")):
            return HANG
        return tool("exec_command", {"cmd": "echo one"}, output_tokens=50)

    with ResponsesServer(brain) as server:
        spec, env = _spec_env(server)
        ws = git_workspace(tmp_path)
        req = make_request(tmp_path, spec, workspace=ws, env=env, seconds=20)
        req.work_dir = tmp_path / "work"
        result = make_agent(spec).run(req)
    assert result.status == TIMEOUT
    # The one call that completed: 100 input + 50 output tokens at $1.25/M and $10/M.
    assert result.usage.cost_usd == pytest.approx((100 * 1.25 + 50 * 10.0) / 1e6)
    assert _wait_gone(str(tmp_path / "work"))


def test_works_as_an_unprivileged_user(example: Path) -> None:
    """The whole harness as `nobody`, Codex included."""
    if os.geteuid() != 0:
        pytest.skip("already unprivileged: the other tests cover it")
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) missing")
    shared = Path(tempfile.mkdtemp(prefix="bench-nobody-"))
    try:
        shutil.copytree(example, shared / "example", symlinks=True)
        factory = shared / "example" / "factory"
        add_codex_agent(factory)
        home = shared / "home"
        home.mkdir()
        coder = Coder(_solved_files(example))
        with ResponsesServer(coder) as server:
            launch = _launch(
                factory,
                "cx-nobody",
                f"  - {{id: cx, agent: codex, base_url: '{server.url}', max_iterations: 2}}",
            )
            subprocess.run(["chown", "-R", "nobody:", str(shared)], check=True)
            shared.chmod(0o755)
            env = {
                "PATH": os.environ["PATH"], "LANG": "C.UTF-8", "HOME": str(home),
                "OPENAI_API_KEY": MARKER, "PYTHONPATH": str(Path(__file__).parents[1]),
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
        assert coder.attempt2_first is not None
        if nobody_can_spawn(sys.executable):
            assert row["score_checks"] == 1.0, proc.stderr[-3000:]
        assert row["avg_cost_usd"] == pytest.approx(expected_cost(server), rel=1e-9)
        grep = subprocess.run(["grep", "-rl", MARKER, str(home)], capture_output=True, text=True)
        assert grep.returncode == 1, grep.stdout
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_text_task_answer_is_the_last_agent_message(tmp_path: Path) -> None:
    with ResponsesServer(lambda req: text("The answer is 42.")) as server:
        spec, env = _spec_env(server)
        req = make_request(tmp_path, spec, env=env)  # no workspace: a text task
        result = make_agent(spec).run(req)
    assert result.status == COMPLETED, result.error
    assert result.answer == "The answer is 42."
