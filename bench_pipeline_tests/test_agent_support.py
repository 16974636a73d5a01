"""Shared builders for the agent tests: real dataclasses, no mocks of our own code."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

from bench_pipeline.agents.base import AgentRequest
from bench_pipeline.agents.transcript import Transcript
from bench_pipeline.formats.model import AgentSpec, Prices, Task, Turn
from bench_pipeline.workspace.process import scrubbed_env

PRICES = Prices(
    {
        "claude-test": {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75},
        "gpt-test": {"input": 1.25, "output": 10.0, "cache_read": 0.125},
    }
)


def make_task(text: bool = False, prompt: str = "Do the thing.", turns: tuple[Turn, ...] = ()):
    return Task(
        id="t1",
        suite="s",
        title="Task one",
        prompt=prompt,
        repo=None if text else "/nonexistent/repo",
        base_ref=None if text else "main",
        base_sha=None,
        turns=turns,
    )


def make_spec(kind: str, **kw: Any) -> AgentSpec:
    return AgentSpec(name=kw.pop("name", "a1"), kind=kind, source_file="agents/a1.yaml", **kw)


def git_workspace(root: Path, files: dict[str, str] | None = None) -> Path:
    ws = root / "ws"
    ws.mkdir()
    for name, content in (files or {}).items():
        (ws / name).parent.mkdir(parents=True, exist_ok=True)
        (ws / name).write_text(content)
    env = scrubbed_env(extra={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "HOME": str(root)})
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for argv in (
        ["git", "init", "-q"],
        ["git", "add", "-A"],
        ["git", "commit", "-qm", "base", "--allow-empty"],
    ):
        subprocess.run(argv, cwd=ws, env=env, check=True)
    return ws


def make_request(
    tmp_path: Path,
    spec: AgentSpec,
    task: Task | None = None,
    workspace: Path | None = None,
    prompt: str | None = None,
    env: dict[str, str] | None = None,
    seconds: float = 60.0,
    secrets: tuple[str, ...] = (),
    state: dict[str, Any] | None = None,
    attempt: int = 1,
) -> AgentRequest:
    task = task or make_task(text=workspace is None)
    evidence = tmp_path / "evidence"
    evidence.mkdir(parents=True, exist_ok=True)
    inputs = tmp_path / "inputs"
    inputs.mkdir(parents=True, exist_ok=True)
    return AgentRequest(
        task=task,
        agent=spec,
        workspace=workspace,
        prompt=prompt if prompt is not None else task.prompt,
        attempt=attempt,
        deadline=time.monotonic() + seconds,
        spent_usd=0.0,
        inputs_dir=inputs,
        evidence_dir=evidence,
        transcript=Transcript(evidence / "transcript.jsonl", secrets),
        prices=PRICES,
        env=env if env is not None else scrubbed_env(),
        state=state if state is not None else {},
        work_dir=tmp_path / "work",  # as the runner gives: a CLI agent's home goes here
    )


def transcript_events(request: AgentRequest) -> list[dict[str, Any]]:
    import json

    path = request.transcript.path
    if path is None or not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]
