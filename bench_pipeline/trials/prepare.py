"""`prepare` commands: run identically in each fresh checkout, before the agent.

The suite's `prepare_commands`/`prepare`, then the task's `prepare`, are argument arrays (no
shell) run in order in the workspace, with the scrubbed environment and the trial's own HOME,
once per trial (never per attempt). Each command's argv, exit code, duration and output go to
the trial's evidence (`prepare.json`, `prepare-<n>.log`). A command that fails or times out
ends the trial as `workspace_error`: infrastructure, never scored as the agent's failure.

**Cache.** Work that prepare commands download or build (pip wheels, npm tarballs…) is kept in
a cache folder shared by every trial whose prepare is identical, so repeated trials of one task
at one commit don't fetch and build it again. Its key is the sha256 of what makes the work
identical: the repository (path or URL), the base commit, the exact command arrays in order,
the harness's Python (path and version, since `python` runs it) and the machine type
(`platform.machine()`). The folder is `$BENCH_HOME/cache/prepare/<key>`; commands see it as
`{cache}` in their arguments and through `XDG_CACHE_HOME` and `PIP_CACHE_DIR`. The commands
themselves still run in every trial: what they produce in the workspace (a venv, an editable
install) holds absolute paths of that workspace and is never copied between trials, so each
trial's checkout is prepared exactly as the first one was. `prepare.json` records the key and
whether the cache already existed (`cache_hit`).
"""

from __future__ import annotations

import hashlib
import json
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_pipeline.workspace.process import run_command, scrubbed_env

COMPLETE_MARKER = ".bench-prepared"


@dataclass
class PrepareResult:
    ok: bool
    error: str | None = None
    records: list[dict[str, Any]] = field(default_factory=list)
    cache_key: str | None = None
    cache_hit: bool = False
    duration_seconds: float = 0.0


def cache_key(repo: str, base_sha: str, commands: tuple[tuple[str, ...], ...]) -> str:
    blob = json.dumps(
        {
            "repo": repo,
            "base_sha": base_sha,
            "commands": [list(c) for c in commands],
            "python": [sys.executable, sys.version],
            "machine": platform.machine(),
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def run_prepare(
    commands: tuple[tuple[str, ...], ...],
    workspace: Path,
    home: Path,
    evidence_dir: Path,
    deadline: float,
    repo: str,
    base_sha: str,
    cache_root: Path | None,
    redact: Any = lambda s: s,
    cancelled: Any = None,
) -> PrepareResult:
    """Run the commands in order; stop at the first failure. Writes the evidence files."""
    result = PrepareResult(ok=True)
    if not commands:
        return result
    start = time.monotonic()
    cache: Path | None = None
    extra: dict[str, str] = {}
    if cache_root is not None:
        result.cache_key = cache_key(repo, base_sha, commands)
        cache = cache_root / result.cache_key
        result.cache_hit = (cache / COMPLETE_MARKER).is_file()
        cache.mkdir(parents=True, exist_ok=True)
        extra = {"XDG_CACHE_HOME": str(cache), "PIP_CACHE_DIR": str(cache / "pip")}
    env = scrubbed_env(home=home, extra=extra)
    for i, argv in enumerate(commands, start=1):
        args = [a.replace("{cache}", str(cache or home / ".cache")) for a in argv]
        args = [a.replace("{workspace}", str(workspace)) for a in args]
        run = run_command(
            args, workspace, env, max(deadline - time.monotonic(), 1), cancelled=cancelled
        )
        log = f"prepare-{i}.log"
        (evidence_dir / log).write_text(redact(run.output), encoding="utf-8")
        result.records.append(
            {
                "argv": list(argv),
                "exit_code": run.exit_code,
                "timed_out": run.timed_out,
                "duration_seconds": round(run.duration_seconds, 4),
                "log": log,
            }
        )
        if run.exit_code != 0:
            if run.timed_out:
                why = "timed out (the trial's timeout_seconds)"
            elif run.exit_code is None:
                why = run.output.strip().splitlines()[0] if run.output.strip() else "not started"
            else:
                why = f"exited {run.exit_code}"
            result.ok = False
            result.error = f"prepare command {i} {list(argv)} {why} (see {log})"
            break
    result.duration_seconds = round(time.monotonic() - start, 4)
    if result.ok and cache is not None:
        (cache / COMPLETE_MARKER).write_text("ok\n")
    (evidence_dir / "prepare.json").write_text(
        json.dumps(
            {
                "ok": result.ok,
                "error": result.error,
                "cache_key": result.cache_key,
                "cache_hit": result.cache_hit,
                "duration_seconds": result.duration_seconds,
                "commands": result.records,
            },
            indent=2,
        ),
        encoding="utf-8",
    )
    return result
