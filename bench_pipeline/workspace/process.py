"""Run one command as its own process group with a scrubbed environment and a hard timeout.

Every agent and grader process goes through `run_command`: argument arrays only (no shell),
a new session so that a timeout kills the whole group, children included.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

# Variables every child gets (when set in our environment); everything else is scrubbed unless
# the agent's `env` allow-list names it.
BASE_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "SYSTEMROOT")
MAX_OUTPUT_BYTES = 1_000_000


@dataclass
class CommandResult:
    argv: list[str]
    exit_code: int | None  # None when killed at timeout or cancelled
    output: str  # stdout and stderr interleaved, truncated to MAX_OUTPUT_BYTES
    timed_out: bool
    duration_seconds: float
    pid: int | None = None
    cancelled: bool = False


def scrubbed_env(
    allow: Iterable[str] = (), extra: Mapping[str, str] | None = None, home: Path | None = None
) -> dict[str, str]:
    """A minimal environment: the base variables, the allow-listed ones, then `extra`."""
    env = {k: os.environ[k] for k in (*BASE_ENV, *allow) if k in os.environ}
    env.setdefault("LANG", "C.UTF-8")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    # pytest plugin auto-loading costs ~0.7 s per grader run (PERF-NOTES).
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env["GIT_TERMINAL_PROMPT"] = "0"
    if home is not None:
        env["HOME"] = str(home)
    env.update(extra or {})
    return env


def resolve_argv(argv: list[str]) -> list[str]:
    """Map `python`/`python3` to this interpreter: skips pyenv shims (~0.2 s a call) and makes
    graders run with the same Python the harness was installed with."""
    if argv and argv[0] in ("python", "python3"):
        return [sys.executable, *argv[1:]]
    if argv and os.sep not in argv[0]:
        found = shutil.which(argv[0])
        if found:
            return [found, *argv[1:]]
    return argv


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# Process groups alive right now, so that `bench cancel` and crash handling can kill them.
_live_groups: set[int] = set()
_live_lock = threading.Lock()


def live_process_groups() -> set[int]:
    with _live_lock:
        return set(_live_groups)


def run_command(
    argv: list[str],
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    stdin_text: str | None = None,
    cancelled: Callable[[], bool] | None = None,
    on_start: Callable[[int], None] | None = None,
) -> CommandResult:
    """Run `argv` without a shell in a new process group; kill the group on timeout/cancel.

    Output goes to an unnamed temp file rather than a pipe so that a grandchild holding the
    pipe open cannot block us after the group leader exits.
    """
    argv = resolve_argv([str(a) for a in argv])
    start = time.monotonic()
    with tempfile.TemporaryFile() as out:
        try:
            proc = subprocess.Popen(
                argv,
                cwd=str(cwd),
                env=dict(env),
                stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            return CommandResult(argv, None, f"cannot start {argv[0]}: {exc}", False, 0.0)
        with _live_lock:
            _live_groups.add(proc.pid)
        if on_start:
            on_start(proc.pid)
        timed_out = was_cancelled = False
        try:
            if stdin_text is not None:
                try:
                    proc.stdin.write(stdin_text.encode())  # type: ignore[union-attr]
                    proc.stdin.close()  # type: ignore[union-attr]
                except BrokenPipeError:
                    pass
            deadline = start + max(timeout, 0.0)
            while True:
                try:
                    proc.wait(timeout=min(0.2, max(deadline - time.monotonic(), 0.01)))
                    break
                except subprocess.TimeoutExpired:
                    if time.monotonic() >= deadline:
                        timed_out = True
                    elif cancelled is not None and cancelled():
                        was_cancelled = True
                    else:
                        continue
                    kill_group(proc.pid)
                    proc.wait()
                    break
        finally:
            # Reap stragglers: background children left behind by a finished command.
            kill_group(proc.pid)
            with _live_lock:
                _live_groups.discard(proc.pid)
        out.seek(0)
        data = out.read(MAX_OUTPUT_BYTES + 1)
    text = data[:MAX_OUTPUT_BYTES].decode("utf-8", errors="replace")
    if len(data) > MAX_OUTPUT_BYTES:
        text += "\n[output truncated]"
    code = None if (timed_out or was_cancelled) else proc.returncode
    return CommandResult(
        argv, code, text, timed_out, time.monotonic() - start, proc.pid, was_cancelled
    )
